"""Upsert / delete handlers: the event-handler style as a thin layer over a reconcile function.

    handlers = Handlers(on_upsert=upsert, on_delete=cleanup)
    controller.reconcile(handlers)

on_upsert runs while the object exists and is not being deleted. on_delete runs when the request
is finalizing (the layer sets `finalized` when on_delete answers without error) and for the
deletion notice of a gone primary (answer only events / error / requeue then). An object being
deleted without our finalizer gets an empty answer. Same rules as sdk/cpp/handlers.h. Either
handler may be a plain function or `async def` (awaited on the calling worker thread, as a
reconcile function is: controller.py).

Thread-safety: immutable; may be called concurrently.
"""

from __future__ import annotations

from typing import Awaitable, Callable, Optional, TypeVar, Union

from ctrlhost_sdk._awaitable import resolve
from ctrlhost_sdk.request import Request
from ctrlhost_sdk.result import Result

HandlerFn = Callable[[Request], Union[Optional[Result], Awaitable[Optional[Result]]]]
H = TypeVar("H", bound=HandlerFn)


class Handlers:
    def __init__(self, on_upsert: Optional[HandlerFn] = None,
                 on_delete: Optional[HandlerFn] = None) -> None:
        self._upsert = on_upsert
        self._delete = on_delete

    def on_upsert(self, fn: H) -> H:
        """Decorator form."""
        self._upsert = fn
        return fn

    def on_delete(self, fn: H) -> H:
        self._delete = fn
        return fn

    def _call(self, fn: Optional[HandlerFn], request: Request) -> Result:
        result = resolve(fn(request)) if fn is not None else None
        return Result() if result is None else result

    def __call__(self, request: Request) -> Result:
        if not request.exists:
            return self._call(self._delete, request)
        if request.finalizing:
            result = self._call(self._delete, request)
            if result.error is None:
                result.finalized = True
            return result
        if request.deleting:
            return Result()  # going away without our finalizer
        return self._call(self._upsert, request)
