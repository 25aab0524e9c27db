"""The live host's judgement of a reconcile, for the offline harness (testing.py).

What the host would not send (a primary its label selector or namespaces exclude, a child of a
kind it does not own or controlled by another object) and what it would refuse to apply
(docs/protocol.md section 6: desired objects and OWNED patches of kinds the controller does not
own, children outside the primary's namespace, status or conditions on a kind without a status
subresource, an existing object the primary does not control: NotControlled). The same rules
and messages as the host (runtime/controller/apply/validate.cc, the applier's ownership check,
`ctrlhost test --check`) and the other SDKs' harnesses (sdk/go/ctrlhosttest/host_judgement.go); the
cases all of them pass are sdk/testdata/host_judgement_cases.json.

Pure functions of their arguments.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ctrlhost_sdk._proto import pb

JsonObject = Dict[str, Any]

# Built-in kinds operators touch that serve no status subresource (they have no status at all),
# as in `ctrlhost test --check`. Every other kind, custom ones included, is taken to have one.
WITHOUT_STATUS_SUBRESOURCE = frozenset([
    ("", "ConfigMap"), ("", "Secret"), ("", "ServiceAccount"), ("", "Endpoints"), ("", "Event"),
    ("", "LimitRange"), ("", "PodTemplate"), ("events.k8s.io", "Event"),
    ("coordination.k8s.io", "Lease"), ("discovery.k8s.io", "EndpointSlice"),
    ("rbac.authorization.k8s.io", "Role"), ("rbac.authorization.k8s.io", "RoleBinding"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"), ("storage.k8s.io", "StorageClass"),
    ("scheduling.k8s.io", "PriorityClass"), ("node.k8s.io", "RuntimeClass"),
    ("networking.k8s.io", "IngressClass"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
])


def _group_of(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def _api_version_of(gvk: Any) -> str:
    return gvk.version if not gvk.group else "%s/%s" % (gvk.group, gvk.version)


def _str(obj: Any, path: str) -> str:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return ""
        obj = obj.get(part)
    return obj if isinstance(obj, str) else ""


def _owned(spec: pb.ControllerSpec, group: str, kind: str) -> Optional[Any]:
    for o in spec.owns:
        if o.kind.group == group and o.kind.kind == kind:
            return o
    return None


def _is_primary_kind(spec: pb.ControllerSpec, group: str, kind: str) -> bool:
    return spec.primary.group == group and spec.primary.kind == kind


def _labels_of(obj: JsonObject) -> Dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {k: v for k, v in labels.items() if isinstance(v, str)}


def controller_ref(obj: JsonObject) -> Optional[JsonObject]:
    """obj's controller owner reference (None when it has none)."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def _controller_uid(obj: JsonObject) -> str:
    ref = controller_ref(obj)
    uid = ref.get("uid") if ref is not None else ""
    return uid if isinstance(uid, str) else ""


def controlled_by_primary(obj: JsonObject, spec: pb.ControllerSpec,
                          call: pb.ReconcileCall) -> bool:
    """obj's controller reference names the primary (by uid; by kind and name when the fixture
    primary has no uid)."""
    ref = controller_ref(obj)
    if ref is None:
        return False
    if call.uid:
        return ref.get("uid") == call.uid
    return (_is_primary_kind(spec, _group_of(str(ref.get("apiVersion", ""))),
                             str(ref.get("kind", "")))
            and ref.get("name") == call.name)


def with_owner_reference(child: JsonObject, spec: pb.ControllerSpec,
                         call: pb.ReconcileCall) -> JsonObject:
    """child with the controller reference to the primary the host sets when it applies a
    child, when the fixture has no ownerReferences at all (one with some is taken as
    written). The caller's object is not changed."""
    meta = child.get("metadata")
    if not isinstance(meta, dict) or not call.object or "ownerReferences" in meta:
        return child
    out = copy.deepcopy(child)
    ref: JsonObject = {"apiVersion": _api_version_of(spec.primary), "kind": spec.primary.kind,
                       "name": call.name, "controller": True, "blockOwnerDeletion": True}
    if call.uid:
        ref["uid"] = call.uid
    out["metadata"]["ownerReferences"] = [ref]
    return out


def _go_list(values: Sequence[str]) -> str:
    return "[" + " ".join(values) + "]"


def judge_request(spec: pb.ControllerSpec, call: pb.ReconcileCall,
                  obj: Optional[JsonObject]) -> Optional[str]:
    """Why the host would never send this reconcile (None: it would)."""
    if obj is None:
        return None  # the deletion notice of a gone primary
    api_version, kind = _str(obj, "apiVersion"), _str(obj, "kind")
    if not _is_primary_kind(spec, _group_of(api_version), kind):
        return "the object is a %s %s; controller %s reconciles %s %s" % (
            api_version, kind, spec.name, _api_version_of(spec.primary), spec.primary.kind)
    if spec.label_selector:
        labels = _labels_of(obj)
        try:
            ok = matches_selector(spec.label_selector, labels)
        except ValueError as e:
            return "controller %s: label selector %s: %s" % (
                spec.name, json.dumps(spec.label_selector), e)
        if not ok:
            shown = ",".join("%s=%s" % kv for kv in sorted(labels.items()))
            return ("the object's labels {%s} do not match controller %s's label selector %s: "
                    "the host would never reconcile it" % (shown, spec.name,
                                                           json.dumps(spec.label_selector)))
    if call.namespace and spec.namespaces and call.namespace not in spec.namespaces:
        return ("namespace %s is not one of controller %s's namespaces %s: the host would "
                "never reconcile it" % (json.dumps(call.namespace), spec.name,
                                        _go_list(spec.namespaces)))
    for child in call.children:
        try:
            c = json.loads(child.object)
        except ValueError as e:
            return "child %s %s: %s" % (child.api_version, child.kind, e)
        name = _str(c, "metadata.name")
        if _owned(spec, _group_of(child.api_version), child.kind) is None:
            return ("child %s %s %s: controller %s does not own that kind, so the host never "
                    "passes one as a child" % (child.api_version, child.kind, name, spec.name))
        if not controlled_by_primary(c, spec, call):
            uid = _controller_uid(c)
            why = ("it is controlled by another object (uid %s)" % uid if uid
                   else "it has no controller")
            return ("child %s %s %s: %s, so the host never passes it as a child (pass it as "
                    "existing to test an object in the way)" % (child.api_version, child.kind,
                                                                name, why))
    return None


def judge_response(spec: pb.ControllerSpec, call: pb.ReconcileCall,
                   existing: Sequence[JsonObject], resp: pb.ReconcileResponse) -> Optional[str]:
    """Why the host would refuse `resp` (None: it would apply it)."""
    if (resp.HasField("error") and not resp.desired_objects and not resp.patches
            and not resp.status and not resp.conditions):
        return None  # an error answer (the SDK validated it)
    if not call.object:
        return None  # a gone primary: the SDK allows only events, an error and a requeue
    primary = spec.primary
    if (primary.group, primary.kind) in WITHOUT_STATUS_SUBRESOURCE:
        what = "status" if resp.status else "conditions" if resp.conditions else ""
        if what:
            return ("%s: kind %s %s has no status subresource, so it has no status to write; "
                    "record the outcome with an event instead"
                    % (what, _api_version_of(primary), primary.kind))
        for i, p in enumerate(resp.patches):
            if p.target == pb.PATCH_TARGET_PRIMARY_STATUS:
                return ("patches[%d]: a PRIMARY_STATUS patch needs a status subresource; kind "
                        "%s %s has none (a PRIMARY patch changes the object)"
                        % (i, _api_version_of(primary), primary.kind))
    namespaced = call.namespace != ""
    child_namespace = call.name if (primary.group, primary.kind) == ("", "Namespace") \
        else call.namespace
    for i, data in enumerate(resp.desired_objects):
        where = "desired_objects[%d]" % i
        try:
            d = json.loads(data)
        except ValueError as e:
            return "%s: %s" % (where, e)
        api_version, kind = _str(d, "apiVersion"), _str(d, "kind")
        name, ns = _str(d, "metadata.name"), _str(d, "metadata.namespace")
        group = _group_of(api_version)
        if _is_primary_kind(spec, group, kind) and name == call.name:
            if namespaced and ns and ns != call.namespace:
                return "%s: namespace %s is not the primary's %s" % (
                    where, json.dumps(ns), json.dumps(call.namespace))
            continue
        owned = _owned(spec, group, kind)
        if owned is None:
            return "%s: kind %s %s is not owned by controller %s" % (where, api_version, kind,
                                                                    spec.name)
        if owned.cluster_scoped:
            if ns:
                return "%s: kind %s is cluster-scoped; metadata.namespace must be empty" % (
                    where, kind)
        elif not child_namespace:
            if not ns:
                return "%s: metadata.namespace is required (the primary is cluster-scoped)" % (
                    where)
        elif ns and ns != child_namespace:
            return "%s: namespace %s is outside the primary's %s" % (
                where, json.dumps(ns), json.dumps(child_namespace))
        else:
            ns = child_namespace
        refusal = _not_controlled(spec, call, existing, where, group, kind, name, ns)
        if refusal is not None:
            return refusal
    for i, p in enumerate(resp.patches):
        if p.target != pb.PATCH_TARGET_OWNED:
            continue
        if _owned(spec, _group_of(p.api_version), p.kind) is None:
            return "patches[%d]: kind %s %s is not owned by controller %s" % (
                i, p.api_version, p.kind, spec.name)
    return None


def _not_controlled(spec: pb.ControllerSpec, call: pb.ReconcileCall,
                    existing: Sequence[JsonObject], where: str, group: str, kind: str, name: str,
                    ns: str) -> Optional[str]:
    """The applier's NotControlled refusal when an existing object has the desired identity
    and the primary does not control it."""
    for e in existing:
        if ((_group_of(_str(e, "apiVersion")), _str(e, "kind"), _str(e, "metadata.name"),
             _str(e, "metadata.namespace")) != (group, kind, name, ns)):
            continue
        if controlled_by_primary(e, spec, call):
            continue
        uid = _controller_uid(e)
        state = ("is controlled by another object (uid %s)" % uid if uid
                 else "has no controller")
        target = "%s/%s" % (ns, name) if ns else name
        primary_name = "%s/%s" % (call.namespace, call.name) if call.namespace else call.name
        pk = spec.primary.kind
        return ("%s: %s %s exists and %s; %s %s does not adopt it (the protocol has no "
                "adoption): delete it (%s %s is reconciled again when it is gone) or rename the "
                "child" % (where, kind, target, state, pk, primary_name, pk, primary_name))
    return None


def matches_selector(selector: str, labels: Dict[str, str]) -> bool:
    """kubectl's label selector syntax (a=b, a==b, a!=b, a in (x,y), a notin (x), a, !a;
    requirements joined by commas) matched against labels. ValueError for a bad selector."""
    parts: List[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(selector):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(selector[start:i])
            start = i + 1
    parts.append(selector[start:])
    for raw in parts:
        req = raw.strip()
        if not req:
            raise ValueError("empty requirement")
        if not _matches_requirement(req, labels):
            return False
    return True


def _matches_requirement(req: str, labels: Dict[str, str]) -> bool:
    if req.startswith("!"):
        return req[1:].strip() not in labels
    for op in ("!=", "==", "="):
        i = req.find(op)
        if i >= 0:
            key, value = req[:i].strip(), req[i + len(op):].strip()
            if op == "!=":
                return labels.get(key) != value
            return key in labels and labels[key] == value
    fields = req.split()
    if len(fields) == 1:
        return fields[0] in labels
    if len(fields) >= 3 and fields[1] in ("in", "notin"):
        rest = req.split(fields[1], 1)[1].strip()
        if not rest.startswith("(") or not rest.endswith(")"):
            raise ValueError("%s: values must be in parentheses" % json.dumps(req))
        values = {v.strip() for v in rest[1:-1].split(",")}
        has = fields[0] in labels
        if fields[1] == "in":
            return has and labels[fields[0]] in values
        return not has or labels[fields[0]] not in values
    raise ValueError("%s is not a label requirement" % json.dumps(req))


def judged_children(spec: pb.ControllerSpec, call: pb.ReconcileCall,
                    children: Sequence[JsonObject]) -> Tuple[JsonObject, ...]:
    """The children as the host passes them (see with_owner_reference)."""
    return tuple(with_owner_reference(c, spec, call) for c in children)
