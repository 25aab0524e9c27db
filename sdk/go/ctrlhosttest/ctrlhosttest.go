// Package ctrlhosttest runs ctrlhost controllers in tests: in process on fixture objects
// (Reconcile), or served on a temporary Unix socket with a client acting as the host (Serve).
//
//	out := ctrlhosttest.Reconcile(t, controller, webapp, ctrlhosttest.Children(deployment))
//	if out.Error != nil { t.Fatal(out.Error) }
//	svc := out.DesiredOfKind("Service")[0]
//
// Reconcile goes through the production path (the request serialized to a ReconcileCall,
// parsed, the controller invoked with panic recovery, the result validated), so validation and
// error handling are exercised too.
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
	call *pb.ReconcileCall
	caps ctrlhost.CapabilitySet
	ctx  context.Context
}

// Children adds owned children to the request.
func Children(objs ...ctrlhost.Object) Option {
	return func(o *options) { o.call.Children = append(o.call.Children, raw(objs)...) }
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

// Call is the ReconcileCall the host would send for obj (nil: the primary is gone).
func Call(controller string, obj ctrlhost.Object, opts ...Option) *pb.ReconcileCall {
	o := buildOptions(controller, obj, opts)
	return o.call
}

func buildOptions(controller string, obj ctrlhost.Object, opts []Option) *options {
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
// answer; a response that cannot be decoded fails the test.
func Reconcile(t testing.TB, c *ctrlhost.Controller, obj ctrlhost.Object, opts ...Option) *Outcome {
	t.Helper()
	out, err := Run(c, obj, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Run is Reconcile outside a test.
func Run(c *ctrlhost.Controller, obj ctrlhost.Object, opts ...Option) (*Outcome, error) {
	o := buildOptions(c.Name(), obj, opts)
	return Decode(c.Invoke(o.ctx, 1, o.call, o.caps))
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
