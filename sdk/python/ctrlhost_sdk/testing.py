"""In-process test harness: run a controller on fixture objects without a host or a socket.

    outcome = testing.reconcile(controller, obj, children=[deployment])
    assert outcome.error is None
    assert outcome.desired_of_kind("Service")[0]["spec"]["ports"][0]["port"] == 8080
    assert outcome.conditions["Ready"]["status"] == "True"

The response goes through the same path as in production (Controller.invoke with the request
serialized to a pb.ReconcileCall), so validation and exception handling are exercised too.

The reconcile is also judged as the live host judges it (_host_judgement.py, the same rules and
messages as the host and the other SDKs' harnesses):
- children given without ownerReferences get the controller reference to the primary, as the
  host's always carry it (the caller's dicts are not changed);
- a request the host would never send (the primary outside the controller's label selector or
  namespaces, a child of a kind it does not own or controlled by another object) raises
  HostWouldNotSend;
- an answer the host would refuse (a desired object or OWNED patch of a kind the controller does
  not own, a child outside the primary's namespace, status or conditions on a ConfigMap, an
  `existing` object the primary does not control: NotControlled) sets Outcome.refused, and
  `reconcile` raises HostWouldRefuse (an AssertionError: the test fails). To test a refusal
  itself, use `run`, which returns the Outcome either way.
"""

from __future__ import annotations

import json
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple

from ctrlhost_sdk import _host_judgement
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


class HostWouldNotSend(ValueError):
    """The live host would never send this request (the message says why)."""


class HostWouldRefuse(AssertionError):
    """The live host would refuse this answer (the message is the host's); `outcome` holds it."""

    def __init__(self, message: str, outcome: "Outcome") -> None:
        super().__init__(message)
        self.outcome = outcome


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
        # Why the live host would refuse this answer (the host's message, e.g.
        # "desired_objects[0]: kind v1 Secret is not owned by controller greeter"); None when
        # it would apply it. Set by run and reconcile.
        self.refused: Optional[str] = None

    def desired_of_kind(self, kind: str) -> List[JsonObject]:
        return [d for d in self.desired if d.get("kind") == kind]


def run(controller: Controller, obj: Optional[JsonObject],
        children: Sequence[JsonObject] = (), related: Sequence[JsonObject] = (),
        finalizing: bool = False, capabilities: FrozenSet[int] = ALL_CAPABILITIES,
        request_id: int = 1, existing: Sequence[JsonObject] = (), **kwargs: Any) -> Outcome:
    """Runs `controller` once on the fixtures, judged as the host does; returns an Outcome
    whose `refused` says why the host would refuse the answer (None: it would apply it).
    HostWouldNotSend for a request the host would never send. `existing`: objects in the
    cluster that are not the primary's children (no controller, or another one); they are not
    in the request, and an answer desiring one of them is refused (NotControlled)."""
    spec = controller.spec()
    call = make_call(controller.name, obj, (), related, finalizing, **kwargs)
    call.children.extend(_raw(c) for c in
                         _host_judgement.judged_children(spec, call, children))
    why = _host_judgement.judge_request(spec, call, obj)
    if why is not None:
        raise HostWouldNotSend("the host would not send this request: " + why)
    response = controller.invoke(request_id, call, capabilities)
    outcome = Outcome(response)
    outcome.refused = _host_judgement.judge_response(spec, call, existing, response)
    return outcome


def reconcile(controller: Controller, obj: Optional[JsonObject],
              children: Sequence[JsonObject] = (), related: Sequence[JsonObject] = (),
              finalizing: bool = False, capabilities: FrozenSet[int] = ALL_CAPABILITIES,
              request_id: int = 1, existing: Sequence[JsonObject] = (),
              **kwargs: Any) -> Outcome:
    """`run`, raising HostWouldRefuse (an AssertionError) when the host would refuse the
    answer."""
    outcome = run(controller, obj, children, related, finalizing, capabilities, request_id,
                  existing, **kwargs)
    if outcome.refused is not None:
        raise HostWouldRefuse("the host would refuse this answer: " + outcome.refused, outcome)
    return outcome
