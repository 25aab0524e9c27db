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

A dependent's `on_pass(request, desired, current, ctx)` step (pass_context.py) runs before it is
created or updated: it may cancel the rest of the pass, cancel only this dependent, and set flags
later steps read. DependentsReady is then False "Cancelled": "<dependent> cancelled the pass:
<reason>; skipped: <a> (<its reason>), <b>; waiting for <c>" (each part only when it applies).

A desired function or step that raises fails the reconcile: ReconcileError(terminal=True) ->
terminal, anything else -> retryable.

Thread-safety: immutable once built; may be called concurrently.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ctrlhost_sdk.handlers import Handlers
from ctrlhost_sdk.pass_context import PassContext, freeze_onto
from ctrlhost_sdk.stage_callbacks import POST_DELETE, PRE_DELETE, StageCallbacks
from ctrlhost_sdk.request import JsonObject, Request, find_path
from ctrlhost_sdk.result import RETRYABLE, TERMINAL, TRUE, FALSE, ReconcileError, Result


# desired(request) -> the object; when(request) -> wanted?; ready(current object) -> ready?;
# then(request, state, result) adds to the result after the chain ran.
DesiredFn = Callable[[Request], JsonObject]
WhenFn = Callable[[Request], Any]
ReadyFn = Callable[[JsonObject], Any]
ThenFn = Callable[[Request, "ChainState", Result], None]
# on_pass(request, desired, current or None, ctx): the step before a create or update.
StepFn = Callable[[Request, JsonObject, Optional[JsonObject], PassContext], None]


class ChainState:
    """What one pass found: names of ready, pending and deleting dependents."""

    def __init__(self) -> None:
        self.ready: List[str] = []
        self.pending: List[str] = []
        self.deleting: List[str] = []
        # Skipped this pass (by their own step or after a cancelled pass), in chain order.
        self.cancelled: List[str] = []
        self.cancel_reasons: Dict[str, str] = {}  # dependents that cancelled themselves
        self.pass_cancelled_by = ""  # empty: the pass ran to the end
        self.pass_cancel_reason = ""
        self.flags: Dict[str, bool] = {}
        # The dependent whose desired function, step or callback raised ("": none); the walk
        # stopped there and the result carries the error.
        self.failed_at = ""

    @property
    def all_ready(self) -> bool:
        """Nothing pending, deleting or skipped, the pass ran to the end, no dependent failed."""
        return (not self.pending and not self.deleting and not self.cancelled
                and not self.pass_cancelled_by and not self.failed_at)

    def not_ready_message(self) -> str:
        parts = []
        if self.pass_cancelled_by:
            parts.append("%s cancelled the pass: %s" % (self.pass_cancelled_by,
                                                        self.pass_cancel_reason))
        if self.cancelled:
            parts.append("skipped: " + ", ".join(
                "%s (%s)" % (n, self.cancel_reasons[n]) if n in self.cancel_reasons else n
                for n in self.cancelled))
        waiting = self.pending + self.deleting
        if waiting:
            parts.append("waiting for " + ", ".join(waiting))
        return "; ".join(parts)


class _Dependent:
    __slots__ = ("name", "api_version", "kind", "desired", "when", "ready", "on_pass")

    def __init__(self, name: str, api_version: str, kind: str, desired: Optional[DesiredFn],
                 when: Optional[WhenFn], ready: Optional[ReadyFn],
                 on_pass: Optional[StepFn]) -> None:
        self.name = name
        self.api_version = api_version
        self.kind = kind
        self.desired = desired
        self.when = when
        self.ready = ready
        self.on_pass = on_pass


def _name_of(obj: Any, request: Request) -> str:
    name = find_path(obj, "metadata.name")
    return name if isinstance(name, str) else request.name


def _find_child(request: Request, api_version: str, kind: str,
                name: str) -> Optional[JsonObject]:
    for o in request.children_of_kind(kind, api_version):
        if o.name == name:
            return o.json
    return None


def is_subset(desired: Any, current: Any) -> bool:
    """Every field of `desired` has the same value in `current` (objects key by key, arrays
    and scalars whole), as the C++ and Node SDKs' IsSubset."""
    if isinstance(desired, dict) and isinstance(current, dict):
        return all(k in current and is_subset(v, current[k]) for k, v in desired.items())
    return bool(desired == current)


def _fail(result: Result, name: str, e: Exception) -> None:
    if isinstance(e, ReconcileError):
        result.set_error(TERMINAL if e.terminal else RETRYABLE, "dependent %s: %s" % (name, e),
                         e.reason, e.retry_after)
    else:
        result.set_error(RETRYABLE, "dependent %s: %s" % (name, e))


class DependentChain:
    def __init__(self) -> None:
        self._dependents: List[_Dependent] = []
        self._callbacks = StageCallbacks()

    def with_callbacks(self, callbacks: StageCallbacks) -> DependentChain:
        """Callbacks per child kind around each create, update and delete
        (stage_callbacks.py)."""
        self._callbacks = callbacks
        return self

    def add(self, name: str, api_version: str, kind: str, desired: Optional[DesiredFn],
            when: Optional[WhenFn] = None, ready: Optional[ReadyFn] = None,
            on_pass: Optional[StepFn] = None) -> DependentChain:
        """desired(request) -> dict (the object, without apiVersion/kind); when(request) -> bool
        (default: always wanted); ready(current dict) -> bool (default: exists);
        on_pass(request, desired, current, ctx): the step before a create or update."""
        self._dependents.append(_Dependent(name, api_version, kind, desired, when, ready,
                                           on_pass))
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
        present_unwanted = [False] * len(deps)
        keep_for_order = [False] * len(deps)
        unwanted_current: List[Optional[JsonObject]] = [None] * len(deps)
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
            unwanted_current[i] = _find_child(request, d.api_version, d.kind, name)
            if unwanted_current[i] is not None:
                state.deleting.append(d.name)
                present_unwanted[i] = True
                keep_for_order[i] = later_unwanted_present
                later_unwanted_present = True
        ctx = PassContext()
        predecessors_ready = True
        for i, d in enumerate(deps):
            # After a cancelled pass nothing more is deleted: unwanted ones present are kept.
            if not wanted[i] and not (present_unwanted[i] if ctx.pass_cancelled
                                      else keep_for_order[i]):
                if present_unwanted[i] and not ctx.pass_cancelled:  # left out: pruned
                    try:
                        for stage in (PRE_DELETE, POST_DELETE):
                            self._callbacks.run(request, stage, d.api_version, d.kind, None,
                                                unwanted_current[i])
                    except Exception as e:  # noqa: BLE001 - a callback's error
                        _fail(result, d.name, e)
                        state.failed_at = d.name
                        return state
                continue
            try:
                desired = self._desired_of(d, request)
            except Exception as e:  # noqa: BLE001 - user code
                _fail(result, d.name, e)
                state.failed_at = d.name
                return state
            current = _find_child(request, d.api_version, d.kind, _name_of(desired, request))
            if ctx.pass_cancelled:
                if current is not None:
                    result.desire(freeze_onto(desired, current))
                state.cancelled.append(d.name)
                continue
            if not wanted[i]:
                result.desire(desired)  # kept only until the later unwanted ones are gone
                continue
            if current is None and not predecessors_ready:
                state.pending.append(d.name)  # ensure-created waits for its predecessors
                continue
            is_ready = current is not None and (d.ready is None or bool(d.ready(current)))
            predecessors_ready = predecessors_ready and is_ready
            if d.on_pass is not None:
                was_cancelled = ctx.pass_cancelled
                ctx._begin_step()
                try:
                    d.on_pass(request, desired, current, ctx)
                except Exception as e:  # noqa: BLE001 - user code
                    _fail(result, d.name, e)
                    state.failed_at = d.name
                    return state
                if not was_cancelled and ctx.pass_cancelled:
                    state.pass_cancelled_by = d.name
                    state.pass_cancel_reason = ctx.pass_cancel_reason
                if ctx.resource_cancelled:
                    if current is not None:
                        result.desire(freeze_onto(desired, current))
                    state.cancelled.append(d.name)
                    state.cancel_reasons[d.name] = ctx.resource_cancel_reason
                    continue
            if current is None or not is_subset(desired, current):
                try:
                    self._callbacks.run_step(request, current is None, d.api_version, d.kind,
                                             desired, current)
                except Exception as e:  # noqa: BLE001 - a callback's error
                    _fail(result, d.name, e)
                    state.failed_at = d.name
                    return state
            result.desire(desired)
            (state.ready if is_ready else state.pending).append(d.name)
        state.flags = ctx.flags
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
                    cancelled = bool(state.pass_cancelled_by or state.cancelled)
                    result.set_condition("DependentsReady", FALSE,
                                         "Cancelled" if cancelled else "Waiting",
                                         state.not_ready_message())
            if then is not None:
                then(request, state, result)
            return result

        return reconcile
