"""Builders for the children operators create most (as sdk/cpp's builders.h and sdk/node's
builders.js, with the same output: e2e/conformance checks it).

    labels = common_labels("webapp", req.name)
    result.desire(build_deployment(req.name, labels=labels,
                                   selector=selector_labels("webapp", req.name), replicas=2,
                                   containers=[container],
                                   pod_annotations={CONFIG_HASH_ANNOTATION: config_hash(cfg)}))

Conventions, the same in every language:
- `labels` go on metadata.labels (and a Deployment's pod template); `selector` is a Deployment's
  spec.selector.matchLabels and a Service's spec.selector.
- Service ports always carry `protocol` (default "TCP"): Kubernetes 1.20 server-side apply
  refuses a port without it.
- config_hash(value): FNV-1a 64 (offset basis 1469598103934665603, prime 1099511628211) over the
  canonical JSON of `value` (no spaces, keys sorted by UTF-8 bytes, JSON's short escapes and
  \\u00XX for other control characters, non-ASCII kept) as 16 hex digits. Numbers must be
  integers (a float with an integral value within +-2**53 counts as one); any other number
  raises ValueError, so that every language hashes the same text.
- owner_reference(req): the primary as a controller owner reference (the host adds one to
  namespaced children itself).

Thread-safety: pure functions.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Optional, Sequence, Union

from ctrlhost_sdk.request import JsonObject, Request

CONFIG_HASH_ANNOTATION = "ctrlhost.dev/config-hash"
_MAX_EXACT_INTEGER = 2 ** 53
_RBAC = "rbac.authorization.k8s.io"


def selector_labels(app: str, instance: str) -> Dict[str, str]:
    return {"app.kubernetes.io/name": app, "app.kubernetes.io/instance": instance}


def common_labels(app: str, instance: str) -> Dict[str, str]:
    labels = selector_labels(app, instance)
    labels["app.kubernetes.io/managed-by"] = "ctrlhost"
    return labels


def _normalize(value: Any, depth: int = 0) -> Any:
    if depth > 64:
        raise ValueError("config nested deeper than 64 levels")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer() or abs(value) > _MAX_EXACT_INTEGER:
            raise ValueError("config hash: %r is not an integer (only integers hash the same in "
                             "every language)" % value)
        return int(value)
    if isinstance(value, dict):
        return {str(k): _normalize(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalize(v, depth + 1) for v in value]
    raise ValueError("config hash: %s is not JSON" % type(value).__name__)


def canonical_json(value: Any) -> str:
    """The text config_hash hashes (code point order is UTF-8 byte order)."""
    return json.dumps(_normalize(value), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)


def config_hash(value: Any) -> str:
    h = 1469598103934665603
    for byte in canonical_json(value).encode("utf-8", "surrogatepass"):
        h ^= byte
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def owner_reference(req: Request) -> JsonObject:
    return {"apiVersion": req.api_version, "kind": req.kind, "name": req.name, "uid": req.uid,
            "controller": True, "blockOwnerDeletion": True}


def _metadata(name: str, namespace: str, labels: Optional[Dict[str, str]],
              annotations: Optional[Dict[str, str]],
              owner: Optional[JsonObject]) -> JsonObject:
    meta: JsonObject = {}
    if name:
        meta["name"] = name
    if namespace:
        meta["namespace"] = namespace
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    if owner is not None:
        meta["ownerReferences"] = [dict(owner)]
    return meta


def _object(api_version: str, kind: str, name: str, namespace: str,
            labels: Optional[Dict[str, str]], annotations: Optional[Dict[str, str]],
            owner: Optional[JsonObject]) -> JsonObject:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": _metadata(name, namespace, labels, annotations, owner)}


def build_deployment(name: str = "", *, labels: Optional[Dict[str, str]] = None,
                     selector: Optional[Dict[str, str]] = None, replicas: int = 1,
                     containers: Sequence[JsonObject] = (),
                     pod_annotations: Optional[Dict[str, str]] = None,
                     pod_spec: Optional[JsonObject] = None,
                     annotations: Optional[Dict[str, str]] = None,
                     owner: Optional[JsonObject] = None) -> JsonObject:
    """selector defaults to labels; pod_spec holds extra pod fields (serviceAccountName, ...)."""
    d = _object("apps/v1", "Deployment", name, "", labels, annotations, owner)
    pod_meta: JsonObject = {}
    if labels is not None:
        pod_meta["labels"] = dict(labels)
    if pod_annotations is not None:
        pod_meta["annotations"] = dict(pod_annotations)
    spec = dict(pod_spec or {})
    spec["containers"] = list(containers)
    d["spec"] = {
        "replicas": replicas,
        "selector": {"matchLabels": dict(selector if selector is not None else labels or {})},
        "template": {"metadata": pod_meta, "spec": spec},
    }
    return d


def service_port(port: int, name: str = "", target_port: Union[int, str, None] = None,
                 protocol: str = "TCP") -> JsonObject:
    out: JsonObject = {"port": port, "protocol": protocol or "TCP"}
    if name:
        out["name"] = name
    if target_port is not None:
        out["targetPort"] = target_port
    return out


def build_service(name: str = "", *, labels: Optional[Dict[str, str]] = None,
                  selector: Optional[Dict[str, str]] = None, ports: Sequence[JsonObject] = (),
                  type: str = "", annotations: Optional[Dict[str, str]] = None,
                  owner: Optional[JsonObject] = None) -> JsonObject:
    """ports: service_port(...) items (a port without protocol gets "TCP")."""
    s = _object("v1", "Service", name, "", labels, annotations, owner)
    spec: JsonObject = {"ports": [dict(p, protocol=p.get("protocol") or "TCP") for p in ports]}
    if selector is not None:
        spec["selector"] = dict(selector)
    if type:
        spec["type"] = type
    s["spec"] = spec
    return s


def build_config_map(name: str = "", data: Optional[Dict[str, str]] = None, *,
                     namespace: str = "", labels: Optional[Dict[str, str]] = None,
                     annotations: Optional[Dict[str, str]] = None,
                     owner: Optional[JsonObject] = None) -> JsonObject:
    cm = _object("v1", "ConfigMap", name, namespace, labels, annotations, owner)
    if data is not None:
        cm["data"] = dict(data)
    return cm


def build_secret(name: str = "", string_data: Optional[Dict[str, str]] = None, type: str = "",
                 *, namespace: str = "", labels: Optional[Dict[str, str]] = None,
                 annotations: Optional[Dict[str, str]] = None,
                 owner: Optional[JsonObject] = None) -> JsonObject:
    secret = _object("v1", "Secret", name, namespace, labels, annotations, owner)
    if string_data is not None:
        secret["stringData"] = dict(string_data)
    if type:
        secret["type"] = type
    return secret


def build_service_account(name: str = "", *, namespace: str = "",
                          labels: Optional[Dict[str, str]] = None,
                          annotations: Optional[Dict[str, str]] = None,
                          owner: Optional[JsonObject] = None) -> JsonObject:
    return _object("v1", "ServiceAccount", name, namespace, labels, annotations, owner)


def policy_rule(api_groups: Sequence[str], resources: Sequence[str],
                verbs: Sequence[str]) -> JsonObject:
    return {"apiGroups": list(api_groups), "resources": list(resources), "verbs": list(verbs)}


def service_account_subject(name: str, namespace: str) -> JsonObject:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def build_role(name: str = "", rules: Optional[List[JsonObject]] = None, *, namespace: str = "",
               labels: Optional[Dict[str, str]] = None,
               annotations: Optional[Dict[str, str]] = None,
               owner: Optional[JsonObject] = None) -> JsonObject:
    role = _object(_RBAC + "/v1", "Role", name, namespace, labels, annotations, owner)
    role["rules"] = list(rules or [])
    return role


def build_cluster_role(name: str = "", rules: Optional[List[JsonObject]] = None, *,
                       labels: Optional[Dict[str, str]] = None,
                       annotations: Optional[Dict[str, str]] = None,
                       owner: Optional[JsonObject] = None) -> JsonObject:
    role = _object(_RBAC + "/v1", "ClusterRole", name, "", labels, annotations, owner)
    role["rules"] = list(rules or [])
    return role


def _binding(kind: str, role_kind: str, name: str, namespace: str, role: str,
             subjects: Optional[List[JsonObject]], labels: Optional[Dict[str, str]],
             annotations: Optional[Dict[str, str]], owner: Optional[JsonObject]) -> JsonObject:
    b = _object(_RBAC + "/v1", kind, name, namespace, labels, annotations, owner)
    b["roleRef"] = {"apiGroup": _RBAC, "kind": role_kind, "name": role}
    b["subjects"] = list(subjects or [])
    return b


def build_role_binding(name: str = "", role: str = "",
                       subjects: Optional[List[JsonObject]] = None, *, namespace: str = "",
                       labels: Optional[Dict[str, str]] = None,
                       annotations: Optional[Dict[str, str]] = None,
                       owner: Optional[JsonObject] = None) -> JsonObject:
    return _binding("RoleBinding", "Role", name, namespace, role, subjects, labels,
                    annotations, owner)


def build_cluster_role_binding(name: str = "", cluster_role: str = "",
                               subjects: Optional[List[JsonObject]] = None, *,
                               labels: Optional[Dict[str, str]] = None,
                               annotations: Optional[Dict[str, str]] = None,
                               owner: Optional[JsonObject] = None) -> JsonObject:
    return _binding("ClusterRoleBinding", "ClusterRole", name, "", cluster_role, subjects,
                    labels, annotations, owner)
