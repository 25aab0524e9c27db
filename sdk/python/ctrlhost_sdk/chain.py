"""The resource-chain style as a thin layer over a reconcile function (as sdk/cpp and sdk/node).

An ordered list of dependents, each ensure-created (with an optional readiness check) or, when
its `when` says no, ensure-deleted. A dependent is created only once every earlier one is ready;
unwanted ones go in reverse order (one is kept until every later unwanted one is gone). The built
function adds the condition DependentsReady (True AllReady / False Waiting).

    chain = (DependentChain()
             .add("db", "apps/v1", "StatefulSet", desired=lambda req: {...},
                  ready=lambda sts: find_path(sts, "status.readyReplicas") or 0 >= 1)
             .add("web", "apps/v1", "Deployment", desired=lambda req: {...}))
    controller.reconcile(chain.build())

A desired function that raises fails the reconcile: ReconcileError(terminal=True) -> terminal,
anything else -> retryable.

Thread-safety: immutable once built; may be called concurrently.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from ctrlhost_sdk.handlers import Handlers
from ctrlhost_sdk.request import JsonObject, Request, find_path
from ctrlhost_sdk.result import RETRYABLE, TERMINAL, TRUE, FALSE, ReconcileError, Result


# desired(request) -> the object; when(request) -> wanted?; ready(current object) -> ready?;
# then(request, state, result) adds to the result after the chain ran.
DesiredFn = Callable[[Request], JsonObject]
WhenFn = Callable[[Request], Any]
ReadyFn = Callable[[JsonObject], Any]
ThenFn = Callable[[Request, "ChainState", Result], None]


class ChainState:
    """What one pass found: names of ready, pending and deleting dependents."""

    def __init__(self) -> None:
        self.ready: List[str] = []
        self.pending: List[str] = []
        self.deleting: List[str] = []

    @property
    def all_ready(self) -> bool:
        return not self.pending and not self.deleting


class _Dependent:
    __slots__ = ("name", "api_version", "kind", "desired", "when", "ready")

    def __init__(self, name: str, api_version: str, kind: str, desired: Optional[DesiredFn],
                 when: Optional[WhenFn], ready: Optional[ReadyFn]) -> None:
        self.name = name
        self.api_version = api_version
        self.kind = kind
        self.desired = desired
        self.when = when
        self.ready = ready


def _name_of(obj: Any, request: Request) -> str:
    name = find_path(obj, "metadata.name")
    return name if isinstance(name, str) else request.name


def _find_child(request: Request, api_version: str, kind: str,
                name: str) -> Optional[JsonObject]:
    for o in request.children_of_kind(kind, api_version):
        if o.name == name:
            return o.json
    return None


class DependentChain:
    def __init__(self) -> None:
        self._dependents: List[_Dependent] = []

    def add(self, name: str, api_version: str, kind: str, desired: Optional[DesiredFn],
            when: Optional[WhenFn] = None, ready: Optional[ReadyFn] = None) -> DependentChain:
        """desired(request) -> dict (the object, without apiVersion/kind); when(request) -> bool
        (default: always wanted); ready(current dict) -> bool (default: exists)."""
        self._dependents.append(_Dependent(name, api_version, kind, desired, when, ready))
        return self

    def _desired_of(self, d: _Dependent, request: Request) -> JsonObject:
        obj = d.desired(request) if d.desired is not None else {}
        if not isinstance(obj, dict):
            raise ReconcileError("dependent %s: desired() did not return an object" % d.name,
                                 terminal=True)
        return dict(obj, apiVersion=d.api_version, kind=d.kind)

    def reconcile(self, request: Request, result: Result) -> ChainState:
        """Adds the desired objects to `result`; returns a ChainState. Sets the result's error
        when a desired function raises."""
        state = ChainState()
        deps = self._dependents
        wanted = [True] * len(deps)
        keep_for_order = [False] * len(deps)
        later_unwanted_present = False
        for i in range(len(deps) - 1, -1, -1):
            d = deps[i]
            wanted[i] = d.when is None or bool(d.when(request))
            if wanted[i]:
                continue
            try:
                name = _name_of(self._desired_of(d, request), request)
            except Exception:  # noqa: BLE001 - an unwanted dependent's name falls back
                name = request.name
            if _find_child(request, d.api_version, d.kind, name) is not None:
                state.deleting.append(d.name)
                keep_for_order[i] = later_unwanted_present
                later_unwanted_present = True
        predecessors_ready = True
        for i, d in enumerate(deps):
            if not wanted[i] and not keep_for_order[i]:
                continue
            try:
                desired = self._desired_of(d, request)
            except ReconcileError as e:
                result.set_error(TERMINAL if e.terminal else RETRYABLE,
                                 "dependent %s: %s" % (d.name, e))
                return state
            except Exception as e:  # noqa: BLE001 - user code: a retryable error
                result.set_error(RETRYABLE, "dependent %s: %s" % (d.name, e))
                return state
            current = _find_child(request, d.api_version, d.kind, _name_of(desired, request))
            if not wanted[i]:
                result.desire(desired)  # kept only until the later unwanted ones are gone
                continue
            if current is None and not predecessors_ready:
                state.pending.append(d.name)  # ensure-created waits for its predecessors
                continue
            result.desire(desired)
            is_ready = current is not None and (d.ready is None or bool(d.ready(current)))
            (state.ready if is_ready else state.pending).append(d.name)
            predecessors_ready = predecessors_ready and is_ready
        return state

    def build(self, then: Optional[ThenFn] = None) -> Callable[[Request], Result]:
        """A reconcile function; then(request, state, result) may add the primary's status."""
        fallback = Handlers()

        def reconcile(request: Request) -> Result:
            if not request.exists or request.deleting:
                return fallback(request)
            result = Result()
            state = self.reconcile(request, result)
            if result.error is None:
                if state.all_ready:
                    result.set_condition("DependentsReady", TRUE, "AllReady",
                                         "%d dependents ready" % len(state.ready))
                else:
                    result.set_condition("DependentsReady", FALSE, "Waiting",
                                         "waiting for " + ", ".join(state.pending + state.deleting))
            if then is not None:
                then(request, state, result)
            return result

        return reconcile
