"""Comparing a controller's new answers with recorded ones (testing.replay).

Both answers, the recorded pb.ReconcileResponse and the new one, become one JSON document each
(`normalize`), compared as JSON values: key order, the order of desired objects and 1 vs 1.0 do
not count, nor does an error's message (it often carries details such as timestamps). Before
that, the new answer gets the redaction the host applied to the recorded one, unless the
recording holds Secret data (`redact_response`). The rules are the same in every SDK and in
`ctrlhost replay` (docs/recording.md).
"""

from __future__ import annotations

import hashlib
import re
import json
from typing import Any, Dict, List, Optional, Sequence

from ctrlhost_sdk._proto import pb

CONDITION_STATUS = {pb.CONDITION_STATUS_TRUE: "True", pb.CONDITION_STATUS_FALSE: "False",
                    pb.CONDITION_STATUS_UNKNOWN: "Unknown"}
EVENT_TYPE = {pb.EVENT_TYPE_NORMAL: "Normal", pb.EVENT_TYPE_WARNING: "Warning"}
ERROR_KIND = {pb.ERROR_KIND_RETRYABLE: "retryable", pb.ERROR_KIND_TERMINAL: "terminal"}
_PATCH_TARGET = {pb.PATCH_TARGET_PRIMARY: "primary", pb.PATCH_TARGET_PRIMARY_STATUS: "status",
                 pb.PATCH_TARGET_OWNED: "owned"}
_PATCH_TYPE = {pb.PATCH_TYPE_JSON_PATCH: "json", pb.PATCH_TYPE_MERGE_PATCH: "merge"}
# The members of a normalized answer, in the order a difference names them.
MEMBERS = ("desired", "patches", "status", "conditions", "events", "requeueAfter", "error",
           "finalized")
_SECRET_MEMBERS = ("data", "stringData")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def secret_digest(value: Any) -> str:
    """What the host records instead of a Secret's value: "sha256:" and the lowercase hex
    SHA-256 of a string's UTF-8 bytes; "redacted" for a value that is not a string. A value that
    is a digest already is kept: a controller that copies a Secret's value from a replayed call
    (which carries digests) answers as it did when recorded."""
    if not isinstance(value, str):
        return "redacted"
    if _DIGEST.fullmatch(value):
        return value
    return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _redact_values(values: Any) -> None:
    if isinstance(values, dict):
        for key in values:
            values[key] = secret_digest(values[key])


def _redact_members(obj: Dict[str, Any]) -> None:
    for member in _SECRET_MEMBERS:
        if member in obj:
            _redact_values(obj[member])


def _loads(raw: bytes) -> Any:
    """The JSON value of `raw`; None when it is not JSON."""
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _dumps(value: Any) -> bytes:
    """Compact, keys sorted: the bytes the host writes for a redacted object, mostly."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode()


def _redact_object(raw: bytes) -> bytes:
    obj = _loads(raw)
    if not (isinstance(obj, dict) and obj.get("apiVersion") == "v1"
            and obj.get("kind") == "Secret"):
        return raw
    _redact_members(obj)
    return _dumps(obj)


def _redact_json_patch_op(op: Any) -> None:
    if not isinstance(op, dict) or not isinstance(op.get("path"), str) or "value" not in op:
        return
    path = op["path"]
    if path in ("/data", "/stringData"):
        _redact_values(op["value"])
    elif path.startswith("/data/") or path.startswith("/stringData/"):
        op["value"] = secret_digest(op["value"])


def _redact_patch(patch: Any) -> None:
    body = _loads(patch.patch)
    if patch.type == pb.PATCH_TYPE_MERGE_PATCH and isinstance(body, dict):
        _redact_members(body)
    elif patch.type == pb.PATCH_TYPE_JSON_PATCH and isinstance(body, list):
        for op in body:
            _redact_json_patch_op(op)
    else:
        return
    patch.patch = _dumps(body)


def primary_is_secret(header: pb.RecordingHeader) -> bool:
    """Whether the recorded controller's primary kind is the core Secret."""
    primary = header.controller.primary
    return primary.group == "" and primary.kind == "Secret"


def redact_response(response: pb.ReconcileResponse,
                    primary_secret: bool) -> pb.ReconcileResponse:
    """A copy of `response` with the values of Secrets' data and stringData replaced as the
    host replaces them in a recording: in desired Secrets, and in the patches of owned Secrets
    (and of the primary when `primary_secret`)."""
    out = pb.ReconcileResponse()
    out.CopyFrom(response)
    for i, raw in enumerate(out.desired_objects):
        out.desired_objects[i] = _redact_object(raw)
    for patch in out.patches:
        if patch.target == pb.PATCH_TARGET_OWNED:
            secret = patch.api_version == "v1" and patch.kind == "Secret"
        else:
            secret = patch.target == pb.PATCH_TARGET_PRIMARY and primary_secret
        if secret:
            _redact_patch(patch)
    return out


def _json_or_text(raw: bytes) -> Any:
    """The JSON value of `raw`, or its text when it is not JSON."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _str(value: Any) -> str:
    return "" if value is None else str(value)


def _desired_key(obj: Any, index: int) -> str:
    if not isinstance(obj, dict):
        return "desired_objects[%d]" % index
    meta: Dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    name = _str(meta.get("name"))
    if meta.get("namespace"):
        name = "%s/%s" % (meta["namespace"], name)
    return "%s %s %s" % (_str(obj.get("apiVersion")), _str(obj.get("kind")), name)


def _seconds(duration: Any) -> float:
    return duration.seconds + duration.nanos / 1e9


def _patch(p: Any) -> Dict[str, Any]:
    out = {"target": _PATCH_TARGET.get(p.target, p.target), "apiVersion": p.api_version,
           "kind": p.kind, "name": p.name, "type": _PATCH_TYPE.get(p.type, p.type),
           "body": _json_or_text(p.patch), "resourceVersion": p.resource_version}
    return {k: v for k, v in out.items() if v != ""}


def _error(e: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {"kind": ERROR_KIND.get(e.kind, e.kind)}
    if e.reason:
        out["reason"] = e.reason
    if e.HasField("retry_after"):
        out["retryAfter"] = _seconds(e.retry_after)
    return out


def normalize(response: pb.ReconcileResponse) -> Dict[str, Any]:
    """The answer as the JSON document replay compares; empty members are left out."""
    desired: Dict[str, Any] = {}
    for i, raw in enumerate(response.desired_objects):
        obj = _json_or_text(raw)
        key = _desired_key(obj, i)
        while key in desired:  # the same object twice: both count
            key += " (again)"
        desired[key] = obj
    doc: Dict[str, Any] = {
        "desired": desired,
        "patches": [_patch(p) for p in response.patches],
        "status": _json_or_text(response.status) if response.status else None,
        "conditions": {c.type: {"status": CONDITION_STATUS.get(c.status, c.status),
                                "reason": c.reason, "message": c.message}
                       for c in response.conditions},
        "events": [{"type": EVENT_TYPE.get(e.type, e.type), "reason": e.reason,
                    "message": e.message} for e in response.events],
        "requeueAfter": (_seconds(response.requeue_after)
                         if response.HasField("requeue_after") else None),
        "error": _error(response.error) if response.HasField("error") else None,
        "finalized": True if response.finalized else None,
    }
    return {k: v for k, v in doc.items() if v is not None and v != {} and v != []}


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: 1 == 1.0, but true != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _pointer(path: str, key: Any) -> str:
    return path + "/" + str(key).replace("~", "~0").replace("/", "~1")


def json_diff(before: Any, after: Any, path: str = "") -> List[Dict[str, Any]]:
    """An RFC 6902 JSON patch that turns `before` into `after` (ops "add", "remove",
    "replace"), descending into objects and arrays so that each op is small."""
    if json_equal(before, after):
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        ops = [{"op": "remove", "path": _pointer(path, k)} for k in before if k not in after]
        for k in after:
            if k in before:
                ops += json_diff(before[k], after[k], _pointer(path, k))
            else:
                ops.append({"op": "add", "path": _pointer(path, k), "value": after[k]})
        return ops
    if isinstance(before, list) and isinstance(after, list):
        common = min(len(before), len(after))
        ops = []
        for i in range(common):
            ops += json_diff(before[i], after[i], _pointer(path, i))
        for i in range(len(before) - 1, common - 1, -1):
            ops.append({"op": "remove", "path": _pointer(path, i)})
        for i in range(common, len(after)):
            ops.append({"op": "add", "path": _pointer(path, i), "value": after[i]})
        return ops
    return [{"op": "replace", "path": path, "value": after}]


def _resolve(doc: Any, pointer: str) -> Any:
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        doc = doc[int(token)] if isinstance(doc, list) else doc[token]
    return doc


def _show(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


class Difference:
    """A recorded answer that the new one does not match. `recorded` and `replayed` hold the
    differing members of the two normalized answers (a member absent from one is empty there);
    `patch` is the JSON patch (RFC 6902) that turns `recorded` into `replayed`."""

    def __init__(self, file: str, offset: int, sequence: int, key: str,
                 recorded: Dict[str, Any], replayed: Dict[str, Any]) -> None:
        self.file = file
        self.offset = offset
        self.sequence = sequence
        self.key = key
        self.members: List[str] = [m for m in MEMBERS if not json_equal(recorded.get(m),
                                                                         replayed.get(m))]
        self.recorded = {m: recorded[m] for m in self.members if m in recorded}
        self.replayed = {m: replayed[m] for m in self.members if m in replayed}
        self.patch = json_diff(self.recorded, self.replayed)

    def __str__(self) -> str:
        lines = ["%s: record at offset %d (sequence %d) %s: %s differ"
                 % (self.file, self.offset, self.sequence, self.key, ", ".join(self.members))]
        for op in self.patch:
            if op["op"] == "add":
                lines.append("    + %s: %s" % (op["path"], _show(op["value"])))
            elif op["op"] == "remove":
                lines.append("    - %s: %s" % (op["path"], _show(_resolve(self.recorded,
                                                                          op["path"]))))
            else:
                lines.append("    ~ %s: %s -> %s" % (op["path"],
                                                     _show(_resolve(self.recorded, op["path"])),
                                                     _show(op["value"])))
        return "\n".join(lines)

    __repr__ = __str__


def compare(file: str, offset: int, record: pb.ReconcileRecord,
            answer: pb.ReconcileResponse) -> Optional[Difference]:
    """The difference between the record's answer and the new `answer` (already redacted as
    the recording is); None when they are the same."""
    recorded, replayed = normalize(record.response), normalize(answer)
    if json_equal(recorded, replayed):
        return None
    call = record.call
    key = "%s/%s" % (call.namespace, call.name) if call.namespace else call.name
    return Difference(file, offset, record.sequence, key, recorded, replayed)


class ReplayResult:
    """What a replay found: the answers `compared` (`same` + `different`), the records
    `skipped` (no recorded answer: the dispatch failed), the `differences` in record order, the
    `files` read and the files `updated` (rewritten with the new answers)."""

    def __init__(self, files: Sequence[str]) -> None:
        self.files = list(files)
        self.compared = 0
        self.same = 0
        self.different = 0
        self.skipped = 0
        self.differences: List[Difference] = []
        self.updated: List[str] = []

    def add(self, difference: Optional[Difference]) -> None:
        self.compared += 1
        if difference is None:
            self.same += 1
        else:
            self.different += 1
            self.differences.append(difference)

    def summary(self) -> str:
        return ("%d of %d replayed answers differ (%d same, %d skipped, %d files)"
                % (self.different, self.compared, self.same, self.skipped, len(self.files)))

    def report(self, limit: int = 20) -> str:
        """The summary, then the first `limit` differences."""
        parts = [self.summary()] + [str(d) for d in self.differences[:limit]]
        if len(self.differences) > limit:
            parts.append("... and %d more" % (len(self.differences) - limit))
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.report()
