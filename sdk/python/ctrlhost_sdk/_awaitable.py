"""Running `async def` reconcile functions from the SDK's worker threads.

    result = resolve(fn(request))   # fn plain or async: a Result either way

Each thread gets its own event loop on first use and keeps it for its later reconciles, so an
async reconcile costs no loop creation and libraries that cache per-loop clients keep working.
Thread-safety: a loop is only touched by the thread that owns it.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Awaitable, Optional, TypeVar, Union, cast

T = TypeVar("T")

_loops = threading.local()


def run_awaitable(awaitable: Awaitable[T]) -> T:
    """Runs `awaitable` to completion on this thread's event loop (created on first use and
    kept for the thread's later reconciles). RuntimeError when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        if inspect.iscoroutine(awaitable):
            awaitable.close()  # never awaited: no "coroutine was never awaited" warning
        raise RuntimeError("an async reconcile cannot run inside a running event loop "
                           "(call it from a plain thread)")
    loop: Optional[asyncio.AbstractEventLoop] = getattr(_loops, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _loops.loop = loop
    return loop.run_until_complete(_as_coroutine(awaitable))


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def resolve(value: Union[T, Awaitable[T]]) -> T:
    """`value`, or what it resolves to when it is awaitable (see run_awaitable)."""
    if inspect.isawaitable(value):
        return run_awaitable(value)
    return cast(T, value)
