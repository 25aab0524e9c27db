"""Controller declaration: what a controller reconciles, owns and watches, and its function.

    webapp = (
        Controller("webapp")
        .for_("apps.example.com", "v1", "WebApp")
        .owns("apps", "v1", "Deployment")
        .owns("", "v1", "Service", delete_absent=True)
        .watches("", "v1", "ConfigMap", field_path="spec.configMapName")
        .finalizer("apps.example.com/cleanup")
        .max_concurrent(4)
        .resync(300)
    )

    @webapp.reconcile
    def reconcile(req):
        return Result()

    @webapp.reconcile                 # or a coroutine: run on the plugin's one event loop
    async def reconcile(req):         # while the worker that took the request waits for it
        await some_client.get(...)
        return Result()

`spec()` produces the pb.ControllerSpec sent in Describe; `invoke()` runs the function on one
pb.ReconcileCall and always returns a response (exceptions and invalid results become retryable
errors).

Reconcile functions may be plain functions or `async def` (anything returning an awaitable):
the awaitable runs on the plugin's one shared event loop, in a thread of its own (see
_awaitable.py), as Kopf users expect: loop-bound objects (asyncio.Lock, an aiohttp session)
made in one reconcile work in any other. The worker thread that took the request waits for it,
so an async reconcile still occupies one worker while it runs and the controller's concurrency
limit holds; plain reconciles never touch the loop and run in parallel on the workers. Calling
`invoke` synchronously from a coroutine on that loop is refused (it would deadlock the loop):
that reconcile answers a retryable error saying so.

Thread-safety: declare before serving; afterwards a Controller is only read and `invoke` may run
concurrently.
"""

from __future__ import annotations

import datetime
import re
import threading
import traceback
from typing import (Any, Awaitable, Callable, FrozenSet, Iterable, List, Optional, Set, Tuple,
                    TypeVar, Union)

from ctrlhost_sdk import log
from ctrlhost_sdk._awaitable import resolve
from ctrlhost_sdk._proto import pb
from ctrlhost_sdk.request import Request, RequestError
from ctrlhost_sdk.tasks import TaskFn
from ctrlhost_sdk.result import (ALL_CAPABILITIES, InvalidResult, ReconcileError, Result,
                                 error_response)

# What a reconcile function may return: a Result (None means an empty one), or an awaitable of
# one (an `async def` function).
ReconcileReturn = Union[Optional[Result], Awaitable[Optional[Result]]]
ReconcileFn = Callable[[Request], ReconcileReturn]
F = TypeVar("F", bound=ReconcileFn)

_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
def _gvk(group: str, version: str, kind: str) -> pb.GroupVersionKind:
    return pb.GroupVersionKind(group=group, version=version, kind=kind)


def _duration(seconds: Union[float, datetime.timedelta]) -> Any:
    if isinstance(seconds, datetime.timedelta):
        seconds = seconds.total_seconds()
    d = pb.ControllerSpec().resync_period.__class__()
    d.seconds = int(seconds)
    d.nanos = int(round((seconds - int(seconds)) * 1e9)) % 1000000000
    return d


class Controller:
    """A controller declaration (builder methods return self) and its reconcile function."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._spec = pb.ControllerSpec(name=name)
        self._fn: Optional[ReconcileFn] = None
        self._required: Set[int] = set()
        # None: children are sent when the controller owns kinds.
        self._children: Optional[bool] = None
        # Background tasks in declaration order: (name, function); see tasks.py.
        self._tasks: List[Tuple[str, TaskFn]] = []

    # Declaration.
    def for_(self, group: str, version: str, kind: str) -> Controller:
        """The primary kind. ("for" is a keyword in Python.)"""
        self._spec.primary.CopyFrom(_gvk(group, version, kind))
        return self

    def owns(self, group: str, version: str, kind: str, cluster_scoped: bool = False,
             delete_absent: bool = False) -> Controller:
        self._spec.owns.add(kind=_gvk(group, version, kind), cluster_scoped=cluster_scoped,
                            delete_absent=delete_absent)
        if delete_absent:
            self._required.add(pb.CAPABILITY_SERVER_SIDE_APPLY)
        return self

    def watches(self, group: str, version: str, kind: str, *,
                owner_reference: Union[bool, str, None] = None,
                name_label: Optional[str] = None,
                primary_selector_path: Optional[str] = None,
                field_path: Optional[str] = None,
                enqueue_all: Union[bool, str, None] = None,
                label_selector: str = "", include_in_requests: bool = False) -> Controller:
        """A watched kind with exactly one mapping: owner_reference=True|"controller",
        name_label="example.com/app", primary_selector_path="spec.selector",
        field_path="spec.configMapName", or enqueue_all=True|"same-namespace"."""
        given = [m for m in (owner_reference, name_label, primary_selector_path, field_path,
                             enqueue_all) if m is not None]
        if len(given) != 1:
            raise ValueError("watches(%s): give exactly one mapping" % kind)
        w = self._spec.watches.add(kind=_gvk(group, version, kind), label_selector=label_selector,
                                   include_in_requests=include_in_requests)
        if owner_reference is not None:
            w.owner_reference.controller_only = owner_reference == "controller"
        elif name_label is not None:
            w.label.name_label = name_label
        elif primary_selector_path is not None:
            w.label.primary_selector_path = primary_selector_path
        elif field_path is not None:
            w.field_path.primary_field_path = field_path
        else:
            w.enqueue_all.same_namespace_only = enqueue_all == "same-namespace"
        if include_in_requests:
            self.request_contents(related_objects=True)
        return self

    def finalizer(self, name: str) -> Controller:
        self._spec.finalizer = name
        return self

    def max_concurrent(self, n: int) -> Controller:
        self._spec.max_concurrent_reconciles = n
        return self

    def resync(self, seconds: Union[float, datetime.timedelta]) -> Controller:
        """Resync period in seconds or a timedelta."""
        self._spec.resync_period.CopyFrom(_duration(seconds))
        return self

    def schedule(self, cron: str, time_zone: str = "") -> Controller:
        self._spec.schedules.add(cron=cron, time_zone=time_zone)
        self._required.add(pb.CAPABILITY_SCHEDULES)
        return self

    def namespaces(self, *names: str) -> Controller:
        self._spec.namespaces.extend(names)
        return self

    def label_selector(self, selector: str) -> Controller:
        self._spec.label_selector = selector
        return self

    def predicates(self, primary_status_changes: bool = False,
                   ignore_child_status_changes: bool = False) -> Controller:
        self._spec.predicates.primary_status_changes = primary_status_changes
        self._spec.predicates.ignore_child_status_changes = ignore_child_status_changes
        return self

    def request_contents(self, children: Optional[bool] = None,
                         related_objects: Optional[bool] = None,
                         metadata_only_kinds: Iterable[Tuple[str, str, str]] = (),
                         strip_fields: Iterable[str] = ()) -> Controller:
        """What requests carry. children defaults to True when the controller owns kinds.
        metadata_only_kinds: (group, version, kind) tuples."""
        rc = self._spec.request_contents
        if children is not None:
            self._children = children
        if related_objects is not None:
            rc.related_objects = related_objects
        for g, v, k in metadata_only_kinds:
            rc.metadata_only_kinds.add(group=g, version=v, kind=k)
        rc.strip_fields.extend(strip_fields)
        return self

    def reconcile(self, fn: F) -> F:
        """Sets the function Request -> Result, plain or `async def` (usable as a decorator;
        returns fn)."""
        self._fn = fn
        return fn

    def background_task(self, name: str) -> Callable[[TaskFn], TaskFn]:
        """Declares a background task (a decorator; see tasks.py): `fn(ctx)` runs while the
        host runs this controller on this plugin instance."""
        if not _NAME.match(name):
            raise ValueError("background task name %r is not a lowercase RFC 1123 label" % name)
        if any(n == name for n, _ in self._tasks):
            raise ValueError("controller %s: background task %r declared twice"
                             % (self.name, name))

        def register(fn: TaskFn) -> TaskFn:
            self._tasks.append((name, fn))
            self._spec.background_tasks.add(name=name)
            self._required.add(pb.CAPABILITY_BACKGROUND_TASKS)
            return fn
        return register

    @property
    def tasks(self) -> List[Tuple[str, TaskFn]]:
        return list(self._tasks)

    # Use.
    def spec(self) -> pb.ControllerSpec:
        """The validated pb.ControllerSpec; ValueError naming the problem."""
        if not _NAME.match(self.name):
            raise ValueError("controller name %r is not a lowercase RFC 1123 label" % self.name)
        if not self._spec.primary.kind or not self._spec.primary.version:
            raise ValueError("controller %s: for_() is required" % self.name)
        if self._fn is None:
            raise ValueError("controller %s: no reconcile function" % self.name)
        if self._spec.finalizer and "/" not in self._spec.finalizer:
            raise ValueError("controller %s: finalizer must be a qualified name (domain/name)"
                             % self.name)
        spec = pb.ControllerSpec()
        spec.CopyFrom(self._spec)
        rc = spec.request_contents
        rc.children = self._children if self._children is not None else len(spec.owns) > 0
        if rc.children:
            self._required.add(pb.CAPABILITY_CHILDREN)
        if rc.related_objects:
            self._required.add(pb.CAPABILITY_RELATED_OBJECTS)
        if rc.metadata_only_kinds:
            self._required.add(pb.CAPABILITY_METADATA_ONLY)
        return spec

    def required_capabilities(self) -> Set[int]:
        self.spec()
        return set(self._required)

    def invoke(self, request_id: int, call: pb.ReconcileCall,
               capabilities: FrozenSet[int] = ALL_CAPABILITIES,
               cancelled: Optional[threading.Event] = None) -> pb.ReconcileResponse:
        """Runs the controller on a pb.ReconcileCall; never raises."""
        try:
            request = Request.from_call(call, cancelled)
        except RequestError as e:
            return error_response(request_id, "cannot read the request: %s" % e)
        return self.invoke_request(request_id, request, capabilities)

    def invoke_request(self, request_id: int, request: Request,
                       capabilities: FrozenSet[int] = ALL_CAPABILITIES) -> pb.ReconcileResponse:
        """Runs the function on a parsed Request (awaiting it when it is async); never
        raises."""
        failure: str
        try:
            if self._fn is None:
                raise InvalidResult("no reconcile function")
            result: Any = resolve(self._fn(request))
            if result is None:
                result = Result()
            if not isinstance(result, Result):
                raise InvalidResult("the reconcile function returned %s, not a Result"
                                    % type(result).__name__)
            return result.to_response(request, request_id, capabilities)
        except InvalidResult as e:
            failure = "invalid reconcile result: %s" % e
        except ReconcileError as e:
            return error_response(request_id, str(e), terminal=e.terminal, reason=e.reason,
                                  retry_after=e.retry_after)
        except Exception as e:  # noqa: BLE001 - user code must never take the plugin down
            failure = "reconcile raised %s: %s" % (type(e).__name__, e)
            log.debug("reconcile traceback", controller=self.name,
                      traceback=traceback.format_exc())
        return error_response(request_id, failure)
