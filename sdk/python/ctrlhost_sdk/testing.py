"""In-process test harness: run a controller on fixture objects without a host or a socket.

    outcome = testing.reconcile(controller, obj, children=[deployment])
    assert outcome.error is None
    assert outcome.desired_of_kind("Service")[0]["spec"]["ports"][0]["port"] == 8080
    assert outcome.conditions["Ready"]["status"] == "True"

The response goes through the same path as in production (Controller.invoke with the request
serialized to a pb.ReconcileCall), so validation and exception handling are exercised too.
"""

from __future__ import annotations

import json
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

from ctrlhost_sdk._proto import pb
from ctrlhost_sdk.controller import Controller
from ctrlhost_sdk.request import JsonObject
from ctrlhost_sdk.result import ALL_CAPABILITIES

_STATUS = {pb.CONDITION_STATUS_TRUE: "True", pb.CONDITION_STATUS_FALSE: "False",
           pb.CONDITION_STATUS_UNKNOWN: "Unknown"}
_EVENT = {pb.EVENT_TYPE_NORMAL: "Normal", pb.EVENT_TYPE_WARNING: "Warning"}
_ERROR = {pb.ERROR_KIND_RETRYABLE: "retryable", pb.ERROR_KIND_TERMINAL: "terminal"}


def _raw(obj: JsonObject) -> pb.RawObject:
    return pb.RawObject(api_version=obj.get("apiVersion", ""), kind=obj.get("kind", ""),
                        object=json.dumps(obj).encode())


def make_call(controller: str, obj: Optional[JsonObject], children: Sequence[JsonObject] = (),
              related: Sequence[JsonObject] = (), finalizing: bool = False,
              reason: int = pb.REASON_PRIMARY_CHANGED, attempt: int = 1) -> pb.ReconcileCall:
    """The pb.ReconcileCall the host would send for `obj` (a dict, or None for a gone
    primary)."""
    meta = (obj or {}).get("metadata") or {}
    return pb.ReconcileCall(
        controller=controller, namespace=meta.get("namespace", ""), name=meta.get("name", ""),
        uid=meta.get("uid", ""), reason=reason,
        object=json.dumps(obj).encode() if obj is not None else b"",
        children=[_raw(c) for c in children], related_objects=[_raw(r) for r in related],
        finalizing=finalizing, attempt=attempt)


class Outcome:
    """A pb.ReconcileResponse decoded into Python values."""

    def __init__(self, response: pb.ReconcileResponse) -> None:
        self.response = response
        self.desired: List[JsonObject] = [json.loads(d) for d in response.desired_objects]
        self.status: Optional[JsonObject] = (json.loads(response.status) if response.status
                                             else None)
        self.conditions: Dict[str, Dict[str, Any]] = {
            c.type: {"status": _STATUS.get(c.status, c.status), "reason": c.reason,
                     "message": c.message}
            for c in response.conditions
        }
        self.events: List[Tuple[str, str, str]] = [
            (_EVENT.get(e.type, e.type), e.reason, e.message) for e in response.events]
        self.patches: List[Any] = list(response.patches)
        self.requeue_after: Optional[float] = (
            response.requeue_after.ToTimedelta().total_seconds()
            if response.HasField("requeue_after") else None)
        self.error: Optional[Tuple[str, str]] = (
            (_ERROR.get(response.error.kind, response.error.kind), response.error.message)
            if response.HasField("error") else None)
        self.finalized: bool = response.finalized

    def desired_of_kind(self, kind: str) -> List[JsonObject]:
        return [d for d in self.desired if d.get("kind") == kind]


def reconcile(controller: Controller, obj: Optional[JsonObject],
              children: Sequence[JsonObject] = (), related: Sequence[JsonObject] = (),
              finalizing: bool = False, capabilities: FrozenSet[int] = ALL_CAPABILITIES,
              request_id: int = 1, **kwargs: Any) -> Outcome:
    """Runs `controller` once on the fixtures; returns an Outcome."""
    call = make_call(controller.name, obj, children, related, finalizing, **kwargs)
    return Outcome(controller.invoke(request_id, call, capabilities))
