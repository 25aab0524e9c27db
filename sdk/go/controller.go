package ctrlhost

import (
	"context"
	"fmt"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ReconcileFunc answers one reconcile. ctx is cancelled when the host cancels the request, its
// deadline passes or a drain gives up. A returned error is answered as a retryable error (with
// backoff) unless wrapped by Terminal; the returned Result is then ignored. (nil, nil) means
// "nothing to do".
type ReconcileFunc func(ctx context.Context, req *Request) (*Result, error)

// CapabilitySet is a set of protocol capabilities.
type CapabilitySet map[pb.Capability]bool

// Has reports whether c is in the set.
func (s CapabilitySet) Has(c pb.Capability) bool { return s[c] }

// AllCapabilities is every capability this SDK supports.
func AllCapabilities() CapabilitySet {
	s := CapabilitySet{}
	for v := range pb.Capability_name {
		if c := pb.Capability(v); c != pb.Capability_CAPABILITY_UNSPECIFIED {
			s[c] = true
		}
	}
	return s
}

// Sorted lists the set in wire order.
func (s CapabilitySet) Sorted() []pb.Capability {
	out := make([]pb.Capability, 0, len(s))
	for c, ok := range s {
		if ok {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Controller declares one controller: what it reconciles, owns and watches, and its function.
// The builder methods return the controller. Declare before serving; afterwards a Controller is
// only read, and Invoke may run concurrently.
type Controller struct {
	spec     *pb.ControllerSpec
	fn       ReconcileFunc
	children *bool // nil: children are sent when the controller owns kinds
	tasks    []declaredTask
	errs     []error
}

// NewController starts the declaration of a controller (name: a lowercase RFC 1123 label).
func NewController(name string) *Controller {
	return &Controller{spec: &pb.ControllerSpec{Name: name, RequestContents: &pb.RequestContents{}}}
}

// Name is the controller's name.
func (c *Controller) Name() string { return c.spec.GetName() }

func gvk(group, version, kind string) *pb.GroupVersionKind {
	return &pb.GroupVersionKind{Group: group, Version: version, Kind: kind}
}

// For sets the primary kind.
func (c *Controller) For(group, version, kind string) *Controller {
	c.spec.Primary = gvk(group, version, kind)
	return c
}

// OwnsOption refines Owns.
type OwnsOption func(*pb.OwnedKind)

// ClusterScoped declares an owned kind that is cluster-scoped.
func ClusterScoped() OwnsOption { return func(o *pb.OwnedKind) { o.ClusterScoped = true } }

// DeleteAbsent deletes owned objects of the kind that are absent from Result.Desired.
func DeleteAbsent() OwnsOption { return func(o *pb.OwnedKind) { o.DeleteAbsent = true } }

// Owns declares a kind of children the controller may write.
func (c *Controller) Owns(group, version, kind string, opts ...OwnsOption) *Controller {
	o := &pb.OwnedKind{Kind: gvk(group, version, kind)}
	for _, opt := range opts {
		opt(o)
	}
	c.spec.Owns = append(c.spec.Owns, o)
	return c
}

// Mapping says which primaries a watched object enqueues (give exactly one to Watches).
type Mapping func(*pb.WatchedKind)

// ByOwnerReference maps an object to the primaries in its owner references (controllerOnly:
// only the controller reference).
func ByOwnerReference(controllerOnly bool) Mapping {
	return func(w *pb.WatchedKind) {
		w.Mapping = &pb.WatchedKind_OwnerReference{OwnerReference: &pb.OwnerReferenceMapping{ControllerOnly: controllerOnly}}
	}
}

// ByNameLabel maps an object to the primary named by its label (same namespace).
func ByNameLabel(label string) Mapping {
	return func(w *pb.WatchedKind) {
		w.Mapping = &pb.WatchedKind_Label{Label: &pb.LabelMapping{Source: &pb.LabelMapping_NameLabel{NameLabel: label}}}
	}
}

// ByPrimarySelector maps an object to the primaries whose label selector at path selects it.
func ByPrimarySelector(path string) Mapping {
	return func(w *pb.WatchedKind) {
		w.Mapping = &pb.WatchedKind_Label{Label: &pb.LabelMapping{Source: &pb.LabelMapping_PrimarySelectorPath{PrimarySelectorPath: path}}}
	}
}

// ByFieldPath maps an object to the primaries whose field at path names it.
func ByFieldPath(path string) Mapping {
	return func(w *pb.WatchedKind) {
		w.Mapping = &pb.WatchedKind_FieldPath{FieldPath: &pb.FieldPathMapping{PrimaryFieldPath: path}}
	}
}

// EnqueueAll maps any change to every primary (sameNamespaceOnly: those in its namespace).
func EnqueueAll(sameNamespaceOnly bool) Mapping {
	return func(w *pb.WatchedKind) {
		w.Mapping = &pb.WatchedKind_EnqueueAll{EnqueueAll: &pb.EnqueueAllMapping{SameNamespaceOnly: sameNamespaceOnly}}
	}
}

// WatchOptions refine Watches.
type WatchOptions struct {
	LabelSelector string
	// IncludeInRequests sends the matching objects as Request.Related (turns related objects
	// on in RequestContents).
	IncludeInRequests bool
}

// Watches declares an extra watched kind and how its objects map to primaries.
func (c *Controller) Watches(group, version, kind string, mapping Mapping, opts WatchOptions) *Controller {
	w := &pb.WatchedKind{Kind: gvk(group, version, kind), LabelSelector: opts.LabelSelector,
		IncludeInRequests: opts.IncludeInRequests}
	if mapping == nil {
		c.errs = append(c.errs, fmt.Errorf("Watches(%s): a mapping is required", kind))
	} else {
		mapping(w)
	}
	c.spec.Watches = append(c.spec.Watches, w)
	if opts.IncludeInRequests {
		c.spec.RequestContents.RelatedObjects = true
	}
	return c
}

// Finalizer sets the controller's finalizer (a qualified name, "example.com/cleanup").
func (c *Controller) Finalizer(name string) *Controller { c.spec.Finalizer = name; return c }

// MaxConcurrent bounds the reconciles in flight for this controller (the host enforces it).
func (c *Controller) MaxConcurrent(n uint32) *Controller {
	c.spec.MaxConcurrentReconciles = n
	return c
}

// Resync reconciles every primary again after period.
func (c *Controller) Resync(period time.Duration) *Controller {
	c.spec.ResyncPeriod = durationpb.New(period)
	return c
}

// Schedule reconciles every primary on a cron schedule (timeZone: IANA name, "" for UTC).
func (c *Controller) Schedule(cron, timeZone string) *Controller {
	c.spec.Schedules = append(c.spec.Schedules, &pb.Schedule{Cron: cron, TimeZone: timeZone})
	return c
}

// Namespaces restricts the controller to these namespaces.
func (c *Controller) Namespaces(names ...string) *Controller {
	c.spec.Namespaces = append(c.spec.Namespaces, names...)
	return c
}

// LabelSelector restricts the primaries to those it selects.
func (c *Controller) LabelSelector(selector string) *Controller {
	c.spec.LabelSelector = selector
	return c
}

// Predicates sets which changes enqueue a reconcile.
func (c *Controller) Predicates(primaryStatusChanges, ignoreChildStatusChanges bool) *Controller {
	c.spec.Predicates = &pb.Predicates{PrimaryStatusChanges: primaryStatusChanges,
		IgnoreChildStatusChanges: ignoreChildStatusChanges}
	return c
}

// RequestContents says what requests carry. Children (nil: on when the controller owns kinds),
// related objects, kinds sent as metadata only, fields stripped ("metadata.managedFields").
type RequestContents struct {
	Children          *bool
	RelatedObjects    bool
	MetadataOnlyKinds []*pb.GroupVersionKind
	StripFields       []string
}

// RequestContents sets what requests carry.
func (c *Controller) RequestContents(rc RequestContents) *Controller {
	c.children = rc.Children
	c.spec.RequestContents.RelatedObjects = c.spec.RequestContents.RelatedObjects || rc.RelatedObjects
	c.spec.RequestContents.MetadataOnlyKinds = append(c.spec.RequestContents.MetadataOnlyKinds, rc.MetadataOnlyKinds...)
	c.spec.RequestContents.StripFields = append(c.spec.RequestContents.StripFields, rc.StripFields...)
	return c
}

// Reconcile sets the reconcile function.
func (c *Controller) Reconcile(fn ReconcileFunc) *Controller { c.fn = fn; return c }

var rfc1123Label = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Spec is the ControllerSpec sent in Describe, validated; the error names the problem.
func (c *Controller) Spec() (*pb.ControllerSpec, error) {
	if len(c.errs) > 0 {
		return nil, fmt.Errorf("controller %s: %v", c.Name(), c.errs[0])
	}
	if !rfc1123Label.MatchString(c.Name()) {
		return nil, fmt.Errorf("controller name %q is not a lowercase RFC 1123 label", c.Name())
	}
	if c.spec.GetPrimary().GetKind() == "" || c.spec.GetPrimary().GetVersion() == "" {
		return nil, fmt.Errorf("controller %s: For() is required", c.Name())
	}
	if c.fn == nil {
		return nil, fmt.Errorf("controller %s: no reconcile function", c.Name())
	}
	if f := c.spec.GetFinalizer(); f != "" && !strings.Contains(f, "/") {
		return nil, fmt.Errorf("controller %s: finalizer must be a qualified name (domain/name)", c.Name())
	}
	spec := proto.Clone(c.spec).(*pb.ControllerSpec)
	if c.children != nil {
		spec.RequestContents.Children = *c.children
	} else {
		spec.RequestContents.Children = len(spec.Owns) > 0
	}
	return spec, nil
}

// RequiredCapabilities are the capabilities the declaration needs from the host.
func (c *Controller) RequiredCapabilities() (CapabilitySet, error) {
	spec, err := c.Spec()
	if err != nil {
		return nil, err
	}
	need := CapabilitySet{}
	for _, o := range spec.Owns {
		if o.DeleteAbsent {
			need[pb.Capability_CAPABILITY_SERVER_SIDE_APPLY] = true
		}
	}
	if len(spec.Schedules) > 0 {
		need[pb.Capability_CAPABILITY_SCHEDULES] = true
	}
	rc := spec.RequestContents
	if rc.Children {
		need[pb.Capability_CAPABILITY_CHILDREN] = true
	}
	if rc.RelatedObjects {
		need[pb.Capability_CAPABILITY_RELATED_OBJECTS] = true
	}
	if len(rc.MetadataOnlyKinds) > 0 {
		need[pb.Capability_CAPABILITY_METADATA_ONLY] = true
	}
	if len(spec.BackgroundTasks) > 0 {
		need[pb.Capability_CAPABILITY_BACKGROUND_TASKS] = true
	}
	return need, nil
}

// Invoke runs the controller on one call and always returns a response: a malformed request,
// an error, a panic or an invalid result become an error answer naming the problem.
func (c *Controller) Invoke(ctx context.Context, requestID uint64, call *pb.ReconcileCall, caps CapabilitySet) *pb.ReconcileResponse {
	req, err := ParseCall(call)
	if err != nil {
		return errorResponse(requestID, false, "cannot read the request: "+err.Error())
	}
	return c.InvokeRequest(ctx, requestID, req, caps)
}

// InvokeRequest is Invoke on a parsed request.
func (c *Controller) InvokeRequest(ctx context.Context, requestID uint64, req *Request, caps CapabilitySet) (resp *pb.ReconcileResponse) {
	defer func() {
		if p := recover(); p != nil {
			// One panicking key must not take down every other key in flight.
			resp = errorResponse(requestID, false, fmt.Sprintf("reconcile panicked: %v", p))
			resp.Error.Message += panicLocation(debug.Stack())
		}
	}()
	res, err := c.fn(ctx, req)
	if err != nil {
		e := ErrorOf(err, err.Error())
		if verr := e.validate(); verr != nil {
			return errorResponse(requestID, false, "invalid reconcile result: "+verr.Error())
		}
		return &pb.ReconcileResponse{RequestId: requestID, Error: e.wire()}
	}
	if res == nil {
		res = &Result{}
	}
	resp, err = res.ToResponse(req, requestID, caps)
	if err != nil {
		return errorResponse(requestID, false, "invalid reconcile result: "+err.Error())
	}
	return resp
}

// panicLocation is " at file:line" of the frame that panicked, from a debug.Stack() taken in
// the deferred recover ("" when it cannot be found).
func panicLocation(stack []byte) string {
	lines := strings.Split(string(stack), "\n")
	for i, l := range lines {
		// The frame after runtime's panic function is the one that panicked.
		if strings.HasPrefix(l, "panic(") && i+3 < len(lines) {
			loc := strings.TrimSpace(lines[i+3])
			if j := strings.LastIndex(loc, " +0x"); j > 0 {
				loc = loc[:j]
			}
			return " at " + loc
		}
	}
	return ""
}
