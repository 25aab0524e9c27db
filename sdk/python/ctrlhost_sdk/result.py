"""Result: what a reconcile wants, turned into a validated pb.ReconcileResponse.

    result = Result()
    cm = result.desire(new_object("v1", "ConfigMap", req.name + "-config"))
    cm["data"] = {"greeting": "hello"}
    result.status["ready"] = True
    result.set_condition("Ready", True, "AllGood", "everything is up")
    result.event("Normal", "Configured", "config written")
    result.requeue_after = 30  # seconds (or a datetime.timedelta)
    return result

    return Result.retryable_error("the database is down")   # backoff and retry
    return Result.terminal_error("spec.image is required")  # no retry until the object changes

Raising an exception from a reconcile function is the same as a retryable error.
`to_response` validates the result the same way as the C++ SDK (sdk/cpp/result.h): desired
objects need apiVersion and kind and get metadata.name / namespace / labels defaulted from the
primary (labels not on objects of the primary's own kind); patches, conditions and events are checked; features need the negotiated capability.

Thread-safety: a Result belongs to one reconcile; it is not shared.
"""

from __future__ import annotations

import copy
import datetime
import json
import re
from typing import Any, Dict, FrozenSet, List, Optional, Tuple, Union

from ctrlhost_sdk._proto import pb
from ctrlhost_sdk.request import JsonObject, Request

# "True" / "False" / "Unknown", or a bool.
ConditionStatus = Union[bool, str]
# Seconds, or a timedelta.
Seconds = Union[float, datetime.timedelta]

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"
NORMAL, WARNING = "Normal", "Warning"
RETRYABLE, TERMINAL = "retryable", "terminal"
JSON_PATCH, MERGE_PATCH = "json", "merge"

_CONDITION_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_CONDITION_STATUS = {
    TRUE: pb.CONDITION_STATUS_TRUE,
    FALSE: pb.CONDITION_STATUS_FALSE,
    UNKNOWN: pb.CONDITION_STATUS_UNKNOWN,
}
_EVENT_TYPE = {NORMAL: pb.EVENT_TYPE_NORMAL, WARNING: pb.EVENT_TYPE_WARNING}
_PATCH_TYPE = {JSON_PATCH: pb.PATCH_TYPE_JSON_PATCH, MERGE_PATCH: pb.PATCH_TYPE_MERGE_PATCH}

ALL_CAPABILITIES: FrozenSet[int] = frozenset(
    [
        pb.CAPABILITY_CANCELLATION,
        pb.CAPABILITY_METADATA_ONLY,
        pb.CAPABILITY_CHILDREN,
        pb.CAPABILITY_RELATED_OBJECTS,
        pb.CAPABILITY_SERVER_SIDE_APPLY,
        pb.CAPABILITY_CONDITIONS,
        pb.CAPABILITY_SCHEDULES,
        pb.CAPABILITY_BACKGROUND_TASKS,
    ]
)


class InvalidResult(ValueError):
    """The result cannot be sent (the plugin answers a retryable error instead)."""


# The reason the SDKs give an answer too large to send (terminal: it will not shrink on retry).
RESPONSE_TOO_LARGE = "ResponseTooLarge"
_MAX_ERROR_REASON = 128


def check_error(terminal: bool, reason: str, retry_after: Optional[Seconds]) -> Optional[float]:
    """Validates an error's reason and retry_after as the host does; returns retry_after in
    seconds (None when unset). Raises ValueError naming the problem."""
    if not isinstance(reason, str) or (reason and (
            len(reason) > _MAX_ERROR_REASON or not _CONDITION_REASON.match(reason))):
        raise ValueError('error reason "%s" must be CamelCase: ^[A-Za-z]([A-Za-z0-9_,:]*'
                         '[A-Za-z0-9_])?$, at most %d characters' % (reason, _MAX_ERROR_REASON))
    if retry_after is None:
        return None
    if terminal:
        raise ValueError("retry_after is only allowed on a retryable error")
    try:
        seconds = _seconds(retry_after)
    except (TypeError, ValueError):
        raise ValueError("retry_after must be seconds or a timedelta") from None
    if seconds < 0 or seconds != seconds or seconds > 1e11:
        raise ValueError("retry_after must be between 0 and 1e11 seconds")
    return seconds


class ReconcileError(Exception):
    """Raise from a reconcile function to answer an error: terminal=True for errors that a retry
    cannot fix. Any other exception is a retryable error. reason: a CamelCase machine-readable
    reason (the host's Warning event and Reconciled=False reason); retry_after (retryable only):
    seconds or a timedelta before which the host does not retry. Bad values raise ValueError."""

    def __init__(self, message: str, terminal: bool = False, reason: str = "",
                 retry_after: Optional[Seconds] = None) -> None:
        super().__init__(message)
        check_error(terminal, reason, retry_after)
        self.terminal = terminal
        self.reason = reason
        self.retry_after = retry_after

    def wrap(self, prefix: str) -> "ReconcileError":
        """The same error (kind, reason, retry_after) with `prefix: ` before its message."""
        return ReconcileError("%s: %s" % (prefix, self), terminal=self.terminal,
                              reason=self.reason, retry_after=self.retry_after)


def new_object(api_version: str, kind: str, name: str = "") -> JsonObject:
    """{"apiVersion", "kind", "metadata": {"name"}}: the start of a desired object."""
    metadata: JsonObject = {}
    if name:
        metadata["name"] = name
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata}


def compose_merge_patch(base: Any, patch: Any) -> Any:
    """Merges `patch` into `base` in place (objects recursively, anything else replaced) and
    returns the result; used to compose status merge patches."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    for key, value in patch.items():
        if isinstance(base.get(key), dict) and isinstance(value, dict):
            compose_merge_patch(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _dump(value: Any) -> bytes:
    # Compact and UTF-8, like the C++ SDK; lone surrogates are replaced, never raised.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", errors="replace"
    )


def _seconds(value: Seconds) -> float:
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return float(value)


def _group_of(api_version: Any) -> str:
    """The API group of an apiVersion ("" for "v1")."""
    if not isinstance(api_version, str) or "/" not in api_version:
        return ""
    return api_version.split("/", 1)[0]


def _is_nonempty_str(obj: JsonObject, key: str) -> bool:
    return isinstance(obj.get(key), str) and obj.get(key) != ""


def _condition_status(status: ConditionStatus) -> str:
    if status is True:
        return TRUE
    if status is False:
        return FALSE
    return status


class Result:
    """The answer to one reconcile. Fields may be set directly or with the helpers."""

    def __init__(self) -> None:
        self.desired: List[JsonObject] = []
        self._status: Optional[JsonObject] = None  # a merge patch of the primary's status
        # (type, status, reason, message), unique by type.
        self.conditions: List[Tuple[str, str, str, str]] = []
        self.events: List[Tuple[str, str, str]] = []  # (type, reason, message)
        # dict(target, api_version, kind, name, type, patch, resource_version)
        self.patches: List[Dict[str, Any]] = []
        self.requeue_after: Optional[Seconds] = None
        self.error: Optional[Tuple[str, str]] = None  # (kind, message)
        self.error_reason = ""  # CamelCase, "" for the host's default
        self.error_retry_after: Optional[Seconds] = None  # retryable errors only
        self.finalized = False

    # Shorthands.
    @classmethod
    def retryable_error(cls, message: str, reason: str = "",
                        retry_after: Optional[Seconds] = None) -> Result:
        r = cls()
        r.set_error(RETRYABLE, message, reason, retry_after)
        return r

    @classmethod
    def terminal_error(cls, message: str, reason: str = "") -> Result:
        r = cls()
        r.set_error(TERMINAL, message, reason)
        return r

    @classmethod
    def requeue(cls, after: Seconds) -> Result:
        r = cls()
        r.requeue_after = after
        return r

    @classmethod
    def done_finalizing(cls) -> Result:
        r = cls()
        r.finalized = True
        return r

    # Desired objects.
    def desire(self, obj: JsonObject) -> JsonObject:
        """Adds a desired object (applied with server-side apply) and returns it for editing.
        metadata.name defaults to the primary's, namespace to the primary's, labels to the
        primary's labels except on an object of the primary's own kind (group and kind), which
        with them would match the controller's label selector and become a primary too."""
        self.desired.append(obj)
        return obj

    # Status and conditions.
    @property
    def status(self) -> JsonObject:
        """The status merge patch (a dict, created on first use)."""
        if not isinstance(self._status, dict):
            self._status = {}
        return self._status

    @status.setter
    def status(self, value: Optional[JsonObject]) -> None:
        self._status = value

    @property
    def has_status(self) -> bool:
        return self._status is not None

    def merge_status(self, patch: JsonObject) -> None:
        compose_merge_patch(self.status, patch)

    def set_condition(self, type_: str, status: ConditionStatus, reason: str,
                      message: str = "") -> None:
        """status: True / False / "True" / "False" / "Unknown". Replaces a condition of the
        same type. The host sets lastTransitionTime and observedGeneration."""
        cond = (type_, _condition_status(status), reason, message)
        for i, existing in enumerate(self.conditions):
            if existing[0] == type_:
                self.conditions[i] = cond
                return
        self.conditions.append(cond)

    def event(self, type_: str, reason: str, message: str = "") -> None:
        """type_: "Normal" or "Warning"."""
        self.events.append((type_, reason, message))

    # Patches.
    def _patch(self, target: int, type_: str, patch: Any, resource_version: str,
               api_version: str = "", kind: str = "", name: str = "") -> None:
        self.patches.append(
            dict(target=target, api_version=api_version, kind=kind, name=name, type=type_,
                 patch=patch, resource_version=resource_version or "")
        )

    def patch_primary(self, patch: Any, type_: str = MERGE_PATCH,
                      resource_version: str = "") -> None:
        self._patch(pb.PATCH_TARGET_PRIMARY, type_, patch, resource_version)

    def patch_status(self, patch: Any, type_: str = MERGE_PATCH,
                     resource_version: str = "") -> None:
        self._patch(pb.PATCH_TARGET_PRIMARY_STATUS, type_, patch, resource_version)

    def patch_owned(self, api_version: str, kind: str, name: str, patch: Any,
                    type_: str = MERGE_PATCH, resource_version: str = "") -> None:
        self._patch(pb.PATCH_TARGET_OWNED, type_, patch, resource_version, api_version, kind, name)

    # Errors.
    def set_error(self, kind: str, message: str, reason: str = "",
                  retry_after: Optional[Seconds] = None) -> None:
        """kind: RETRYABLE or TERMINAL. reason: CamelCase, "" for the host's default;
        retry_after (RETRYABLE only): the least wait before the retry. ValueError if invalid."""
        if kind not in (RETRYABLE, TERMINAL):
            raise ValueError("error kind must be %r or %r" % (RETRYABLE, TERMINAL))
        check_error(kind == TERMINAL, reason, retry_after)
        self.error = (kind, str(message))
        self.error_reason = reason
        self.error_retry_after = retry_after

    def merge(self, other: Result) -> None:
        """Adds another result's contents (the sooner requeue and the first error win)."""
        self.desired.extend(other.desired)
        if other.has_status:
            self.merge_status(other.status)
        for c in other.conditions:
            self.set_condition(*c)
        self.events.extend(other.events)
        self.patches.extend(other.patches)
        if other.requeue_after is not None and (
            self.requeue_after is None
            or _seconds(other.requeue_after) < _seconds(self.requeue_after)
        ):
            self.requeue_after = other.requeue_after
        if self.error is None:
            self.error = other.error
            self.error_reason = other.error_reason
            self.error_retry_after = other.error_retry_after
        self.finalized = self.finalized and other.finalized

    # The wire form.
    def to_response(self, request: Request, request_id: int,
                    capabilities: FrozenSet[int] = ALL_CAPABILITIES) -> pb.ReconcileResponse:
        """A pb.ReconcileResponse; InvalidResult naming the first problem."""

        def need(cap: int, what: str) -> None:
            if cap not in capabilities:
                raise InvalidResult(
                    "%s needs %s, which the host did not offer" % (what, pb.Capability.Name(cap))
                )

        if not request.exists and (
            self.desired or self.has_status or self.conditions or self.patches or self.finalized
        ):
            raise InvalidResult(
                "the primary is gone: only events, an error and requeue_after may be answered"
            )
        if self.finalized and not request.finalizing:
            raise InvalidResult("finalized answered to a request that is not finalizing")
        if self.finalized and self.error is not None:
            raise InvalidResult("finalized together with an error")
        requeue = None
        if self.requeue_after is not None:
            try:
                requeue = _seconds(self.requeue_after)
            except (TypeError, ValueError):
                raise InvalidResult("requeue_after must be seconds or a timedelta") from None
            if requeue < 0 or requeue != requeue or requeue > 1e11:
                raise InvalidResult("requeue_after must be between 0 and 1e11 seconds")

        resp = pb.ReconcileResponse(request_id=request_id)
        if self.desired:
            need(pb.CAPABILITY_SERVER_SIDE_APPLY, "a desired object")
        labels = request.labels
        for i, desired in enumerate(self.desired):
            if not isinstance(desired, dict):
                raise InvalidResult("desired object %d is not an object" % i)
            obj = dict(desired)
            if not _is_nonempty_str(obj, "apiVersion") or not _is_nonempty_str(obj, "kind"):
                raise InvalidResult("desired object %d needs apiVersion and kind" % i)
            meta = obj.get("metadata")
            if meta is None:
                meta = {}
            if not isinstance(meta, dict):
                raise InvalidResult("desired object %d: metadata is not an object" % i)
            meta = dict(meta)
            obj["metadata"] = meta
            if "name" not in meta:
                meta["name"] = request.name
            if not _is_nonempty_str(meta, "name"):
                raise InvalidResult("desired object %d has no name" % i)
            if "namespace" not in meta and request.namespace:
                meta["namespace"] = request.namespace
            # The primary's labels by default, except on objects of the primary's own kind
            # (group and kind): a child with them would match the label selector that selected
            # the primary and be reconciled as a primary itself. The same in every SDK.
            of_primary_kind = obj.get("kind") == request.kind and _group_of(
                obj.get("apiVersion")) == _group_of(request.api_version)
            if "labels" not in meta and not of_primary_kind and labels:
                meta["labels"] = dict(labels)
            resp.desired_objects.append(self._dump_checked(obj, "desired object %d" % i))
        for p in self.patches:
            ptype = _PATCH_TYPE.get(p["type"])
            if ptype is None:
                raise InvalidResult("patch type must be %r or %r" % (JSON_PATCH, MERGE_PATCH))
            if p["type"] == JSON_PATCH and not isinstance(p["patch"], list):
                raise InvalidResult("a JSON patch must be an array of operations")
            if p["type"] == MERGE_PATCH and not isinstance(p["patch"], dict):
                raise InvalidResult("a merge patch must be a JSON object")
            if p["target"] == pb.PATCH_TARGET_OWNED and not (
                p["api_version"] and p["kind"] and p["name"]
            ):
                raise InvalidResult("a patch of an owned object needs apiVersion, kind, name")
            resp.patches.add(
                target=p["target"], api_version=p["api_version"], kind=p["kind"], name=p["name"],
                type=ptype, patch=self._dump_checked(p["patch"], "a patch"),
                resource_version=str(p["resource_version"]),
            )
        if self._status is not None:
            if not isinstance(self._status, dict):
                raise InvalidResult("status is not a JSON object")
            if self._status:
                resp.status = self._dump_checked(self._status, "status")
        if self.conditions:
            need(pb.CAPABILITY_CONDITIONS, "a condition")
        for type_, status, reason, message in self.conditions:
            if not type_:
                raise InvalidResult("a condition without type")
            if status not in _CONDITION_STATUS:
                raise InvalidResult(
                    "condition %s: status must be True, False or Unknown, not %r" % (type_, status)
                )
            if not isinstance(reason, str) or len(reason) > 1024 or not _CONDITION_REASON.match(
                reason
            ):
                raise InvalidResult(
                    'condition %s: reason "%s" is not CamelCase ([A-Za-z0-9_,:])' % (type_, reason)
                )
            resp.conditions.add(
                type=type_, status=_CONDITION_STATUS[status], reason=reason, message=str(message)
            )
        for type_, reason, message in self.events:
            if type_ not in _EVENT_TYPE:
                raise InvalidResult("event type must be Normal or Warning, not %r" % (type_,))
            if not reason:
                raise InvalidResult("an event without reason")
            resp.events.add(type=_EVENT_TYPE[type_], reason=reason, message=str(message))
        if requeue is not None:
            seconds = int(requeue)
            resp.requeue_after.seconds = seconds
            resp.requeue_after.nanos = int(round((requeue - seconds) * 1e9)) % 1000000000
        if self.error is not None:
            kind, message = self.error
            try:
                retry_after = check_error(kind == TERMINAL, self.error_reason,
                                          self.error_retry_after)
            except ValueError as e:
                raise InvalidResult(str(e)) from None
            _fill_error(resp.error, message, kind == TERMINAL, self.error_reason, retry_after)
        resp.finalized = bool(self.finalized)
        return resp

    @staticmethod
    def _dump_checked(value: Any, what: str) -> bytes:
        try:
            return _dump(value)
        except (TypeError, ValueError, RecursionError) as e:
            raise InvalidResult("%s cannot be written as JSON: %s" % (what, e)) from None


def _fill_error(error: pb.Error, message: str, terminal: bool, reason: str,
                retry_after: Optional[float]) -> None:
    error.message = message
    error.kind = pb.ERROR_KIND_TERMINAL if terminal else pb.ERROR_KIND_RETRYABLE
    error.reason = reason
    if retry_after is not None:
        seconds = int(retry_after)
        error.retry_after.seconds = seconds
        error.retry_after.nanos = int(round((retry_after - seconds) * 1e9)) % 1000000000


def error_response(request_id: int, message: str, terminal: bool = False, reason: str = "",
                   retry_after: Optional[Seconds] = None) -> pb.ReconcileResponse:
    """A response carrying only an error (reason and retry_after validated: ValueError)."""
    resp = pb.ReconcileResponse(request_id=request_id)
    _fill_error(resp.error, message, terminal, reason,
                check_error(terminal, reason, retry_after))
    return resp
