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

`replay` and `assert_replay` run a controller the same way on every call of a recording (what
`ctrlhost run --record` wrote) and compare its answers with the recorded ones:

    testing.assert_replay(greeter, "testdata/greeter-recording")   # fails listing differences
"""

from __future__ import annotations

import json
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Tuple, Union

from ctrlhost_sdk import _host_judgement, _recording
from ctrlhost_sdk._proto import pb
from ctrlhost_sdk._recording import RecordingError
from ctrlhost_sdk._replay import (
    CONDITION_STATUS as _STATUS,
    ERROR_KIND as _ERROR,
    EVENT_TYPE as _EVENT,
    Difference,
    ReplayResult,
    compare,
    primary_is_secret,
    redact_response,
)
from ctrlhost_sdk.controller import Controller
from ctrlhost_sdk.plugin import Plugin
from ctrlhost_sdk.request import JsonObject
from ctrlhost_sdk.result import ALL_CAPABILITIES

__all__ = ["Difference", "HostWouldNotSend", "HostWouldRefuse", "Outcome", "RecordingError",
           "ReplayResult", "assert_replay", "make_call", "reconcile", "replay", "run"]


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


def _controller_named(target: Union[Controller, Plugin], name: str) -> Controller:
    if isinstance(target, Controller):
        return target
    controller = target.controllers.get(name)
    if controller is None:
        raise RecordingError('plugin "%s" has no controller "%s"' % (target.name, name))
    return controller


def _replay_file(controller: Controller, recording: _recording.RecordingFile,
                 result: ReplayResult, update: bool) -> None:
    """Runs `controller` on every recorded call of one file, in order, as `run` does
    (Controller.invoke, with the capabilities the record says were in effect), and compares
    the answers; with `update`, rewrites the records whose answers differ."""
    header = recording.header
    primary_secret = primary_is_secret(header)
    bodies, changed = [], False
    for offset, record, body in recording.records:
        bodies.append(body)
        if record.WhichOneof("answer") != "response":
            result.skipped += 1
            continue
        capabilities = frozenset(record.capabilities) or ALL_CAPABILITIES
        answer = controller.invoke(record.response.request_id or 1, record.call, capabilities)
        if not header.secret_data:
            answer = redact_response(answer, primary_secret)
        difference = compare(recording.path, offset, record, answer)
        result.add(difference)
        if difference is not None and update:
            updated = pb.ReconcileRecord()
            updated.CopyFrom(record)  # unknown fields too
            updated.response.CopyFrom(answer)
            bodies[-1], changed = updated.SerializeToString(), True
    if changed:
        _recording.replace_file(recording.path,
                                _recording.encode_recording(recording.start, bodies))
        result.updated.append(recording.path)


def replay(target: Union[Controller, Plugin], path: str, controller: Optional[str] = None,
           update: bool = False) -> ReplayResult:
    """Replays a recording (what `ctrlhost run --record` wrote) against `target`: runs it in
    process, as `run` does, on every recorded call in order, and compares each new answer with
    the recorded one (see _replay.py: what counts as different). `path` is a .ctrlrec file, a
    directory of them, or a directory with one subdirectory per controller (`controller` picks
    one; default: the Controller's name, or the only one). A Plugin runs the controller the
    recording's header names. Records without an answer (a failed dispatch) are skipped.

    `update`: rewrite the records whose answers differ with the new answers as the recorded
    ones (header, other records and every other field kept byte for byte; a temporary file
    renamed over each file changed).

    RecordingError when the recording cannot be read (the message names the file and offset)
    or holds another controller than the one asked for."""
    wanted = controller or (target.name if isinstance(target, Controller) else None)
    files = _recording.find_recording(path, wanted)
    result = ReplayResult(files)
    for file in files:
        recording = _recording.read_recording(file)
        held = recording.header.controller.name
        wanted = wanted or held
        if held != wanted:
            raise RecordingError("%s: holds controller %s, not %s" % (file, held, wanted))
        _replay_file(_controller_named(target, wanted), recording, result, update)
    return result


def assert_replay(target: Union[Controller, Plugin], path: str,
                  controller: Optional[str] = None, update: bool = False,
                  limit: int = 20) -> ReplayResult:
    """`replay`, raising AssertionError when an answer differs; its message has the totals and
    the first `limit` differences. With `update` it only rewrites the files and never fails,
    like a golden-file test run to refresh its files."""
    result = replay(target, path, controller, update)
    if result.differences and not update:
        raise AssertionError("replaying %s: %s" % (path, result.report(limit)))
    return result
