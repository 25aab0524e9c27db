"""PassContext: what the resources of one reconcile pass tell each other (as sdk/cpp's
pass_context.h and sdk/node's PassContext).

A dependent's `on_pass(request, desired, current, ctx)` step (chain.py) runs before the
dependent is created or updated. It may:
- ctx.cancel_pass(reason): the rest of this pass does not run (later dependents are neither
  created, updated nor deleted); the step's own dependent still is, unless it cancels itself too;
- ctx.cancel_resource(reason): only this dependent is skipped this pass;
- ctx.set_flag(name, value=True) / ctx.flag(name): per-pass booleans (unset reads False) that
  later steps read, e.g. UPDATE_ALLOWED and UPDATE_NECESSARY.
A skipped dependent that exists is kept as it is (freeze_onto: its current values for the fields
the pass would set), one that does not exist is not created.

Thread-safety: a PassContext belongs to one pass; not safe for concurrent use.
"""

from __future__ import annotations

from typing import Any, Dict

UPDATE_ALLOWED = "updateAllowed"
UPDATE_NECESSARY = "updateNecessary"


class PassContext:
    def __init__(self) -> None:
        self._flags: Dict[str, bool] = {}
        self.pass_cancelled = False
        self.pass_cancel_reason = ""
        self.resource_cancelled = False
        self.resource_cancel_reason = ""

    def cancel_pass(self, reason: str) -> None:
        if not self.pass_cancelled:  # the first reason wins
            self.pass_cancelled = True
            self.pass_cancel_reason = str(reason)

    def cancel_resource(self, reason: str) -> None:
        if not self.resource_cancelled:
            self.resource_cancelled = True
            self.resource_cancel_reason = str(reason)

    def set_flag(self, name: str, value: bool = True) -> None:
        self._flags[str(name)] = bool(value)

    def flag(self, name: str) -> bool:
        return self._flags.get(name, False)

    @property
    def flags(self) -> Dict[str, bool]:
        return dict(self._flags)

    def _begin_step(self) -> None:
        self.resource_cancelled = False
        self.resource_cancel_reason = ""


def _project(desired: Any, current: Any) -> Any:
    if not isinstance(desired, dict) or not isinstance(current, dict):
        return current
    return {k: _project(v, current[k]) for k, v in desired.items() if k in current}


def freeze_onto(desired: Dict[str, Any], current: Dict[str, Any]) -> Dict[str, Any]:
    """The fields of `desired` with their values in `current` (fields absent from `current` left
    out): applying it leaves the object as it is. apiVersion, kind, metadata.name and
    metadata.namespace come from `desired`."""
    out: Dict[str, Any] = _project(desired, current)
    for key in ("apiVersion", "kind"):
        if key in desired:
            out[key] = desired[key]
    meta = desired.get("metadata")
    if isinstance(meta, dict):
        for key in ("name", "namespace"):
            if key in meta:
                out.setdefault("metadata", {})[key] = meta[key]
    return out
