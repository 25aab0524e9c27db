package ctrlhost

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// Builders for the children operators create most (as the C++, Python and Node SDKs' builders,
// with the same output: e2e/conformance checks it). Conventions, the same in every language:
//   - Labels go on metadata.labels (and a Deployment's pod template); Selector is a
//     Deployment's spec.selector.matchLabels (nil: Labels) and a Service's spec.selector.
//   - Service ports always carry protocol (default "TCP"): Kubernetes 1.20 server-side apply
//     refuses a port without it.
//   - ConfigHash (annotation ConfigHashAnnotation) is FNV-1a 64 over CanonicalJSON.
//   - OwnerReference(req): the primary as a controller owner reference (the host adds one to
//     namespaced children itself; set it where the host does not).
// A nil map is left out, an empty one written as {}. The builders return plain JSON values
// (map[string]any, []any), so Lookup, String and the other accessors read them. Pure functions.

// ConfigHashAnnotation is the pod template annotation that carries a ConfigHash, so that a
// configuration change rolls the pods.
const ConfigHashAnnotation = "ctrlhost.dev/config-hash"

const rbacGroup = "rbac.authorization.k8s.io"

// SelectorLabels is {"app.kubernetes.io/name": app, "app.kubernetes.io/instance": instance}.
func SelectorLabels(app, instance string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": app, "app.kubernetes.io/instance": instance}
}

// CommonLabels is SelectorLabels plus "app.kubernetes.io/managed-by": "ctrlhost".
func CommonLabels(app, instance string) map[string]string {
	labels := SelectorLabels(app, instance)
	labels["app.kubernetes.io/managed-by"] = "ctrlhost"
	return labels
}

// OwnerReference is the primary as a controller owner reference: {apiVersion, kind, name, uid,
// controller: true, blockOwnerDeletion: true}.
func OwnerReference(req *Request) Object {
	return Object{"apiVersion": req.APIVersion(), "kind": req.Kind(), "name": req.Name,
		"uid": req.UID, "controller": true, "blockOwnerDeletion": true}
}

// Meta is the metadata of a built object. An empty Name or Namespace is left out (the SDK
// defaults them to the primary's); nil Labels leave the primary's labels as the default (not on
// an object of the primary's own kind: see Result.Desired).
type Meta struct {
	Name        string
	Namespace   string
	Labels      map[string]string
	Annotations map[string]string
	Owner       Object // nil: no ownerReferences (see OwnerReference)
}

func stringsMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (m Meta) object(apiVersion, kind string) Object {
	meta := map[string]any{}
	if m.Name != "" {
		meta["name"] = m.Name
	}
	if m.Namespace != "" {
		meta["namespace"] = m.Namespace
	}
	if m.Labels != nil {
		meta["labels"] = stringsMap(m.Labels)
	}
	if m.Annotations != nil {
		meta["annotations"] = stringsMap(m.Annotations)
	}
	if m.Owner != nil {
		meta["ownerReferences"] = []any{DeepCopy(m.Owner)}
	}
	return Object{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
}

func objects(list []Object) []any {
	out := make([]any, len(list))
	for i, o := range list {
		out[i] = DeepCopy(o)
	}
	return out
}

// Deployment is the input of BuildDeployment.
type Deployment struct {
	Name           string
	Labels         map[string]string // metadata.labels and the pod template's labels
	Selector       map[string]string // spec.selector.matchLabels (nil: Labels)
	Replicas       *int32            // nil: 1
	Containers     []Object
	PodAnnotations map[string]string // e.g. {ConfigHashAnnotation: hash}
	PodSpec        Object            // extra pod spec fields (serviceAccountName, volumes, ...)
	Annotations    map[string]string
	Owner          Object
}

// BuildDeployment is an apps/v1 Deployment.
func BuildDeployment(o Deployment) Object {
	d := Meta{Name: o.Name, Labels: o.Labels, Annotations: o.Annotations, Owner: o.Owner}.
		object("apps/v1", "Deployment")
	podMeta := map[string]any{}
	if o.Labels != nil {
		podMeta["labels"] = stringsMap(o.Labels)
	}
	if o.PodAnnotations != nil {
		podMeta["annotations"] = stringsMap(o.PodAnnotations)
	}
	podSpec := map[string]any{}
	for k, v := range o.PodSpec {
		podSpec[k] = DeepCopy(v)
	}
	podSpec["containers"] = objects(o.Containers)
	selector := o.Selector
	if selector == nil {
		selector = o.Labels
	}
	replicas := int64(1)
	if o.Replicas != nil {
		replicas = int64(*o.Replicas)
	}
	d["spec"] = map[string]any{
		"replicas": replicas,
		"selector": map[string]any{"matchLabels": stringsMap(selector)},
		"template": map[string]any{"metadata": podMeta, "spec": podSpec},
	}
	return d
}

// Replicas is a replica count for Deployment.Replicas.
func Replicas(n int32) *int32 { return &n }

// ServicePort is one port of a Service.
type ServicePort struct {
	Name       string
	Port       int32
	TargetPort any    // an int or a named port; nil: left out
	Protocol   string // "": TCP
}

// Service is the input of BuildService.
type Service struct {
	Name        string
	Labels      map[string]string
	Selector    map[string]string // spec.selector (nil: left out)
	Ports       []ServicePort
	Type        string // "": left out (ClusterIP)
	Annotations map[string]string
	Owner       Object
}

// BuildService is a v1 Service.
func BuildService(o Service) Object {
	s := Meta{Name: o.Name, Labels: o.Labels, Annotations: o.Annotations, Owner: o.Owner}.
		object("v1", "Service")
	ports := make([]any, 0, len(o.Ports))
	for _, p := range o.Ports {
		protocol := p.Protocol
		if protocol == "" {
			protocol = "TCP"
		}
		port := map[string]any{"port": int64(p.Port), "protocol": protocol}
		if p.Name != "" {
			port["name"] = p.Name
		}
		if p.TargetPort != nil {
			port["targetPort"] = p.TargetPort
		}
		ports = append(ports, port)
	}
	spec := map[string]any{"ports": ports}
	if o.Selector != nil {
		spec["selector"] = stringsMap(o.Selector)
	}
	if o.Type != "" {
		spec["type"] = o.Type
	}
	s["spec"] = spec
	return s
}

// BuildConfigMap is a v1 ConfigMap (data nil: left out).
func BuildConfigMap(meta Meta, data map[string]string) Object {
	cm := meta.object("v1", "ConfigMap")
	if data != nil {
		cm["data"] = stringsMap(data)
	}
	return cm
}

// BuildSecret is a v1 Secret with plain-text stringData (nil: left out; the API server encodes
// it) and a type ("": left out, Opaque).
func BuildSecret(meta Meta, stringData map[string]string, typ string) Object {
	s := meta.object("v1", "Secret")
	if stringData != nil {
		s["stringData"] = stringsMap(stringData)
	}
	if typ != "" {
		s["type"] = typ
	}
	return s
}

// BuildServiceAccount is a v1 ServiceAccount.
func BuildServiceAccount(meta Meta) Object { return meta.object("v1", "ServiceAccount") }

// PolicyRule is {"apiGroups", "resources", "verbs"} of a Role or ClusterRole.
func PolicyRule(apiGroups, resources, verbs []string) Object {
	return Object{"apiGroups": stringList(apiGroups), "resources": stringList(resources),
		"verbs": stringList(verbs)}
}

func stringList(list []string) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}

// ServiceAccountSubject is a ServiceAccount subject of a (Cluster)RoleBinding.
func ServiceAccountSubject(name, namespace string) Object {
	return Object{"kind": "ServiceAccount", "name": name, "namespace": namespace}
}

// BuildRole is a namespaced rbac.authorization.k8s.io/v1 Role.
func BuildRole(meta Meta, rules []Object) Object {
	r := meta.object(rbacGroup+"/v1", "Role")
	r["rules"] = objects(rules)
	return r
}

// BuildClusterRole is a ClusterRole (meta.Namespace is ignored: cluster-scoped).
func BuildClusterRole(meta Meta, rules []Object) Object {
	meta.Namespace = ""
	r := meta.object(rbacGroup+"/v1", "ClusterRole")
	r["rules"] = objects(rules)
	return r
}

func binding(meta Meta, kind, roleKind, role string, subjects []Object) Object {
	b := meta.object(rbacGroup+"/v1", kind)
	b["roleRef"] = map[string]any{"apiGroup": rbacGroup, "kind": roleKind, "name": role}
	b["subjects"] = objects(subjects)
	return b
}

// BuildRoleBinding binds the Role named role to subjects.
func BuildRoleBinding(meta Meta, role string, subjects []Object) Object {
	return binding(meta, "RoleBinding", "Role", role, subjects)
}

// BuildClusterRoleBinding binds the ClusterRole named clusterRole to subjects (meta.Namespace is
// ignored: cluster-scoped).
func BuildClusterRoleBinding(meta Meta, clusterRole string, subjects []Object) Object {
	meta.Namespace = ""
	return binding(meta, "ClusterRoleBinding", "ClusterRole", clusterRole, subjects)
}

// ConfigHash is FNV-1a 64 (offset basis 1469598103934665603, prime 1099511628211) over the
// CanonicalJSON of value, as 16 lowercase hex digits: the same in every SDK.
func ConfigHash(value any) (string, error) {
	text, err := CanonicalJSON(value)
	if err != nil {
		return "", err
	}
	h := uint64(1469598103934665603)
	for i := 0; i < len(text); i++ {
		h ^= uint64(text[i])
		h *= 1099511628211
	}
	return fmt.Sprintf("%016x", h), nil
}

// CanonicalJSON is the text ConfigHash hashes: no spaces, object keys sorted by their UTF-8
// bytes, strings with JSON's short escapes and \u00XX for other control characters, non-ASCII
// kept (invalid UTF-8 becomes U+FFFD). Numbers must be integers (a float with an integral value
// within +-2^53 counts as one); any other number is an error, so that every language writes the
// same text. Values other than plain JSON (structs, map[string]string) go through
// encoding/json first.
func CanonicalJSON(value any) (string, error) {
	var b strings.Builder
	if err := writeCanonical(&b, value, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

const maxExactInteger = 1 << 53

func writeCanonical(b *strings.Builder, value any, depth int) error {
	if depth > 64 {
		return fmt.Errorf("config nested deeper than 64 levels")
	}
	switch v := value.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		writeCanonicalString(b, v)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonicalString(b, k)
			b.WriteByte(':')
			if err := writeCanonical(b, v[k], depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		r, ok := number(v)
		if !ok {
			n, err := normalizeJSON(v)
			if err != nil {
				return fmt.Errorf("config hash: %T is not JSON: %v", v, err)
			}
			if _, isNumber := n.(json.Number); !isNumber {
				return writeCanonical(b, n, depth)
			}
			if r, ok = number(n); !ok {
				return fmt.Errorf("config hash: %v is not a number", n)
			}
		}
		text, err := integerText(v, r)
		if err != nil {
			return err
		}
		b.WriteString(text)
	}
	return nil
}

// integerText is the integer a number stands for. Integers written as such (Go integers, a
// json.Number without fraction or exponent) are exact at any size; a float (or a json.Number
// such as 2.0 or 1e3) counts when it is integral and within +-2^53.
func integerText(v any, r *big.Rat) (string, error) {
	exact := false
	switch n := v.(type) {
	case json.Number:
		exact = !strings.ContainsAny(string(n), ".eE")
	case float32, float64:
	default:
		exact = true
	}
	if !r.IsInt() {
		return "", notInteger(v)
	}
	if !exact {
		f, _ := r.Float64()
		if math.IsInf(f, 0) || math.Abs(f) > maxExactInteger {
			return "", notInteger(v)
		}
	}
	return r.Num().String(), nil
}

func notInteger(v any) error {
	return fmt.Errorf("config hash: %v is not an integer (only integers hash the same in every language)", v)
}

func writeCanonicalString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s { // invalid UTF-8 arrives as U+FFFD
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[r>>4])
				b.WriteByte(hex[r&0xf])
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
