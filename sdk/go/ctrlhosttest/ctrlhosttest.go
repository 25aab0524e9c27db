// Package ctrlhosttest runs ctrlhost controllers in tests: in process on fixture objects
// (Reconcile) or on the reconciles a host recorded (Replay, replay.go), or served on a temporary
// Unix socket with a client acting as the host (Serve).
//
//	out := ctrlhosttest.Reconcile(t, controller, webapp, ctrlhosttest.Children(deployment))
//	if out.Error != nil { t.Fatal(out.Error) }
//	svc := out.DesiredOfKind("Service")[0]
//
// Reconcile goes through the production path (the request serialized to a ReconcileCall, parsed,
// the controller invoked with panic recovery, the result validated), so validation and error
// handling are exercised too. It also judges the reconcile as the live host would
// (host_judgement.go): a request the host would never send (the primary outside the controller's
// label selector or namespaces, a child of a kind it does not own or controlled by another object)
// is an error, and an answer the host would refuse (a desired object of a kind the controller does
// not own, status on a ConfigMap, an Existing object the primary does not control, ...) is
// Outcome.Refused, which fails a test run by Reconcile. Children given without ownerReferences get
// the controller reference to the primary, as the host's always carry it. The C++, Python and Node
// harnesses judge alike: the cases all of them pass are sdk/testdata/host_judgement_cases.json.
package ctrlhosttest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
	"google.golang.org/grpc"
)

// Option refines a fixture request.
type Option func(*options)

type options struct {
	call     *pb.ReconcileCall
	children []ctrlhost.Object
	existing []ctrlhost.Object
	caps     ctrlhost.CapabilitySet
	ctx      context.Context
}

// Children adds owned children to the request. A child without ownerReferences gets the
// controller reference to the primary (the host passes only children the primary controls); one
// with ownerReferences is passed as written, and Reconcile / Run refuse it when its controller
// is not the primary (use Existing for such an object).
func Children(objs ...ctrlhost.Object) Option {
	return func(o *options) { o.children = append(o.children, objs...) }
}

// Existing declares objects that exist in the cluster but are not the primary's children (no
// controller, or another one). They are not in the request; an answer that desires one of them
// is Refused as the host refuses it (NotControlled).
func Existing(objs ...ctrlhost.Object) Option {
	return func(o *options) { o.existing = append(o.existing, objs...) }
}

// Related adds related objects to the request.
func Related(objs ...ctrlhost.Object) Option {
	return func(o *options) { o.call.RelatedObjects = append(o.call.RelatedObjects, raw(objs)...) }
}

// Finalizing marks the request as finalizing (deletion requested, our finalizer present).
func Finalizing() Option { return func(o *options) { o.call.Finalizing = true } }

// WithReason sets the request's reason hint.
func WithReason(r pb.Reason) Option { return func(o *options) { o.call.Reason = r } }

// WithCapabilities sets the negotiated capabilities (default: all).
func WithCapabilities(caps ctrlhost.CapabilitySet) Option {
	return func(o *options) { o.caps = caps }
}

// WithContext sets the reconcile's context (default: background).
func WithContext(ctx context.Context) Option { return func(o *options) { o.ctx = ctx } }

func raw(objs []ctrlhost.Object) []*pb.RawObject {
	out := make([]*pb.RawObject, 0, len(objs))
	for _, obj := range objs {
		data, err := json.Marshal(obj)
		if err != nil {
			panic(err)
		}
		av, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		out = append(out, &pb.RawObject{ApiVersion: av, Kind: kind, Object: data})
	}
	return out
}

// Call is the ReconcileCall the host would send for obj (nil: the primary is gone). Children are
// passed as given (Run adds owner references, knowing the controller).
func Call(controller string, obj ctrlhost.Object, opts ...Option) *pb.ReconcileCall {
	o := buildOptions(controller, obj, opts, nil)
	return o.call
}

// buildOptions: with spec, children without ownerReferences get the primary as controller.
func buildOptions(controller string, obj ctrlhost.Object, opts []Option, spec *pb.ControllerSpec) *options {
	call := &pb.ReconcileCall{Controller: controller, Reason: pb.Reason_REASON_PRIMARY_CHANGED, Attempt: 1}
	if obj != nil {
		call.Namespace, _ = ctrlhost.String(obj, "metadata.namespace")
		call.Name, _ = ctrlhost.String(obj, "metadata.name")
		call.Uid, _ = ctrlhost.String(obj, "metadata.uid")
		data, err := json.Marshal(obj)
		if err != nil {
			panic(err)
		}
		call.Object = data
	}
	o := &options{call: call, caps: ctrlhost.AllCapabilities(), ctx: context.Background()}
	for _, opt := range opts {
		opt(o)
	}
	children := o.children
	if spec != nil {
		children = make([]ctrlhost.Object, len(o.children))
		for i, c := range o.children {
			children[i] = withOwnerReference(c, spec, call)
		}
	}
	call.Children = append(call.Children, raw(children)...)
	return o
}

// Outcome is a ReconcileResponse decoded into Go values.
type Outcome struct {
	Response *pb.ReconcileResponse
	Desired  []ctrlhost.Object
	Status   ctrlhost.Object
	// Conditions by type.
	Conditions   map[string]ctrlhost.Condition
	Events       []ctrlhost.Event
	RequeueAfter time.Duration
	Finalized    bool
	// Error is nil on success.
	Error *ctrlhost.ResultError
	// Refused says why the live host would refuse this answer (the host's message, e.g.
	// "desired_objects[0]: kind v1 Secret is not owned by controller greeter"); nil when it
	// would apply it. Set by Run and Reconcile (which also fails the test), not by Decode.
	Refused error
}

// DesiredOfKind lists the desired objects of a kind.
func (o *Outcome) DesiredOfKind(kind string) []ctrlhost.Object {
	var out []ctrlhost.Object
	for _, d := range o.Desired {
		if d["kind"] == kind {
			out = append(out, d)
		}
	}
	return out
}

// Reconcile runs c once on obj (nil: the deletion notice of a gone primary) and decodes the
// answer. A request the host would never send, or a response that cannot be decoded, fails the
// test at once; an answer the host would refuse (Outcome.Refused) fails it too (t.Errorf, so
// the test's own checks still run). To test a refusal itself, use Run.
func Reconcile(t testing.TB, c *ctrlhost.Controller, obj ctrlhost.Object, opts ...Option) *Outcome {
	t.Helper()
	out, err := Run(c, obj, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if out.Refused != nil {
		t.Errorf("the host would refuse this answer: %v", out.Refused)
	}
	return out
}

// Run is Reconcile outside a test: an error for a request the host would never send (or a
// controller without a valid spec, or an undecodable answer); Outcome.Refused for an answer it
// would refuse.
func Run(c *ctrlhost.Controller, obj ctrlhost.Object, opts ...Option) (*Outcome, error) {
	spec, err := c.Spec()
	if err != nil {
		return nil, err
	}
	o := buildOptions(c.Name(), obj, opts, spec)
	if err := judgeRequest(spec, o.call, obj); err != nil {
		return nil, fmt.Errorf("the host would not send this request: %v", err)
	}
	resp := c.Invoke(o.ctx, 1, o.call, o.caps)
	out, err := Decode(resp)
	if err != nil {
		return nil, err
	}
	out.Refused = judgeResponse(spec, o.call, o.existing, resp)
	return out, nil
}

// Decode turns a response into an Outcome; an error when its JSON is malformed.
func Decode(resp *pb.ReconcileResponse) (*Outcome, error) {
	out := &Outcome{Response: resp, Conditions: map[string]ctrlhost.Condition{}, Finalized: resp.GetFinalized()}
	for _, d := range resp.GetDesiredObjects() {
		obj, err := ctrlhost.ParseObject(d)
		if err != nil {
			return nil, fmt.Errorf("desired object %v", err)
		}
		out.Desired = append(out.Desired, obj)
	}
	if len(resp.GetStatus()) > 0 {
		obj, err := ctrlhost.ParseObject(resp.GetStatus())
		if err != nil {
			return nil, fmt.Errorf("status %v", err)
		}
		out.Status = obj
	}
	statuses := map[pb.ConditionStatus]ctrlhost.ConditionStatus{
		pb.ConditionStatus_CONDITION_STATUS_TRUE:    ctrlhost.ConditionTrue,
		pb.ConditionStatus_CONDITION_STATUS_FALSE:   ctrlhost.ConditionFalse,
		pb.ConditionStatus_CONDITION_STATUS_UNKNOWN: ctrlhost.ConditionUnknown,
	}
	for _, c := range resp.GetConditions() {
		out.Conditions[c.GetType()] = ctrlhost.Condition{Type: c.GetType(), Status: statuses[c.GetStatus()],
			Reason: c.GetReason(), Message: c.GetMessage()}
	}
	for _, e := range resp.GetEvents() {
		typ := ctrlhost.EventNormal
		if e.GetType() == pb.EventType_EVENT_TYPE_WARNING {
			typ = ctrlhost.EventWarning
		}
		out.Events = append(out.Events, ctrlhost.Event{Type: typ, Reason: e.GetReason(), Message: e.GetMessage()})
	}
	if r := resp.GetRequeueAfter(); r != nil {
		out.RequeueAfter = r.AsDuration()
	}
	if e := resp.GetError(); e != nil {
		out.Error = &ctrlhost.ResultError{Terminal: e.GetKind() == pb.ErrorKind_ERROR_KIND_TERMINAL, Message: e.GetMessage(),
			Reason: e.GetReason(), RetryAfter: e.GetRetryAfter().AsDuration()}
	}
	return out, nil
}

// Served is a plugin serving on a temporary Unix socket, with a connection acting as the host.
type Served struct {
	Address string
	Conn    *grpc.ClientConn
	Client  pb.ControllerPluginServiceClient
	// Stop drains the plugin (as SIGTERM does) and waits until Serve returns.
	Stop func()
}

// Serve starts p on a Unix socket in a temporary directory and dials it; everything is stopped
// when the test ends.
func Serve(t testing.TB, p *ctrlhost.Plugin) *Served {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctrlhost-go-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "plugin.sock")
	lis, err := ctrlhost.Listen("unix://" + path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, lis) }()
	conn, err := grpc.Dial("unix://"+path, grpc.WithInsecure(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(ctrlhost.MaxMessageBytes),
			grpc.MaxCallSendMsgSize(ctrlhost.MaxMessageBytes)),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(func() { conn.Close(); stop() })
	return &Served{Address: "unix://" + path, Conn: conn, Client: pb.NewControllerPluginServiceClient(conn), Stop: stop}
}
