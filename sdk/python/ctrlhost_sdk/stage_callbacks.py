"""StageCallbacks: code that runs per child kind around the steps a DependentChain takes (as
sdk/cpp's stage_callbacks.h and sdk/node's StageCallbacks), at the stages PRE_CREATE,
POST_CREATE, PRE_UPDATE, POST_UPDATE, PRE_DELETE and POST_DELETE.

    def add_sidecar(req, stage, desired, current):
        desired["spec"]["template"]["spec"]["containers"].append(sidecar())

    callbacks = StageCallbacks().on("apps/v1", "Deployment", PRE_CREATE, "add-sidecar",
                                    add_sidecar)
    chain.with_callbacks(callbacks)

Guarantees:
- A step is a create (the child is absent), an update (it exists and the desired object has a
  field with another value) or a delete (the chain leaves it out to be pruned); an unchanged or
  skipped child takes no step.
- pre-create / pre-update run before the object is added to the answer and may change `desired`
  in place; post-create / post-update see a copy of the answered object (the host applies it
  after the reconcile returns). pre-delete / post-delete run with desired None and `current` the
  child being removed.
- Several callbacks per kind and stage run in registration order. The first that raises stops
  the step and the reconcile: "callback <name> at <stage>: <message>" (ReconcileError(terminal=
  True) stays terminal), prefixed by the chain with the dependent.

Thread-safety: immutable once registered; run may be called concurrently.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, List, Optional, Tuple

from ctrlhost_sdk.request import JsonObject, Request
from ctrlhost_sdk.result import ReconcileError

PRE_CREATE = "pre-create"
POST_CREATE = "post-create"
PRE_UPDATE = "pre-update"
POST_UPDATE = "post-update"
PRE_DELETE = "pre-delete"
POST_DELETE = "post-delete"
STAGES = (PRE_CREATE, POST_CREATE, PRE_UPDATE, POST_UPDATE, PRE_DELETE, POST_DELETE)

# callback(request, stage, desired or None, current or None)
StageCallback = Callable[[Request, str, Optional[JsonObject], Optional[JsonObject]], Any]


class StageCallbacks:
    def __init__(self) -> None:
        self._callbacks: List[Tuple[str, str, str, str, StageCallback]] = []

    def on(self, api_version: str, kind: str, stage: str, name: str,
           callback: StageCallback) -> StageCallbacks:
        """`name` is used in errors. Matches children of exactly this apiVersion and kind."""
        if stage not in STAGES:
            raise ValueError("unknown stage %r (one of %s)" % (stage, ", ".join(STAGES)))
        self._callbacks.append((api_version, kind, stage, name, callback))
        return self

    def run(self, request: Request, stage: str, api_version: str, kind: str,
            desired: Optional[JsonObject], current: Optional[JsonObject]) -> None:
        """Runs the callbacks of that kind and stage in order; raises on the first failure."""
        for cb_api_version, cb_kind, cb_stage, name, callback in self._callbacks:
            if (cb_stage, cb_api_version, cb_kind) != (stage, api_version, kind):
                continue
            try:
                callback(request, stage, desired, current)
            except ReconcileError as e:
                raise e.wrap("callback %s at %s" % (name, stage)) from e
            except Exception as e:  # noqa: BLE001 - user code: a retryable error
                raise ReconcileError("callback %s at %s: %s" % (name, stage, e)) from e

    def run_step(self, request: Request, create: bool, api_version: str, kind: str,
                 desired: JsonObject, current: Optional[JsonObject]) -> None:
        """The pre-stage (may change `desired`), then the post-stage on a copy."""
        self.run(request, PRE_CREATE if create else PRE_UPDATE, api_version, kind, desired,
                 current)
        self.run(request, POST_CREATE if create else POST_UPDATE, api_version, kind,
                 copy.deepcopy(desired), current)
