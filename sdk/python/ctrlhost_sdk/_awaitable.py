"""Running `async def` reconcile functions from the SDK's worker threads.

    result = resolve(fn(request))   # fn plain or async: a Result either way

Every coroutine of the plugin runs on one shared asyncio event loop, in a dedicated thread
("ctrlhost-asyncio"), as in Kopf: a worker thread submits the coroutine with
asyncio.run_coroutine_threadsafe and blocks until it is done, so an async reconcile still
occupies one worker while it runs (the host's per-controller concurrency holds), and loop-bound
objects (asyncio.Lock, clients of aiohttp and friends, futures) created in one reconcile work in
any other. Plain (sync) reconciles never touch the loop and run in parallel on the workers as
before.

Lifetime: the loop starts on first use. PluginServer holds it from start to shutdown
(acquire/release): when the last holder releases it, pending coroutines are cancelled, the loop
stops and its thread is joined; a later use starts a fresh loop. Without a holder (a unit test
calling Controller.invoke) the loop lives until the process exits.

Thread-safety: every function here may be called from any thread. The loop itself is only run by
its own thread; a blocking coroutine stalls every async reconcile of the plugin (await, or use
loop.run_in_executor for blocking calls), as in any asyncio program.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import inspect
import threading
from typing import Awaitable, Optional, TypeVar, Union, cast

T = TypeVar("T")

# How often a worker waiting on a coroutine checks that the loop still runs.
_STOPPED_LOOP_CHECK_SECONDS = 0.5


class SharedLoop:
    """One event loop on a dedicated daemon thread, started on demand. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # State below is protected by _lock.
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._holders = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started when there is none)."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                started = threading.Event()
                thread = threading.Thread(target=self._run, args=(loop, started),
                                          name="ctrlhost-asyncio", daemon=True)
                thread.start()
                started.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(started.set)
        loop.run_forever()
        # Stopped: cancel what is left so the workers waiting on it get an answer.
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    def run(self, awaitable: Awaitable[T]) -> T:
        """Runs `awaitable` to completion on the shared loop and returns its result (or raises
        its exception). RuntimeError when called from the loop's own thread (a coroutine that
        blocks on another would deadlock the loop)."""
        loop = self.loop()
        if threading.current_thread() is self._thread:
            if inspect.iscoroutine(awaitable):
                awaitable.close()  # never awaited: no "coroutine was never awaited" warning
            raise RuntimeError("an async reconcile cannot be run synchronously from a coroutine "
                               "on the plugin's event loop (await it instead)")
        future = asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), loop)
        # A coroutine submitted in the instant the loop stops would never run: wait in steps and
        # give up once the loop is closed, so no worker waits forever at shutdown.
        while True:
            try:
                return future.result(timeout=_STOPPED_LOOP_CHECK_SECONDS)
            except concurrent.futures.TimeoutError:
                if future.done():
                    raise  # the coroutine's own TimeoutError
                if loop.is_closed():
                    future.cancel()
                    raise RuntimeError("the plugin's event loop stopped before this async "
                                       "reconcile ran (the plugin is shutting down)") from None

    def acquire(self) -> None:
        """Holds the loop (a started plugin server) until the matching release."""
        with self._lock:
            self._holders += 1

    def release(self) -> None:
        """Ends a hold; the last one stops the loop (see stop)."""
        with self._lock:
            self._holders -= 1
            if self._holders > 0:
                return
            self._holders = 0
        self.stop()

    def stop(self) -> None:
        """Cancels the loop's pending coroutines, stops it and joins its thread. A later run
        starts a fresh loop."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join()

    def running_loop(self) -> Optional[asyncio.AbstractEventLoop]:
        """The loop when it runs, else None (for tests and diagnostics)."""
        with self._lock:
            return self._loop


# The plugin's loop: one per process, which serves one plugin.
shared_loop = SharedLoop()
atexit.register(shared_loop.stop)


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def run_awaitable(awaitable: Awaitable[T]) -> T:
    """Runs `awaitable` to completion on the plugin's shared event loop (see SharedLoop.run)."""
    return shared_loop.run(awaitable)


def resolve(value: Union[T, Awaitable[T]]) -> T:
    """`value`, or what it resolves to when it is awaitable (see run_awaitable)."""
    if inspect.isawaitable(value):
        return run_awaitable(value)
    return cast(T, value)
