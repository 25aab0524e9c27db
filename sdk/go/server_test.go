package ctrlhost_test

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	"ctrlhost.dev/sdk/go/ctrlhosttest"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// gate lets a test hold reconciles of chosen names until it releases them.
type gate struct {
	mu      sync.Mutex
	waiting map[string]chan struct{}
	started chan string
	ended   chan string
}

func newGate() *gate {
	return &gate{waiting: map[string]chan struct{}{}, started: make(chan string, 100), ended: make(chan string, 100)}
}

// notify never blocks a reconcile: tests that read the channels send few requests.
func notify(ch chan string, name string) {
	select {
	case ch <- name:
	default:
	}
}

func (g *gate) hold(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting[name] = make(chan struct{})
}

func (g *gate) release(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.waiting[name])
}

// testPlugin's reconcile answers a status naming the object; names steer it: "hold-*" wait for
// the gate (or their ctx), "panic" panics, "huge" answers more than the message limit.
func testPlugin(g *gate) *ctrlhost.Plugin {
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Reconcile(
		func(ctx context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
			g.mu.Lock()
			wait := g.waiting[req.Name]
			g.mu.Unlock()
			notify(g.started, req.Name)
			defer notify(g.ended, req.Name)
			if wait != nil {
				select {
				case <-wait:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			switch req.Name {
			case "panic":
				panic("boom")
			case "huge":
				return &ctrlhost.Result{Status: map[string]any{"blob": strings.Repeat("x", 2<<20)}}, nil
			}
			return &ctrlhost.Result{Status: map[string]any{"name": req.Name}}, nil
		})
	p := ctrlhost.NewPlugin("shop", "1.0.0", c)
	p.MaxMessageBytes = 1 << 20
	p.DrainTimeout = 30 * time.Second
	p.Log = ctrlhost.NewLogger(io.Discard, ctrlhost.LevelError)
	return p
}

func call(id uint64, name string) *pb.ReconcileRequest {
	obj := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Shop","metadata":{"name":%q,"namespace":"ns"}}`, name)
	return &pb.ReconcileRequest{RequestId: id, Payload: &pb.ReconcileRequest_Reconcile{Reconcile: &pb.ReconcileCall{
		Controller: "shop", Namespace: "ns", Name: name, Object: []byte(obj)}}}
}

func openStream(t *testing.T, s *ctrlhosttest.Served) pb.ControllerPluginService_ReconcileClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if _, err := s.Client.Describe(ctx, &pb.DescribeRequest{ProtocolVersions: []string{"v1alpha1"},
		Capabilities: ctrlhost.AllCapabilities().Sorted()}); err != nil {
		t.Fatal(err)
	}
	stream, err := s.Client.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

func recv(t *testing.T, stream pb.ControllerPluginService_ReconcileClient) *pb.ReconcileResponse {
	t.Helper()
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	return resp
}

func TestServeDescribeAndHealth(t *testing.T) {
	s := ctrlhosttest.Serve(t, testPlugin(newGate()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.Client.Describe(ctx, &pb.DescribeRequest{ProtocolVersions: []string{"v9"}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "the host offered [v9]") {
		t.Errorf("Describe of an unknown version: %v", err)
	}
	health := healthpb.NewHealthClient(s.Conn)
	for _, service := range []string{"", ctrlhost.ServiceName} {
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v %v", service, resp, err)
		}
	}
	if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "other"}); status.Code(err) != codes.NotFound {
		t.Errorf("health of an unknown service: %v", err)
	}
}

// SetServing flips both health entries, seen by Check and by an open Watch; a draining server
// stays NOT_SERVING.
func TestSetServingReportsNotServingOnPurpose(t *testing.T) {
	g := newGate()
	g.hold("hold-drain")
	p := testPlugin(g)
	s := ctrlhosttest.Serve(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	health := healthpb.NewHealthClient(s.Conn)
	watch, err := health.Watch(ctx, &healthpb.HealthCheckRequest{Service: ""})
	if err != nil {
		t.Fatal(err)
	}
	next := func() healthpb.HealthCheckResponse_ServingStatus {
		resp, err := watch.Recv()
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		return resp.Status
	}
	checkBoth := func(want healthpb.HealthCheckResponse_ServingStatus) {
		for _, service := range []string{"", ctrlhost.ServiceName} {
			resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
			if err != nil || resp.Status != want {
				t.Errorf("health of %q: %v %v, want %v", service, resp, err, want)
			}
		}
	}
	if got := next(); got != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first status %v", got)
	}
	p.SetServing(false)
	if got := next(); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("after SetServing(false): %v", got)
	}
	checkBoth(healthpb.HealthCheckResponse_NOT_SERVING)
	p.SetServing(true)
	if got := next(); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("after SetServing(true): %v", got)
	}
	checkBoth(healthpb.HealthCheckResponse_SERVING)

	// A held reconcile keeps the drain going while the test looks at health.
	stream := openStream(t, s)
	if err := stream.Send(call(1, "hold-drain")); err != nil {
		t.Fatal(err)
	}
	<-g.started
	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	if got := next(); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("draining: %v", got)
	}
	p.SetServing(true) // ignored: draining
	checkBoth(healthpb.HealthCheckResponse_NOT_SERVING)
	g.release("hold-drain")
	<-stopped
}

// Many reconciles answered concurrently on one stream: every request gets exactly one answer,
// intact (no answer lost, duplicated or mixed up between requests).
func TestServeAnswersConcurrentRequestsOnce(t *testing.T) {
	s := ctrlhosttest.Serve(t, testPlugin(newGate()))
	stream := openStream(t, s)
	const n = 200
	for i := 1; i <= n; i++ {
		if err := stream.Send(call(uint64(i), fmt.Sprintf("shop-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint64]bool{}
	for len(seen) < n {
		resp := recv(t, stream)
		want := fmt.Sprintf(`{"name":"shop-%d"}`, resp.RequestId)
		if seen[resp.RequestId] || string(resp.Status) != want {
			t.Fatalf("answer %d: duplicate %v, status %s", resp.RequestId, seen[resp.RequestId], resp.Status)
		}
		seen[resp.RequestId] = true
	}
}

// Answers go out in completion order; a panic, an oversized answer and a cancelled request fail
// only themselves, the stream goes on.
func TestServeIsolatesFailuresToTheirRequest(t *testing.T) {
	g := newGate()
	g.hold("hold-slow")
	g.hold("hold-cancelled")
	s := ctrlhosttest.Serve(t, testPlugin(g))
	stream := openStream(t, s)
	for i, name := range []string{"hold-slow", "hold-cancelled", "panic", "huge"} {
		if err := stream.Send(call(uint64(i+1), name)); err != nil {
			t.Fatal(err)
		}
	}
	answers := map[uint64]*pb.ReconcileResponse{}
	for len(answers) < 2 {
		resp := recv(t, stream)
		answers[resp.RequestId] = resp
	}
	if e := answers[3].GetError(); e.GetKind() != pb.ErrorKind_ERROR_KIND_RETRYABLE || !strings.Contains(e.GetMessage(), "reconcile panicked: boom at ") {
		t.Errorf("panic answered %v", answers[3])
	}
	if e := answers[4].GetError(); e.GetKind() != pb.ErrorKind_ERROR_KIND_TERMINAL || e.GetReason() != "ResponseTooLarge" ||
		!strings.Contains(e.GetMessage(), "exceeds the message limit of 1048576") {
		t.Errorf("oversized answer: %v", e)
	}
	// Cancel request 2: its ctx ends, its answer is never sent.
	if err := stream.Send(&pb.ReconcileRequest{RequestId: 2, Payload: &pb.ReconcileRequest_Cancel{Cancel: &pb.CancelNotice{Reason: "test"}}}); err != nil {
		t.Fatal(err)
	}
	for name := range g.ended {
		if name == "hold-cancelled" {
			break
		}
	}
	g.release("hold-slow")
	if err := stream.Send(call(5, "after")); err != nil {
		t.Fatal(err)
	}
	var ids []int
	for len(ids) < 2 {
		ids = append(ids, int(recv(t, stream).RequestId))
	}
	sort.Ints(ids)
	if ids[0] != 1 || ids[1] != 5 {
		t.Errorf("answers after the cancel: %v, want 1 and 5 (never 2)", ids)
	}
	stream.CloseSend()
	if resp, err := stream.Recv(); err != io.EOF {
		t.Errorf("after CloseSend: %v %v, want the stream to end with no answer for 2", resp, err)
	}
}

func TestServeCancelsAtTheDeadline(t *testing.T) {
	g := newGate()
	g.hold("hold-late")
	s := ctrlhosttest.Serve(t, testPlugin(g))
	stream := openStream(t, s)
	req := call(1, "hold-late")
	req.GetReconcile().Deadline = timestamppb.New(time.Now().Add(-time.Second))
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	// Bounded well below the stream's own minute, whose end would also cancel the reconcile.
	select {
	case name := <-g.ended:
		if name != "hold-late" {
			t.Fatalf("ended %q", name)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the reconcile was not cancelled at its deadline")
	}
}

// A remote plugin's clock may be far off the host's: the relative timeout holds even when the
// absolute deadline looks a day away.
func TestServeCancelsAtTheRelativeTimeoutUnderClockSkew(t *testing.T) {
	g := newGate()
	g.hold("hold-skewed")
	s := ctrlhosttest.Serve(t, testPlugin(g))
	stream := openStream(t, s)
	req := call(1, "hold-skewed")
	req.GetReconcile().Deadline = timestamppb.New(time.Now().Add(24 * time.Hour))
	req.GetReconcile().Timeout = durationpb.New(10 * time.Millisecond)
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	// Bounded well below the stream's own minute, whose end would also cancel the reconcile.
	select {
	case name := <-g.ended:
		if name != "hold-skewed" {
			t.Fatalf("ended %q", name)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the reconcile was not cancelled at its deadline")
	}
}

// The drain: NOT_SERVING, new work refused with a retryable error, the in-flight reconcile
// still answered, then Serve returns.
func TestServeDrains(t *testing.T) {
	g := newGate()
	g.hold("hold-inflight")
	s := ctrlhosttest.Serve(t, testPlugin(g))
	stream := openStream(t, s)
	if err := stream.Send(call(1, "hold-inflight")); err != nil {
		t.Fatal(err)
	}
	<-g.started
	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	health := healthpb.NewHealthClient(s.Conn)
	watch, err := health.Watch(context.Background(), &healthpb.HealthCheckRequest{Service: ctrlhost.ServiceName})
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := watch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status == healthpb.HealthCheckResponse_NOT_SERVING {
			break
		}
	}
	if err := stream.Send(call(2, "late")); err != nil {
		t.Fatal(err)
	}
	if resp := recv(t, stream); resp.RequestId != 2 || resp.GetError().GetMessage() != "plugin shutting down" ||
		resp.GetError().GetKind() != pb.ErrorKind_ERROR_KIND_RETRYABLE {
		t.Fatalf("work during the drain answered %v", resp)
	}
	g.release("hold-inflight")
	if resp := recv(t, stream); resp.RequestId != 1 || resp.Error != nil {
		t.Fatalf("in-flight answer %v", resp)
	}
	<-stopped
}
