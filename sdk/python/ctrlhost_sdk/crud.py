"""The CRUD-resource style (as sdk/cpp's and sdk/node's CrudResource): the desired list of one
kind against the current children of that kind, planned into create / update / unchanged /
remove and applied in that order (desired objects plus Normal events Created / Updated /
Deleted; removal relies on the owned kind's delete_absent).

    copies = CrudResource("v1", "ConfigMap", lambda req: [{"metadata": {"name": "a"}, ...}])
    controller.reconcile(copies.build())

on_pass(step) runs step(request, desired, current, ctx) (pass_context.py) before each create and
update in desired-list order: a skipped object is not created or is kept as it is, a cancelled
pass skips every later create and update, and apply records a Normal event "Skipped" each.
Removals are not cancellable. with_callbacks(callbacks) runs stage callbacks
(stage_callbacks.py) around each create, update and removal. A desired function, step or
callback that raises fails the reconcile: ReconcileError(terminal=True) -> terminal, anything
else -> retryable.

Thread-safety: immutable once built; may be called concurrently.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ctrlhost_sdk.handlers import Handlers
from ctrlhost_sdk.pass_context import PassContext, freeze_onto
from ctrlhost_sdk.request import JsonObject, Request, find_path
from ctrlhost_sdk.result import NORMAL, RETRYABLE, TERMINAL, ReconcileError, Result
from ctrlhost_sdk.stage_callbacks import POST_DELETE, PRE_DELETE, StageCallbacks

DesiredListFn = Callable[[Request], List[JsonObject]]
StepFn = Callable[[Request, JsonObject, Optional[JsonObject], PassContext], None]
ThenFn = Callable[[Request, "CrudPlan", Result], None]


class CrudPlan:
    def __init__(self) -> None:
        self.create: List[JsonObject] = []
        self.update: List[JsonObject] = []
        self.unchanged: List[JsonObject] = []  # with skipped objects that exist, frozen
        self.remove: List[JsonObject] = []
        self.skipped: List[Tuple[JsonObject, str]] = []  # (desired object, reason)
        self.pass_cancelled = False
        self.pass_cancel_reason = ""
        self.flags: Dict[str, bool] = {}

    @property
    def empty(self) -> bool:
        return not self.create and not self.update and not self.remove


def _subset(desired: Any, current: Any) -> bool:
    if isinstance(desired, dict) and isinstance(current, dict):
        return all(k in current and _subset(v, current[k]) for k, v in desired.items())
    return bool(desired == current)


def _wrap(prefix: str, e: Exception) -> ReconcileError:
    if isinstance(e, ReconcileError):
        return e.wrap(prefix)
    return ReconcileError("%s: %s" % (prefix, e))


class CrudResource:
    def __init__(self, api_version: str, kind: str, desired: Optional[DesiredListFn]) -> None:
        self.api_version = api_version
        self.kind = kind
        self.desired = desired
        self._step: Optional[StepFn] = None
        self._callbacks = StageCallbacks()

    def on_pass(self, step: StepFn) -> CrudResource:
        self._step = step
        return self

    def with_callbacks(self, callbacks: StageCallbacks) -> CrudResource:
        self._callbacks = callbacks
        return self

    def plan(self, request: Request) -> CrudPlan:
        """Raises ReconcileError (terminal) for a bad desired list."""
        listed = self.desired(request) if self.desired is not None else []
        if not isinstance(listed, list):
            raise ReconcileError("desired %s list is not a list" % self.kind, terminal=True)
        current: Dict[Tuple[str, str], JsonObject] = {}
        for o in request.children_of_kind(self.kind, self.api_version):
            ns = find_path(o.json, "metadata.namespace")
            current[(ns if isinstance(ns, str) else request.namespace, o.name)] = o.json
        plan = CrudPlan()
        ctx = PassContext()
        seen = set()
        for d in listed:
            if not isinstance(d, dict):
                raise ReconcileError("a desired object is not an object", terminal=True)
            obj = dict(d)
            obj.setdefault("apiVersion", self.api_version)
            obj.setdefault("kind", self.kind)
            name = find_path(obj, "metadata.name")
            if not isinstance(name, str) or not name:
                raise ReconcileError("a desired %s has no name" % self.kind, terminal=True)
            ns = find_path(obj, "metadata.namespace")
            key = (ns if isinstance(ns, str) else request.namespace, name)
            if key in seen:
                raise ReconcileError("two desired %s objects are named %s/%s"
                                     % (self.kind, key[0], key[1]), terminal=True)
            seen.add(key)
            cur = current.pop(key, None)
            if cur is not None:
                compare = dict(obj, metadata=dict({"namespace": key[0]}, **obj["metadata"]))
                if _subset(compare, cur):
                    plan.unchanged.append(obj)
                    continue
            label = "%s %s/%s" % (self.kind, key[0], key[1])
            skip: Optional[str] = None
            if ctx.pass_cancelled:
                skip = "pass cancelled: " + ctx.pass_cancel_reason
            elif self._step is not None:
                ctx._begin_step()
                try:
                    self._step(request, obj, cur, ctx)
                except Exception as e:  # noqa: BLE001 - user code
                    raise _wrap(label, e) from e
                if ctx.resource_cancelled:
                    skip = ctx.resource_cancel_reason
            if skip is not None:
                if cur is not None:
                    plan.unchanged.append(freeze_onto(obj, cur))
                plan.skipped.append((obj, skip))
                continue
            try:
                self._callbacks.run_step(request, cur is None, self.api_version, self.kind, obj,
                                         cur)
            except Exception as e:  # noqa: BLE001 - a callback's error
                raise _wrap(label, e) from e
            (plan.create if cur is None else plan.update).append(obj)
        for key, cur in current.items():
            try:
                for stage in (PRE_DELETE, POST_DELETE):
                    self._callbacks.run(request, stage, self.api_version, self.kind, None, cur)
            except Exception as e:  # noqa: BLE001 - a callback's error
                raise _wrap("%s %s/%s" % (self.kind, key[0], key[1]), e) from e
            plan.remove.append(cur)
        plan.pass_cancelled = ctx.pass_cancelled
        plan.pass_cancel_reason = ctx.pass_cancel_reason
        plan.flags = ctx.flags
        return plan

    def _describe(self, obj: JsonObject) -> str:
        ns = find_path(obj, "metadata.namespace")
        name = find_path(obj, "metadata.name")
        return "%s %s%s" % (self.kind, ns + "/" if isinstance(ns, str) else "",
                            name if isinstance(name, str) else "")

    def apply(self, plan: CrudPlan, result: Result) -> None:
        for o in plan.create:
            result.desire(o)
            result.event(NORMAL, "Created", self._describe(o))
        for o in plan.update:
            result.desire(o)
            result.event(NORMAL, "Updated", self._describe(o))
        for o in plan.unchanged:
            result.desire(o)
        for o in plan.remove:
            result.event(NORMAL, "Deleted", self._describe(o))
        for o, reason in plan.skipped:
            result.event(NORMAL, "Skipped", "%s: %s" % (self._describe(o), reason))

    def build(self, then: Optional[ThenFn] = None) -> Callable[[Request], Result]:
        fallback = Handlers()

        def reconcile(request: Request) -> Result:
            if not request.exists or request.deleting:
                return fallback(request)
            result = Result()
            try:
                plan = self.plan(request)
            except ReconcileError as e:
                result.set_error(TERMINAL if e.terminal else RETRYABLE, str(e), e.reason,
                                 e.retry_after)
                return result
            except Exception as e:  # noqa: BLE001 - user code: a retryable error
                result.set_error(RETRYABLE, str(e))
                return result
            self.apply(plan, result)
            if then is not None:
                then(request, plan, result)
            return result

        return reconcile
