"""Request: one reconcile as the plugin sees it, with typed accessors over the parsed JSON.

    def reconcile(req):
        if req.deleting:
            return Result()
        replicas = req.spec.get("replicas", 1)
        deployment = req.child("Deployment", req.name)   # dict or None

Objects are plain dicts parsed from the JSON the host sent; accessors never raise on missing or
mistyped fields (they answer empty values), so untrusted input cannot crash a controller.

Thread-safety: a Request is immutable after construction except for its cancellation flag,
a threading.Event set by the serving thread.
"""

from __future__ import annotations

import datetime
import json
import threading
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from ctrlhost_sdk._proto import pb

# A Kubernetes object (or any JSON object) as parsed from the host's JSON.
JsonObject = Dict[str, Any]

_REASON_NAMES = {
    pb.REASON_PRIMARY_CHANGED: "PrimaryChanged",
    pb.REASON_PRIMARY_DELETED: "PrimaryDeleted",
    pb.REASON_CHILD_CHANGED: "ChildChanged",
    pb.REASON_RELATED_CHANGED: "RelatedChanged",
    pb.REASON_REQUEUE: "Requeue",
    pb.REASON_RETRY: "Retry",
    pb.REASON_RESYNC: "Resync",
    pb.REASON_SCHEDULE: "Schedule",
    pb.REASON_PLUGIN_STARTED: "PluginStarted",
}


class RequestError(ValueError):
    """The request cannot be read (malformed JSON from the host)."""


def find_path(obj: Any, path: str) -> Any:
    """The value at a dot-separated path ("status.readyReplicas"), or None."""
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def string_map(value: Any) -> Dict[str, str]:
    """The string-valued entries of a JSON object (labels, annotations); {} otherwise."""
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(v, str)}


def _dict_at(obj: Any, key: str) -> JsonObject:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def _str_at(obj: Any, path: str) -> str:
    value = find_path(obj, path)
    return value if isinstance(value, str) else ""


def parse_object(data: Union[bytes, bytearray, str], what: str) -> JsonObject:
    """Parses raw JSON bytes into a dict; RequestError when they are not one JSON object."""
    try:
        value = json.loads(data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise RequestError("%s is not valid JSON: %s" % (what, e)) from None
    if not isinstance(value, dict):
        raise RequestError("%s is not a JSON object" % what)
    return value


class Object:
    """A child or related object: its apiVersion and kind (from the envelope) and the JSON."""

    __slots__ = ("api_version", "kind", "json")

    def __init__(self, api_version: str, kind: str, obj: JsonObject) -> None:
        self.api_version = api_version
        self.kind = kind
        self.json = obj

    @property
    def name(self) -> str:
        return _str_at(self.json, "metadata.name")

    @property
    def namespace(self) -> str:
        return _str_at(self.json, "metadata.namespace")

    def __repr__(self) -> str:
        return "Object(%s %s %s)" % (self.api_version, self.kind, self.name)


class Request:
    """One reconcile call. Build it with Request.from_call (the server does) or
    Request.for_object (tests)."""

    def __init__(self, call: pb.ReconcileCall, obj: Optional[JsonObject],
                 children: List[Object], related: List[Object],
                 cancelled: Optional[threading.Event] = None) -> None:
        self._call = call
        self.object = obj  # None when the primary is gone
        self.children = children
        self.related = related
        self._cancelled = cancelled or threading.Event()

    @classmethod
    def from_call(cls, call: pb.ReconcileCall,
                  cancelled: Optional[threading.Event] = None) -> Request:
        """Parses a pb.ReconcileCall; RequestError when an object is malformed."""
        obj = parse_object(call.object, "the primary object") if call.object else None

        def objects(raws: Iterable[Any], what: str) -> List[Object]:
            return [
                Object(r.api_version, r.kind, parse_object(r.object, "%s %s" % (what, r.kind)))
                for r in raws
            ]

        children = objects(call.children, "child")
        related = objects(call.related_objects, "related object")
        meta = pb.ReconcileCall()
        meta.CopyFrom(call)
        meta.ClearField("object")
        meta.ClearField("children")
        meta.ClearField("related_objects")
        return cls(meta, obj, children, related, cancelled)

    @classmethod
    def for_object(cls, obj: Optional[JsonObject], controller: str = "",
                   children: Sequence[Union[JsonObject, Object]] = (),
                   related: Sequence[Union[JsonObject, Object]] = (), finalizing: bool = False,
                   reason: int = pb.REASON_PRIMARY_CHANGED, attempt: int = 1) -> Request:
        """A request built from dicts, for tests: children/related are dicts (apiVersion and
        kind taken from each) or Objects."""

        def wrap(items: Sequence[Union[JsonObject, Object]]) -> List[Object]:
            return [
                o if isinstance(o, Object)
                else Object(o.get("apiVersion", ""), o.get("kind", ""), o)
                for o in items
            ]

        call = pb.ReconcileCall(
            controller=controller,
            namespace=_str_at(obj, "metadata.namespace") if obj else "",
            name=_str_at(obj, "metadata.name") if obj else "",
            uid=_str_at(obj, "metadata.uid") if obj else "",
            reason=reason,
            finalizing=finalizing,
            attempt=attempt,
        )
        return cls(call, obj, wrap(children), wrap(related))

    # The call.
    @property
    def call(self) -> pb.ReconcileCall:
        """The pb.ReconcileCall without its objects."""
        return self._call

    @property
    def controller(self) -> str:
        return str(self._call.controller)

    @property
    def namespace(self) -> str:
        return str(self._call.namespace)

    @property
    def name(self) -> str:
        return str(self._call.name)

    @property
    def uid(self) -> str:
        return str(self._call.uid)

    @property
    def reason(self) -> int:
        """A pb.REASON_* number."""
        return int(self._call.reason)

    @property
    def attempt(self) -> int:
        return int(self._call.attempt)

    @property
    def trace_id(self) -> str:
        return str(self._call.trace_id)

    @property
    def finalizing(self) -> bool:
        return bool(self._call.finalizing)

    @property
    def reason_name(self) -> str:
        """"PrimaryChanged", "Resync", ...; "Unspecified" for values this SDK does not know."""
        return _REASON_NAMES.get(self._call.reason, "Unspecified")

    @property
    def deadline(self) -> Optional[datetime.datetime]:
        """An aware datetime (UTC), or None when the host set no deadline."""
        if not self._call.HasField("deadline"):
            return None
        return self._call.deadline.ToDatetime().replace(tzinfo=datetime.timezone.utc)

    @property
    def cancelled(self) -> bool:
        """True once the host cancelled this request: stop early, the answer is discarded."""
        return self._cancelled.is_set()

    def wait_cancelled(self, timeout: Optional[float]) -> bool:
        """Blocks up to `timeout` seconds or until the host cancels; True when cancelled. For
        controllers that wait on something outside (use it instead of time.sleep)."""
        return self._cancelled.wait(timeout)

    # The primary.
    @property
    def exists(self) -> bool:
        """False for the deletion notice of a primary that is already gone."""
        return isinstance(self.object, dict)

    @property
    def deleting(self) -> bool:
        return find_path(self.object, "metadata.deletionTimestamp") is not None

    @property
    def metadata(self) -> JsonObject:
        return _dict_at(self.object, "metadata")

    @property
    def spec(self) -> JsonObject:
        return _dict_at(self.object, "spec")

    @property
    def status(self) -> JsonObject:
        return _dict_at(self.object, "status")

    @property
    def api_version(self) -> str:
        return _str_at(self.object, "apiVersion")

    @property
    def kind(self) -> str:
        return _str_at(self.object, "kind")

    @property
    def resource_version(self) -> str:
        return _str_at(self.object, "metadata.resourceVersion")

    @property
    def labels(self) -> Dict[str, str]:
        return string_map(self.metadata.get("labels"))

    @property
    def annotations(self) -> Dict[str, str]:
        return string_map(self.metadata.get("annotations"))

    @property
    def generation(self) -> int:
        g = find_path(self.object, "metadata.generation")
        return g if isinstance(g, int) and not isinstance(g, bool) else 0

    def label(self, key: str) -> Optional[str]:
        return self.labels.get(key)

    def annotation(self, key: str) -> Optional[str]:
        return self.annotations.get(key)

    # Children and related objects.
    def children_of_kind(self, kind: str, api_version: Optional[str] = None) -> List[Object]:
        return [o for o in self.children if o.kind == kind and api_version in (None, o.api_version)]

    def related_of_kind(self, kind: str, api_version: Optional[str] = None) -> List[Object]:
        return [o for o in self.related if o.kind == kind and api_version in (None, o.api_version)]

    def child(self, kind: str, name: str) -> Optional[JsonObject]:
        """The child's JSON (dict) of that kind and name, or None."""
        for o in self.children:
            if o.kind == kind and o.name == name:
                return o.json
        return None

    def related_object(self, kind: str, name: str,
                       namespace: Optional[str] = None) -> Optional[JsonObject]:
        for o in self.related:
            if o.kind == kind and o.name == name and namespace in (None, o.namespace):
                return o.json
        return None
