package ctrlhosttest

// The host's judgement of a fixture reconcile: what the live host would not send (a primary its
// label selector or namespaces exclude, a child of a kind it does not own or controlled by
// another object) and what it would refuse to apply (docs/protocol.md section 6: desired objects
// and OWNED patches of kinds the controller does not own, children outside the primary's
// namespace, status or conditions on a kind without a status subresource, an existing object the
// primary does not control). The same rules as `ctrlhost test --check`
// (runtime/controller/apply/validate.cc and the applier's ownership check), so a Go test fails
// where the host would refuse; the messages are the host's.

import (
	"errors"
	"fmt"
	"strings"

	ctrlhost "ctrlhost.dev/sdk/go"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
)

// withoutStatusSubresource: built-in kinds operators touch that serve no status subresource
// (they have no status at all), as in `ctrlhost test --check`. Every other kind, custom ones
// included, is taken to have one.
var withoutStatusSubresource = map[[2]string]bool{
	{"", "ConfigMap"}: true, {"", "Secret"}: true, {"", "ServiceAccount"}: true,
	{"", "Endpoints"}: true, {"", "Event"}: true, {"", "LimitRange"}: true,
	{"", "PodTemplate"}: true, {"events.k8s.io", "Event"}: true,
	{"coordination.k8s.io", "Lease"}: true, {"discovery.k8s.io", "EndpointSlice"}: true,
	{"rbac.authorization.k8s.io", "Role"}: true, {"rbac.authorization.k8s.io", "RoleBinding"}: true,
	{"rbac.authorization.k8s.io", "ClusterRole"}: true,
	{"rbac.authorization.k8s.io", "ClusterRoleBinding"}: true,
	{"storage.k8s.io", "StorageClass"}: true, {"scheduling.k8s.io", "PriorityClass"}: true,
	{"node.k8s.io", "RuntimeClass"}: true, {"networking.k8s.io", "IngressClass"}: true,
	{"admissionregistration.k8s.io", "ValidatingWebhookConfiguration"}: true,
	{"admissionregistration.k8s.io", "MutatingWebhookConfiguration"}: true,
}

func groupOf(apiVersion string) string {
	if i := strings.IndexByte(apiVersion, '/'); i >= 0 {
		return apiVersion[:i]
	}
	return ""
}

func apiVersionOf(gvk *pb.GroupVersionKind) string {
	if gvk.GetGroup() == "" {
		return gvk.GetVersion()
	}
	return gvk.GetGroup() + "/" + gvk.GetVersion()
}

func owned(spec *pb.ControllerSpec, group, kind string) *pb.OwnedKind {
	for _, o := range spec.GetOwns() {
		if o.GetKind().GetGroup() == group && o.GetKind().GetKind() == kind {
			return o
		}
	}
	return nil
}

func isPrimaryKind(spec *pb.ControllerSpec, group, kind string) bool {
	return spec.GetPrimary().GetGroup() == group && spec.GetPrimary().GetKind() == kind
}

func labelsOf(obj ctrlhost.Object) map[string]string {
	return ctrlhost.StringMap(obj, "metadata.labels")
}

// judgeRequest says why the host would not send this reconcile (nil: it would).
func judgeRequest(spec *pb.ControllerSpec, call *pb.ReconcileCall, obj ctrlhost.Object) error {
	if obj == nil {
		return nil // the deletion notice of a gone primary
	}
	apiVersion, _ := ctrlhost.String(obj, "apiVersion")
	kind, _ := ctrlhost.String(obj, "kind")
	if !isPrimaryKind(spec, groupOf(apiVersion), kind) {
		return fmt.Errorf("the object is a %s %s; controller %s reconciles %s %s", apiVersion, kind,
			spec.GetName(), apiVersionOf(spec.GetPrimary()), spec.GetPrimary().GetKind())
	}
	if sel := spec.GetLabelSelector(); sel != "" {
		ok, err := matchesSelector(sel, labelsOf(obj))
		if err != nil {
			return fmt.Errorf("controller %s: label selector %q: %v", spec.GetName(), sel, err)
		}
		if !ok {
			return fmt.Errorf("the object's labels %v do not match controller %s's label selector %q: "+
				"the host would never reconcile it", labelsOf(obj), spec.GetName(), sel)
		}
	}
	if ns := call.GetNamespace(); ns != "" && len(spec.GetNamespaces()) > 0 {
		found := false
		for _, n := range spec.GetNamespaces() {
			found = found || n == ns
		}
		if !found {
			return fmt.Errorf("namespace %q is not one of controller %s's namespaces %v: the host "+
				"would never reconcile it", ns, spec.GetName(), spec.GetNamespaces())
		}
	}
	for _, child := range call.GetChildren() {
		c, err := ctrlhost.ParseObject(child.GetObject())
		if err != nil {
			return fmt.Errorf("child %s %s: %v", child.GetApiVersion(), child.GetKind(), err)
		}
		name, _ := ctrlhost.String(c, "metadata.name")
		if owned(spec, groupOf(child.GetApiVersion()), child.GetKind()) == nil {
			return fmt.Errorf("child %s %s %s: controller %s does not own that kind, so the host "+
				"never passes one as a child", child.GetApiVersion(), child.GetKind(), name, spec.GetName())
		}
		if !controlledByPrimary(c, spec, call) {
			uid := controllerUID(c)
			why := "it has no controller"
			if uid != "" {
				why = "it is controlled by another object (uid " + uid + ")"
			}
			return fmt.Errorf("child %s %s %s: %s, so the host never passes it as a child (pass it "+
				"with Existing to test an object in the way)", child.GetApiVersion(), child.GetKind(), name, why)
		}
	}
	return nil
}

// controllerRef is obj's controller owner reference (nil when none).
func controllerRef(obj map[string]any) map[string]any {
	refs, _ := ctrlhost.Lookup(obj, "metadata.ownerReferences").([]any)
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		if controller, _ := ref["controller"].(bool); controller {
			return ref
		}
	}
	return nil
}

// controllerUID is the uid of obj's controller owner reference ("" when none).
func controllerUID(obj map[string]any) string {
	uid, _ := controllerRef(obj)["uid"].(string)
	return uid
}

// controlledByPrimary: obj's controller reference names the primary (by uid; by kind and name
// when the fixture primary has no uid).
func controlledByPrimary(obj map[string]any, spec *pb.ControllerSpec, call *pb.ReconcileCall) bool {
	ref := controllerRef(obj)
	if ref == nil {
		return false
	}
	if call.GetUid() != "" {
		uid, _ := ref["uid"].(string)
		return uid == call.GetUid()
	}
	apiVersion, _ := ref["apiVersion"].(string)
	kind, _ := ref["kind"].(string)
	name, _ := ref["name"].(string)
	return isPrimaryKind(spec, groupOf(apiVersion), kind) && name == call.GetName()
}

// withOwnerReference is child with the controller reference to the primary the host sets when
// it applies a child, when the fixture has no ownerReferences at all (a fixture with some is
// taken as written). The host only passes children it controls.
func withOwnerReference(child ctrlhost.Object, spec *pb.ControllerSpec, call *pb.ReconcileCall) ctrlhost.Object {
	meta, _ := child["metadata"].(map[string]any)
	if meta == nil || len(call.GetObject()) == 0 {
		return child
	}
	if _, ok := meta["ownerReferences"]; ok {
		return child
	}
	out := ctrlhost.DeepCopy(child).(ctrlhost.Object)
	ref := map[string]any{"apiVersion": apiVersionOf(spec.GetPrimary()), "kind": spec.GetPrimary().GetKind(),
		"name": call.GetName(), "controller": true, "blockOwnerDeletion": true}
	if call.GetUid() != "" {
		ref["uid"] = call.GetUid()
	}
	out["metadata"].(map[string]any)["ownerReferences"] = []any{ref}
	return out
}

// judgeResponse says why the host would refuse resp (nil: it would apply it).
func judgeResponse(spec *pb.ControllerSpec, call *pb.ReconcileCall, existing []ctrlhost.Object,
	resp *pb.ReconcileResponse) error {
	if resp.GetError() != nil && len(resp.GetDesiredObjects()) == 0 && len(resp.GetPatches()) == 0 &&
		len(resp.GetStatus()) == 0 && len(resp.GetConditions()) == 0 {
		return nil // an error answer (the SDK validated it)
	}
	if len(call.GetObject()) == 0 {
		return nil // a gone primary: the SDK allows only events, an error and a requeue
	}
	primary := spec.GetPrimary()
	if withoutStatusSubresource[[2]string{primary.GetGroup(), primary.GetKind()}] {
		what := ""
		switch {
		case len(resp.GetStatus()) > 0:
			what = "status"
		case len(resp.GetConditions()) > 0:
			what = "conditions"
		}
		if what != "" {
			return fmt.Errorf("%s: kind %s %s has no status subresource, so it has no status to "+
				"write; record the outcome with an event instead", what, apiVersionOf(primary), primary.GetKind())
		}
		for i, p := range resp.GetPatches() {
			if p.GetTarget() == pb.PatchTarget_PATCH_TARGET_PRIMARY_STATUS {
				return fmt.Errorf("patches[%d]: a PRIMARY_STATUS patch needs a status subresource; "+
					"kind %s %s has none (a PRIMARY patch changes the object)", i, apiVersionOf(primary), primary.GetKind())
			}
		}
	}
	namespaced := call.GetNamespace() != ""
	childNamespace := call.GetNamespace()
	if primary.GetGroup() == "" && primary.GetKind() == "Namespace" {
		childNamespace = call.GetName()
	}
	for i, data := range resp.GetDesiredObjects() {
		where := fmt.Sprintf("desired_objects[%d]", i)
		d, err := ctrlhost.ParseObject(data)
		if err != nil {
			return fmt.Errorf("%s: %v", where, err)
		}
		apiVersion, _ := ctrlhost.String(d, "apiVersion")
		kind, _ := ctrlhost.String(d, "kind")
		name, _ := ctrlhost.String(d, "metadata.name")
		ns, _ := ctrlhost.String(d, "metadata.namespace")
		group := groupOf(apiVersion)
		o := owned(spec, group, kind)
		if isPrimaryKind(spec, group, kind) && name == call.GetName() {
			if namespaced && ns != "" && ns != call.GetNamespace() {
				return fmt.Errorf("%s: namespace %q is not the primary's %q", where, ns, call.GetNamespace())
			}
			continue
		}
		if o == nil {
			return fmt.Errorf("%s: kind %s %s is not owned by controller %s", where, apiVersion, kind, spec.GetName())
		}
		if o.GetClusterScoped() {
			if ns != "" {
				return fmt.Errorf("%s: kind %s is cluster-scoped; metadata.namespace must be empty", where, kind)
			}
		} else if childNamespace == "" {
			if ns == "" {
				return fmt.Errorf("%s: metadata.namespace is required (the primary is cluster-scoped)", where)
			}
		} else if ns != "" && ns != childNamespace {
			return fmt.Errorf("%s: namespace %q is outside the primary's %q", where, ns, childNamespace)
		} else {
			ns = childNamespace
		}
		for _, e := range existing {
			eAPIVersion, _ := ctrlhost.String(e, "apiVersion")
			eKind, _ := ctrlhost.String(e, "kind")
			eName, _ := ctrlhost.String(e, "metadata.name")
			eNamespace, _ := ctrlhost.String(e, "metadata.namespace")
			if groupOf(eAPIVersion) != group || eKind != kind || eName != name || eNamespace != ns {
				continue
			}
			if controlledByPrimary(e, spec, call) {
				continue
			}
			uid := controllerUID(e)
			state := "has no controller"
			if uid != "" {
				state = "is controlled by another object (uid " + uid + ")"
			}
			target := name
			if ns != "" {
				target = ns + "/" + name
			}
			primaryName := call.GetName()
			if call.GetNamespace() != "" {
				primaryName = call.GetNamespace() + "/" + primaryName
			}
			return fmt.Errorf("%s: %s %s exists and %s; %s %s does not adopt it (the protocol has no "+
				"adoption): delete it (%s %s is reconciled again when it is gone) or rename the child",
				where, kind, target, state, primary.GetKind(), primaryName, primary.GetKind(), primaryName)
		}
	}
	for i, p := range resp.GetPatches() {
		if p.GetTarget() != pb.PatchTarget_PATCH_TARGET_OWNED {
			continue
		}
		if owned(spec, groupOf(p.GetApiVersion()), p.GetKind()) == nil {
			return fmt.Errorf("patches[%d]: kind %s %s is not owned by controller %s", i, p.GetApiVersion(),
				p.GetKind(), spec.GetName())
		}
	}
	return nil
}

// matchesSelector reads the kubectl label selector syntax (a=b, a==b, a!=b, a in (x,y),
// a notin (x), a, !a; requirements joined by commas) and matches labels against it.
func matchesSelector(selector string, labels map[string]string) (bool, error) {
	var parts []string
	depth, start := 0, 0
	for i, r := range selector {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, selector[start:i])
				start = i + 1
			}
		}
	}
	parts = append(parts, selector[start:])
	for _, raw := range parts {
		req := strings.TrimSpace(raw)
		if req == "" {
			return false, errors.New("empty requirement")
		}
		ok, err := matchesRequirement(req, labels)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func matchesRequirement(req string, labels map[string]string) (bool, error) {
	if strings.HasPrefix(req, "!") {
		_, has := labels[strings.TrimSpace(req[1:])]
		return !has, nil
	}
	for _, op := range []string{"!=", "==", "="} {
		if i := strings.Index(req, op); i >= 0 {
			key, value := strings.TrimSpace(req[:i]), strings.TrimSpace(req[i+len(op):])
			got, has := labels[key]
			if op == "!=" {
				return !has || got != value, nil
			}
			return has && got == value, nil
		}
	}
	fields := strings.Fields(req)
	if len(fields) == 1 {
		_, has := labels[fields[0]]
		return has, nil
	}
	if len(fields) >= 3 && (fields[1] == "in" || fields[1] == "notin") {
		rest := strings.TrimSpace(strings.SplitN(req, fields[1], 2)[1])
		if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
			return false, fmt.Errorf("%q: values must be in parentheses", req)
		}
		values := map[string]bool{}
		for _, v := range strings.Split(rest[1:len(rest)-1], ",") {
			values[strings.TrimSpace(v)] = true
		}
		got, has := labels[fields[0]]
		if fields[1] == "in" {
			return has && values[got], nil
		}
		return !has || !values[got], nil
	}
	return false, fmt.Errorf("%q is not a label requirement", req)
}
