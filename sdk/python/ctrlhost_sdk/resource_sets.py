"""Resource sets: one controller, several ways of reconciling, chosen per object (operatorkit's
ResourceRouter / ResourceSet). The same semantics as sdk/cpp resource_sets.h and
sdk/node/src/resource_sets.js; the conformance suite checks that they answer alike.

    router = ResourceRouter()
    router.add("v1", handles=lambda req: req.labels.get("version") != "v2", reconcile=reconcile_v1)
    router.add("v2", handles=lambda req: req.labels.get("version") == "v2", reconcile=reconcile_v2,
               init_context=lambda req: {"replicas": 3})
    webapps.reconcile(router.route)     # reconcile_v2(req, context) gets {"replicas": 3}

Per object:
- exactly one set's `handles(req)` is true: its `init_context(req)` (none: {}) then its
  `reconcile(req, context)` run, and their result is the answer (an exception propagates as
  from any reconcile function; `reconcile` may be `async def`);
- none: the object is skipped: an empty Result, `router.skipped` counts it, a debug line;
- several: nothing runs; the answer is a terminal error, the condition Reconciled=False reason
  AmbiguousRoute and a Warning event AmbiguousRoute, all with the message
  'the object matches 2 resource sets: "v2", "canary"; exactly one must handle it';
- a request whose object is gone asks no set: an empty Result, not counted.

Thread-safety: add sets before serving; `route` is then safe from the SDK's worker threads (the
count is updated under a lock).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional

from ctrlhost_sdk import log
from ctrlhost_sdk.request import Request
from ctrlhost_sdk.result import FALSE, WARNING, Result

REASON_AMBIGUOUS_ROUTE = "AmbiguousRoute"

Context = Dict[str, Any]


class ResourceSet:
    """One way of reconciling: which objects it handles, its per-object context, its reconcile."""

    def __init__(self, name: str, handles: Callable[[Request], bool],
                 reconcile: Callable[[Request, Context], Any],
                 init_context: Optional[Callable[[Request], Context]] = None) -> None:
        if not name:
            raise ValueError("a resource set needs a name")
        if not callable(handles) or not callable(reconcile):
            raise ValueError('resource set "%s" needs handles and reconcile' % name)
        self.name = name
        self.handles = handles
        self.reconcile = reconcile
        self.init_context = init_context


class ResourceRouter:
    """Runs exactly one ResourceSet per object (see the module docstring)."""

    def __init__(self) -> None:
        self._sets: List[ResourceSet] = []
        self._lock = threading.Lock()
        self._skipped = 0

    def add(self, name: str, handles: Callable[[Request], bool],
            reconcile: Callable[[Request, Context], Any],
            init_context: Optional[Callable[[Request], Context]] = None) -> "ResourceRouter":
        """ValueError for an empty or duplicate name or a missing handles/reconcile."""
        rs = ResourceSet(name, handles, reconcile, init_context)
        if any(s.name == name for s in self._sets):
            raise ValueError('resource set "%s" is already defined' % name)
        self._sets.append(rs)
        return self

    @property
    def skipped(self) -> int:
        """Objects no set handled, since the router was made."""
        with self._lock:
            return self._skipped

    def route(self, req: Request) -> Any:
        """The answer for `req`: usable as a controller's reconcile function."""
        if not req.exists:
            return Result()
        matches = [s for s in self._sets if s.handles(req)]
        if len(matches) == 1:
            chosen = matches[0]
            context: Context = chosen.init_context(req) if chosen.init_context else {}
            return chosen.reconcile(req, context)
        if not matches:
            with self._lock:
                self._skipped += 1
            log.debug("no resource set handles the object: skipped",
                      key="%s/%s" % (req.namespace, req.name))
            return Result()
        message = "the object matches %d resource sets: %s; exactly one must handle it" % (
            len(matches), ", ".join('"%s"' % s.name for s in matches))
        result = Result.terminal_error(message)
        result.set_condition("Reconciled", FALSE, REASON_AMBIGUOUS_ROUTE, message)
        result.event(WARNING, REASON_AMBIGUOUS_ROUTE, message)
        return result
