package ctrlhost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
)

// Object is a Kubernetes object as parsed JSON. Numbers are json.Number (so integers keep their
// exact value); use the accessors (String, Int, Map, Lookup) rather than type assertions.
type Object = map[string]any

// RawObject is a child or related object of a request: its apiVersion and kind (from the
// envelope the host sent) and its JSON.
type RawObject struct {
	APIVersion string
	Kind       string
	Object     Object
}

// Name is metadata.name ("" when absent).
func (o RawObject) Name() string { s, _ := String(o.Object, "metadata.name"); return s }

// Namespace is metadata.namespace ("" when absent or cluster-scoped).
func (o RawObject) Namespace() string { s, _ := String(o.Object, "metadata.namespace"); return s }

// Request is one reconcile as the plugin sees it. It is immutable: a ReconcileFunc may read it
// from several goroutines.
type Request struct {
	Controller string
	Namespace  string
	Name       string
	UID        string
	// Reason is a hint of what triggered the request; reconcile must not depend on it.
	Reason     pb.Reason
	Attempt    uint32
	TraceID    string
	Finalizing bool
	// Deadline is zero when the host set none. ctx carries the sooner of it and the request's
	// relative timeout counted from its arrival (robust to clock skew).
	Deadline time.Time
	// Object is the primary, nil for the deletion notice of a primary that is already gone.
	Object   Object
	Children []RawObject
	Related  []RawObject
}

// ParseCall reads a ReconcileCall; an error names the malformed object (the SDK answers it with
// a retryable error before any controller code runs).
func ParseCall(call *pb.ReconcileCall) (*Request, error) {
	req := &Request{
		Controller: call.GetController(),
		Namespace:  call.GetNamespace(),
		Name:       call.GetName(),
		UID:        call.GetUid(),
		Reason:     call.GetReason(),
		Attempt:    call.GetAttempt(),
		TraceID:    call.GetTraceId(),
		Finalizing: call.GetFinalizing(),
	}
	if d := call.GetDeadline(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, fmt.Errorf("the deadline is invalid: %v", err)
		}
		req.Deadline = d.AsTime()
	}
	if len(call.GetObject()) > 0 {
		obj, err := ParseObject(call.GetObject())
		if err != nil {
			return nil, fmt.Errorf("the primary object %v", err)
		}
		req.Object = obj
	}
	var err error
	if req.Children, err = parseRaw(call.GetChildren(), "child"); err != nil {
		return nil, err
	}
	if req.Related, err = parseRaw(call.GetRelatedObjects(), "related object"); err != nil {
		return nil, err
	}
	return req, nil
}

func parseRaw(raws []*pb.RawObject, what string) ([]RawObject, error) {
	out := make([]RawObject, 0, len(raws))
	for _, r := range raws {
		obj, err := ParseObject(r.GetObject())
		if err != nil {
			return nil, fmt.Errorf("%s %s %v", what, r.GetKind(), err)
		}
		out = append(out, RawObject{APIVersion: r.GetApiVersion(), Kind: r.GetKind(), Object: obj})
	}
	return out, nil
}

// ParseObject parses one JSON object (numbers as json.Number), with the result and errors of
// encoding/json (jsonfast.go decodes plain documents in one pass and leaves the rest to it).
// The nesting depth is bounded as in encoding/json; the size by the gRPC message limit.
func ParseObject(data []byte) (Object, error) {
	if obj, ok := fastParseObject(data); ok {
		return obj, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("is not valid JSON: data after the object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("is not a JSON object")
	}
	return obj, nil
}

// Exists is false for the deletion notice of a primary that is already gone.
func (r *Request) Exists() bool { return r.Object != nil }

// Deleting is true when the primary has a deletionTimestamp.
func (r *Request) Deleting() bool { return Lookup(r.Object, "metadata.deletionTimestamp") != nil }

// ReasonName is "PrimaryChanged", "Resync", ...; "Unspecified" for values unknown here.
func (r *Request) ReasonName() string {
	name := pb.Reason_name[int32(r.Reason)]
	if name == "" || r.Reason == pb.Reason_REASON_UNSPECIFIED {
		return "Unspecified"
	}
	var b strings.Builder
	for _, word := range strings.Split(strings.TrimPrefix(name, "REASON_"), "_") {
		b.WriteString(word[:1] + strings.ToLower(word[1:]))
	}
	return b.String()
}

// Spec, Status and Metadata are the primary's maps (empty when absent or mistyped).
func (r *Request) Spec() map[string]any     { return Map(r.Object, "spec") }
func (r *Request) Status() map[string]any   { return Map(r.Object, "status") }
func (r *Request) Metadata() map[string]any { return Map(r.Object, "metadata") }

// APIVersion and Kind of the primary ("" when it is gone).
func (r *Request) APIVersion() string { s, _ := String(r.Object, "apiVersion"); return s }
func (r *Request) Kind() string       { s, _ := String(r.Object, "kind"); return s }

// Generation is metadata.generation (0 when absent).
func (r *Request) Generation() int64 { g, _ := Int(r.Object, "metadata.generation"); return g }

// ResourceVersion is metadata.resourceVersion.
func (r *Request) ResourceVersion() string {
	s, _ := String(r.Object, "metadata.resourceVersion")
	return s
}

// Labels and Annotations are the string-valued entries of the primary's maps.
func (r *Request) Labels() map[string]string      { return StringMap(r.Object, "metadata.labels") }
func (r *Request) Annotations() map[string]string { return StringMap(r.Object, "metadata.annotations") }

// Child is the child of that kind and name, or nil.
func (r *Request) Child(kind, name string) Object {
	for _, c := range r.Children {
		if c.Kind == kind && c.Name() == name {
			return c.Object
		}
	}
	return nil
}

// ChildrenOfKind lists the children of a kind (any apiVersion when apiVersion is "").
func (r *Request) ChildrenOfKind(kind, apiVersion string) []RawObject {
	return ofKind(r.Children, kind, apiVersion)
}

// RelatedOfKind lists the related objects of a kind (any apiVersion when apiVersion is "").
func (r *Request) RelatedOfKind(kind, apiVersion string) []RawObject {
	return ofKind(r.Related, kind, apiVersion)
}

// RelatedObject is the related object of that kind and name (in namespace, unless it is ""), or
// nil.
func (r *Request) RelatedObject(kind, name, namespace string) Object {
	for _, o := range r.Related {
		if o.Kind == kind && o.Name() == name && (namespace == "" || o.Namespace() == namespace) {
			return o.Object
		}
	}
	return nil
}

func ofKind(objs []RawObject, kind, apiVersion string) []RawObject {
	var out []RawObject
	for _, o := range objs {
		if o.Kind == kind && (apiVersion == "" || o.APIVersion == apiVersion) {
			out = append(out, o)
		}
	}
	return out
}

// Lookup is the value at a dot-separated path ("status.readyReplicas"), or nil.
func Lookup(obj map[string]any, path string) any {
	var cur any = obj
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[part]; !ok {
			return nil
		}
	}
	return cur
}

// String is the string at path; ok is false when it is absent or not a string.
func String(obj map[string]any, path string) (value string, ok bool) {
	value, ok = Lookup(obj, path).(string)
	return value, ok
}

// Int is the integer at path; ok is false when it is absent or not an integer (2.5, "2").
func Int(obj map[string]any, path string) (value int64, ok bool) {
	switch v := Lookup(obj, path).(type) {
	case json.Number:
		i, err := v.Int64()
		return i, err == nil
	case int:
		return int64(v), true
	case int64:
		return v, true
	case int32:
		return int64(v), true
	case float64:
		if v == float64(int64(v)) {
			return int64(v), true
		}
	}
	return 0, false
}

// Bool is the boolean at path.
func Bool(obj map[string]any, path string) (value bool, ok bool) {
	value, ok = Lookup(obj, path).(bool)
	return value, ok
}

// Map is the object at path, or an empty map (never nil) when absent or not an object.
func Map(obj map[string]any, path string) map[string]any {
	if m, ok := Lookup(obj, path).(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

// StringMap is the string-valued entries of the object at path (labels, annotations).
func StringMap(obj map[string]any, path string) map[string]string {
	out := map[string]string{}
	for k, v := range Map(obj, path) {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}
