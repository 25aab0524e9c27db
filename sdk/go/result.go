package ctrlhost

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ConditionStatus is the status of a condition.
type ConditionStatus string

// EventType is the type of a Kubernetes event.
type EventType string

// PatchType is the kind of a patch document.
type PatchType int

const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"

	EventNormal  EventType = "Normal"
	EventWarning EventType = "Warning"
)

const (
	// MergePatch is an RFC 7386 merge patch (a JSON object).
	MergePatch PatchType = iota
	// JSONPatch is an RFC 6902 JSON patch (an array of operations).
	JSONPatch
)

// Condition is one Kubernetes condition; the host sets lastTransitionTime and
// observedGeneration.
type Condition struct {
	Type    string
	Status  ConditionStatus
	Reason  string // CamelCase
	Message string
}

// Event is a Kubernetes event recorded against the primary.
type Event struct {
	Type    EventType
	Reason  string
	Message string
}

// Patch is the imperative escape hatch: a patch of the primary, its status or an owned object.
type Patch struct {
	Target pb.PatchTarget
	// APIVersion, Kind and Name name the owned object (Target PATCH_TARGET_OWNED only).
	APIVersion, Kind, Name string
	Type                   PatchType
	// Patch is marshalled to JSON: a map for MergePatch, a slice of operations for JSONPatch.
	Patch           any
	ResourceVersion string
}

// Result is the answer to one reconcile. A Result belongs to one reconcile; it is not shared.
// The zero value answers "nothing to do".
type Result struct {
	// Desired objects are applied with server-side apply. metadata.name defaults to the
	// primary's, metadata.namespace to the primary's, metadata.labels to the primary's labels
	// except on an object of the primary's own kind (group and kind), which with them would
	// match the controller's label selector and be reconciled as a primary too.
	Desired []Object
	// Status is a merge patch of the primary's status subresource (nil: none).
	Status     map[string]any
	Conditions []Condition
	Events     []Event
	Patches    []Patch
	// RequeueAfter > 0 asks for another reconcile after that long.
	RequeueAfter time.Duration
	// Finalized releases the controller's finalizer (finalizing requests only).
	Finalized bool
	// Err is the error answered (nil: success). Set it with SetError, or return an error from
	// the ReconcileFunc.
	Err *ResultError
}

// ResultError is an answered error: retryable (backoff and retry) or terminal (no retry until
// the object changes).
type ResultError struct {
	Terminal bool
	Message  string
	// Reason is a CamelCase machine-readable reason ("QuotaExceeded"), at most 128 characters:
	// the host's Warning event and Reconciled=False reason. Empty: the host's defaults.
	Reason string
	// RetryAfter (retryable errors only): the host retries no sooner than this. Zero: the
	// host's backoff alone. Negative, or set on a terminal error: the result is invalid.
	RetryAfter time.Duration
}

// ResponseTooLarge is the reason of the terminal error the SDK answers instead of a response
// larger than the message limit (it would not shrink on a retry).
const ResponseTooLarge = "ResponseTooLarge"

const maxErrorReason = 128

// validate checks the error as the host does.
func (e *ResultError) validate() error {
	if e.Reason != "" && (len(e.Reason) > maxErrorReason || !conditionReason.MatchString(e.Reason)) {
		return fmt.Errorf("error reason %q must be CamelCase: ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$, at most %d characters", e.Reason, maxErrorReason)
	}
	if e.RetryAfter < 0 {
		return errors.New("error RetryAfter is negative")
	}
	if e.RetryAfter > 0 && e.Terminal {
		return errors.New("error RetryAfter is only allowed on a retryable error")
	}
	return nil
}

func (e *ResultError) wire() *pb.Error {
	w := wireError(e.Terminal, e.Message)
	w.Reason = e.Reason
	if e.RetryAfter > 0 {
		w.RetryAfter = durationpb.New(e.RetryAfter)
	}
	return w
}

// reasonError and retryAfterError carry WithReason and RetryAfter through error wrapping.
type reasonError struct {
	err    error
	reason string
}

func (e reasonError) Error() string { return e.err.Error() }
func (e reasonError) Unwrap() error { return e.err }

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e retryAfterError) Error() string { return e.err.Error() }
func (e retryAfterError) Unwrap() error { return e.err }

// WithReason gives err a machine-readable CamelCase reason (ResultError.Reason), kept through
// wrapping with %w. WithReason(nil, ...) is nil.
func WithReason(err error, reason string) error {
	if err == nil {
		return nil
	}
	return reasonError{err, reason}
}

// RetryAfter asks the host to retry err no sooner than d (ResultError.RetryAfter); for
// retryable errors only. Kept through wrapping with %w. RetryAfter(nil, ...) is nil.
//
//	return nil, ctrlhost.WithReason(ctrlhost.RetryAfter(err, 30*time.Second), "QuotaExceeded")
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return retryAfterError{err, d}
}

// ErrorOf is the ResultError an error returned by a ReconcileFunc answers: terminal when marked
// by Terminal, with the reason of WithReason and the wait of RetryAfter.
func ErrorOf(err error, message string) *ResultError {
	e := &ResultError{Terminal: IsTerminal(err), Message: message}
	var r reasonError
	if errors.As(err, &r) {
		e.Reason = r.reason
	}
	var a retryAfterError
	if errors.As(err, &a) {
		e.RetryAfter = a.after
	}
	return e
}

// Desire adds a desired object and returns it for editing.
func (r *Result) Desire(obj Object) Object {
	r.Desired = append(r.Desired, obj)
	return obj
}

// MergeStatus merges patch into the status merge patch (objects recursively).
func (r *Result) MergeStatus(patch map[string]any) {
	if r.Status == nil {
		r.Status = map[string]any{}
	}
	mergeInto(r.Status, patch)
}

func mergeInto(base, patch map[string]any) {
	for k, v := range patch {
		if bm, ok := base[k].(map[string]any); ok {
			if pm, ok := v.(map[string]any); ok {
				mergeInto(bm, pm)
				continue
			}
		}
		base[k] = v
	}
}

// SetCondition sets a condition, replacing one of the same type.
func (r *Result) SetCondition(typ string, status ConditionStatus, reason, message string) {
	c := Condition{Type: typ, Status: status, Reason: reason, Message: message}
	for i := range r.Conditions {
		if r.Conditions[i].Type == typ {
			r.Conditions[i] = c
			return
		}
	}
	r.Conditions = append(r.Conditions, c)
}

// Event records an event against the primary.
func (r *Result) Event(typ EventType, reason, message string) {
	r.Events = append(r.Events, Event{Type: typ, Reason: reason, Message: message})
}

// PatchPrimary patches the primary object.
func (r *Result) PatchPrimary(typ PatchType, patch any, resourceVersion string) {
	r.Patches = append(r.Patches, Patch{Target: pb.PatchTarget_PATCH_TARGET_PRIMARY, Type: typ,
		Patch: patch, ResourceVersion: resourceVersion})
}

// PatchStatus patches the primary's status subresource.
func (r *Result) PatchStatus(typ PatchType, patch any, resourceVersion string) {
	r.Patches = append(r.Patches, Patch{Target: pb.PatchTarget_PATCH_TARGET_PRIMARY_STATUS,
		Type: typ, Patch: patch, ResourceVersion: resourceVersion})
}

// PatchOwned patches an object of an owned kind in the primary's namespace.
func (r *Result) PatchOwned(apiVersion, kind, name string, typ PatchType, patch any,
	resourceVersion string) {
	r.Patches = append(r.Patches, Patch{Target: pb.PatchTarget_PATCH_TARGET_OWNED,
		APIVersion: apiVersion, Kind: kind, Name: name, Type: typ, Patch: patch,
		ResourceVersion: resourceVersion})
}

// SetError answers an error (terminal: no retry until the object changes).
func (r *Result) SetError(terminal bool, message string) {
	r.Err = &ResultError{Terminal: terminal, Message: message}
}

// Merge adds another result's contents (the sooner requeue and the first error win; finalized
// only when both are).
func (r *Result) Merge(o *Result) {
	r.Desired = append(r.Desired, o.Desired...)
	if o.Status != nil {
		r.MergeStatus(o.Status)
	}
	for _, c := range o.Conditions {
		r.SetCondition(c.Type, c.Status, c.Reason, c.Message)
	}
	r.Events = append(r.Events, o.Events...)
	r.Patches = append(r.Patches, o.Patches...)
	if o.RequeueAfter > 0 && (r.RequeueAfter <= 0 || o.RequeueAfter < r.RequeueAfter) {
		r.RequeueAfter = o.RequeueAfter
	}
	if r.Err == nil {
		r.Err = o.Err
	}
	r.Finalized = r.Finalized && o.Finalized
}

// NewObject is {"apiVersion", "kind", "metadata": {"name"}}: the start of a desired object.
func NewObject(apiVersion, kind, name string) Object {
	meta := map[string]any{}
	if name != "" {
		meta["name"] = name
	}
	return Object{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
}

// terminalError marks an error as terminal.
type terminalError struct{ err error }

func (e terminalError) Error() string { return e.err.Error() }
func (e terminalError) Unwrap() error { return e.err }

// Terminal marks err as terminal: a retry cannot fix it (a bad spec), so the host does not
// retry until the object changes. Terminal(nil) is nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return terminalError{err}
}

// IsTerminal reports whether err (or an error it wraps) was marked by Terminal.
func IsTerminal(err error) bool {
	var t terminalError
	return errors.As(err, &t)
}

var conditionReason = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// ToResponse is the wire form of the result for req, validated as the host validates it: a gone
// primary may only get events, an error and a requeue; Finalized only for a finalizing request
// and never with an error; desired objects need apiVersion, kind and a name; JSON patches are
// arrays, merge patches objects; condition reasons CamelCase; features need the negotiated
// capability (caps). The error names the first problem.
func (r *Result) ToResponse(req *Request, requestID uint64, caps CapabilitySet) (*pb.ReconcileResponse, error) {
	if !req.Exists() && (len(r.Desired) > 0 || r.Status != nil || len(r.Conditions) > 0 ||
		len(r.Patches) > 0 || r.Finalized) {
		return nil, errors.New("the primary is gone: only events, an error and a requeue may be answered")
	}
	if r.Finalized && !req.Finalizing {
		return nil, errors.New("finalized answered to a request that is not finalizing")
	}
	if r.Finalized && r.Err != nil {
		return nil, errors.New("finalized together with an error")
	}
	if r.Err != nil {
		if err := r.Err.validate(); err != nil {
			return nil, err
		}
	}
	if r.RequeueAfter < 0 {
		return nil, errors.New("RequeueAfter is negative")
	}
	resp := &pb.ReconcileResponse{RequestId: requestID, Finalized: r.Finalized}
	if len(r.Desired) > 0 && !caps.Has(pb.Capability_CAPABILITY_SERVER_SIDE_APPLY) {
		return nil, errors.New("a desired object needs CAPABILITY_SERVER_SIDE_APPLY, which the host did not offer")
	}
	var labels map[string]string // copied to desired objects; read only when there are some
	if len(r.Desired) > 0 {
		labels = req.Labels()
	}
	for i, desired := range r.Desired {
		data, err := desiredJSON(req, desired, labels)
		if err != nil {
			return nil, fmt.Errorf("desired object %d %v", i, err)
		}
		resp.DesiredObjects = append(resp.DesiredObjects, data)
	}
	for _, p := range r.Patches {
		wire, err := patchToWire(p)
		if err != nil {
			return nil, err
		}
		resp.Patches = append(resp.Patches, wire)
	}
	if len(r.Status) > 0 {
		data, err := marshalJSON(r.Status)
		if err != nil {
			return nil, fmt.Errorf("status cannot be written as JSON: %v", err)
		}
		resp.Status = data
	}
	if len(r.Conditions) > 0 && !caps.Has(pb.Capability_CAPABILITY_CONDITIONS) {
		return nil, errors.New("a condition needs CAPABILITY_CONDITIONS, which the host did not offer")
	}
	for _, c := range r.Conditions {
		wire, err := conditionToWire(c)
		if err != nil {
			return nil, err
		}
		resp.Conditions = append(resp.Conditions, wire)
	}
	for _, e := range r.Events {
		var typ pb.EventType
		switch e.Type {
		case EventNormal:
			typ = pb.EventType_EVENT_TYPE_NORMAL
		case EventWarning:
			typ = pb.EventType_EVENT_TYPE_WARNING
		default:
			return nil, fmt.Errorf("event type must be Normal or Warning, not %q", e.Type)
		}
		if e.Reason == "" {
			return nil, errors.New("an event without reason")
		}
		resp.Events = append(resp.Events, &pb.Event{Type: typ, Reason: e.Reason, Message: e.Message})
	}
	if r.RequeueAfter > 0 {
		resp.RequeueAfter = durationpb.New(r.RequeueAfter)
	}
	if r.Err != nil {
		resp.Error = r.Err.wire()
	}
	return resp, nil
}

func desiredJSON(req *Request, desired Object, labels map[string]string) ([]byte, error) {
	if desired == nil {
		return nil, errors.New("is nil")
	}
	apiVersion, _ := desired["apiVersion"].(string)
	kind, _ := desired["kind"].(string)
	if apiVersion == "" || kind == "" {
		return nil, errors.New("needs apiVersion and kind")
	}
	obj := make(Object, len(desired))
	for k, v := range desired {
		obj[k] = v
	}
	meta := map[string]any{}
	switch m := desired["metadata"].(type) {
	case nil:
	case map[string]any:
		for k, v := range m {
			meta[k] = v
		}
	default:
		return nil, errors.New("has metadata that is not an object")
	}
	obj["metadata"] = meta
	if _, ok := meta["name"]; !ok {
		meta["name"] = req.Name
	}
	if name, _ := meta["name"].(string); name == "" {
		return nil, errors.New("has no name")
	}
	if _, ok := meta["namespace"]; !ok && req.Namespace != "" {
		meta["namespace"] = req.Namespace
	}
	// The primary's labels by default, except on objects of the primary's own kind (group and
	// kind): a child with them would match the label selector that selected the primary and be
	// reconciled as a primary itself. The same in every SDK.
	ofPrimaryKind := kind == req.Kind() && groupOf(apiVersion) == groupOf(req.APIVersion())
	if _, ok := meta["labels"]; !ok && !ofPrimaryKind && len(labels) > 0 {
		copied := make(map[string]any, len(labels))
		for k, v := range labels {
			copied[k] = v
		}
		meta["labels"] = copied
	}
	data, err := marshalJSON(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot be written as JSON: %v", err)
	}
	return data, nil
}

func patchToWire(p Patch) (*pb.Patch, error) {
	wire := &pb.Patch{Target: p.Target, ApiVersion: p.APIVersion, Kind: p.Kind, Name: p.Name,
		ResourceVersion: p.ResourceVersion}
	switch p.Target {
	case pb.PatchTarget_PATCH_TARGET_PRIMARY, pb.PatchTarget_PATCH_TARGET_PRIMARY_STATUS:
	case pb.PatchTarget_PATCH_TARGET_OWNED:
		if p.APIVersion == "" || p.Kind == "" || p.Name == "" {
			return nil, errors.New("a patch of an owned object needs apiVersion, kind, name")
		}
	default:
		return nil, fmt.Errorf("patch target %v is not one of primary, status, owned", p.Target)
	}
	data, err := marshalJSON(p.Patch)
	if err != nil {
		return nil, fmt.Errorf("a patch cannot be written as JSON: %v", err)
	}
	switch p.Type {
	case JSONPatch:
		if len(data) == 0 || data[0] != '[' {
			return nil, errors.New("a JSON patch must be an array of operations")
		}
		wire.Type = pb.PatchType_PATCH_TYPE_JSON_PATCH
	case MergePatch:
		if len(data) == 0 || data[0] != '{' {
			return nil, errors.New("a merge patch must be a JSON object")
		}
		wire.Type = pb.PatchType_PATCH_TYPE_MERGE_PATCH
	default:
		return nil, fmt.Errorf("patch type %d is neither MergePatch nor JSONPatch", p.Type)
	}
	wire.Patch = data
	return wire, nil
}

func conditionToWire(c Condition) (*pb.Condition, error) {
	if c.Type == "" {
		return nil, errors.New("a condition without type")
	}
	var status pb.ConditionStatus
	switch c.Status {
	case ConditionTrue:
		status = pb.ConditionStatus_CONDITION_STATUS_TRUE
	case ConditionFalse:
		status = pb.ConditionStatus_CONDITION_STATUS_FALSE
	case ConditionUnknown:
		status = pb.ConditionStatus_CONDITION_STATUS_UNKNOWN
	default:
		return nil, fmt.Errorf("condition %s: status must be True, False or Unknown, not %q", c.Type, c.Status)
	}
	if len(c.Reason) > 1024 || !conditionReason.MatchString(c.Reason) {
		return nil, fmt.Errorf("condition %s: reason %q is not CamelCase ([A-Za-z0-9_,:])", c.Type, c.Reason)
	}
	return &pb.Condition{Type: c.Type, Status: status, Reason: c.Reason, Message: c.Message}, nil
}

func wireError(terminal bool, message string) *pb.Error {
	kind := pb.ErrorKind_ERROR_KIND_RETRYABLE
	if terminal {
		kind = pb.ErrorKind_ERROR_KIND_TERMINAL
	}
	return &pb.Error{Message: message, Kind: kind}
}

// errorResponse is a response carrying only an error.
func errorResponse(requestID uint64, terminal bool, message string) *pb.ReconcileResponse {
	return &pb.ReconcileResponse{RequestId: requestID, Error: wireError(terminal, message)}
}

// groupOf is the API group of an apiVersion ("" for "v1").
func groupOf(apiVersion string) string {
	if i := strings.IndexByte(apiVersion, '/'); i >= 0 {
		return apiVersion[:i]
	}
	return ""
}
