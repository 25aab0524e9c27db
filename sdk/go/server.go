package ctrlhost

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Serve serves the plugin on lis until ctx is done, then drains: health turns NOT_SERVING, new
// reconciles are answered with the retryable error "plugin shutting down", in-flight reconciles
// get DrainTimeout to finish and be answered (then their ctx is cancelled and their answers
// dropped; the host requeues their keys), and the server stops. It returns nil after a drain,
// an error when serving fails.
func (p *Plugin) Serve(ctx context.Context, lis net.Listener) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.TLS == nil {
		if err := checkPlaintext(lis.Addr()); err != nil {
			return err
		}
	}
	s := newServer(p)
	p.addServer(s)
	defer p.removeServer(s)
	served := make(chan error, 1)
	go func() { served <- s.grpc.Serve(lis) }()
	p.Log.Info("plugin serving", "plugin", p.Name, "version", p.Version, "address", lis.Addr().String())
	select {
	case err := <-served:
		s.health.Shutdown()
		return err
	case <-ctx.Done():
	}
	p.Log.Info("plugin draining", "plugin", p.Name, "in_flight", s.inFlight())
	abandoned := s.drain(p.DrainTimeout)
	p.Log.Info("plugin stopped", "plugin", p.Name, "abandoned", abandoned)
	return nil
}

// SetServing reports SERVING (true) or NOT_SERVING (false) on grpc.health.v1, for "" and the
// service name, on every server Serve (or Run) is running for p, e.g. to pause while a
// dependency is down: the host then sends no new reconciles (they wait in the host) until
// SetServing(true), and restarts the plugin if it stays NOT_SERVING longer than its
// notServingTimeout (docs/protocol.md, "Liveness"). A server starts SERVING; a draining one
// ignores it (it stays NOT_SERVING). Safe to call from any goroutine.
func (p *Plugin) SetServing(serving bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.servers {
		s.setServing(serving)
	}
}

func (p *Plugin) addServer(s *server) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.servers == nil {
		p.servers = map[*server]bool{}
	}
	p.servers[s] = true
}

func (p *Plugin) removeServer(s *server) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.servers, s)
}

// CapabilitiesMetadata is the Reconcile stream's metadata key in which the host sends the
// capabilities negotiated on that connection (names, comma-separated).
const CapabilitiesMetadata = "ctrlhost-capabilities"

// StreamCapabilities is the capability set a stream's metadata carries (ctx of the stream),
// restricted to those this SDK supports; nil when the host sent none (an older host). A plugin
// dialled by two hosts (an HA pair on different versions) thus answers each stream with the
// set negotiated on its own connection rather than with the last Describe's.
func StreamCapabilities(ctx context.Context) CapabilitySet {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return nil
	}
	values := md.Get(CapabilitiesMetadata)
	if len(values) == 0 {
		return nil
	}
	all := AllCapabilities()
	set := CapabilitySet{}
	for _, v := range values {
		for _, name := range strings.Split(v, ",") {
			c := pb.Capability(pb.Capability_value[strings.TrimSpace(name)])
			if all.Has(c) {
				set[c] = true
			}
		}
	}
	return set
}

// KeepaliveMinTime is the shortest interval between the host's keepalive pings the plugin
// accepts (docs/protocol.md, "Liveness").
const KeepaliveMinTime = time.Second

// server is one serving plugin. Thread-safe: mu guards the draining flag, the in-flight count
// and the open streams.
type server struct {
	p      *Plugin
	grpc   *grpc.Server
	health *health.Server

	mu       sync.Mutex
	draining bool             // guarded by mu
	count    int              // guarded by mu: reconciles running, all streams
	idle     chan struct{}    // guarded by mu: closed when draining and count reaches 0
	streams  map[*stream]bool // guarded by mu
	stopped  chan struct{}    // closed when the drain is over: every stream handler returns
}

func newServer(p *Plugin) *server {
	limit := p.MaxMessageBytes
	if limit <= 0 {
		limit = MaxMessageBytes
	}
	s := &server{p: p, health: health.NewServer(), idle: make(chan struct{}),
		streams: map[*stream]bool{}, stopped: make(chan struct{})}
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(limit), grpc.MaxSendMsgSize(limit),
		// Accept the host's HTTP/2 keepalive pings (every few seconds, also on an idle
		// stream) instead of grpc-go's default of one per 5 minutes, which answers faster
		// pings with GOAWAY "too_many_pings".
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime,
			PermitWithoutStream: true})}
	if p.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(p.TLS)))
	}
	s.grpc = grpc.NewServer(opts...)
	pb.RegisterControllerPluginServiceServer(s.grpc, &service{s: s, limit: limit})
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	return s
}

func (s *server) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// setServing sets both health entries unless draining. grpc-go's health server also ignores
// updates once drain has shut it down.
func (s *server) setServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(ServiceName, st)
}

func (s *server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// begin counts a new reconcile; false while draining.
func (s *server) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.count++
	return true
}

func (s *server) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count--
	if s.draining && s.count == 0 {
		close(s.idle)
	}
}

// drain returns the number of reconciles abandoned after timeout.
func (s *server) drain(timeout time.Duration) int {
	s.health.Shutdown() // NOT_SERVING for every service, Watch streams see it
	s.mu.Lock()
	s.draining = true
	if s.count == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-s.idle:
	case <-timer.C:
	}
	s.mu.Lock()
	abandoned := s.count
	streams := make([]*stream, 0, len(s.streams))
	for st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	for _, st := range streams {
		st.cancelAll() // cooperative reconciles (ctx.Done) stop now
		st.tasks.stop("", "plugin shutting down", true)
	}
	close(s.stopped)
	// Stop rather than GracefulStop: health Watch streams would hold GracefulStop forever.
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(500 * time.Millisecond):
		s.grpc.Stop()
	}
	return abandoned
}

type service struct {
	pb.UnimplementedControllerPluginServiceServer
	s     *server
	limit int
}

func (v *service) Describe(ctx context.Context, req *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	resp, err := v.s.p.Describe(req)
	if errors.Is(err, ErrDescribeRefused) {
		v.s.p.Log.Error("describe refused", "error", err)
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return resp, err
}

// stream is one Reconcile stream. mu guards the send side (grpc-go forbids concurrent Send)
// and the cancel functions of its requests.
type stream struct {
	grpc pb.ControllerPluginService_ReconcileServer
	// caps are the capabilities in effect on this stream, from its metadata (nil: the host sent
	// none, so the last Describe's apply).
	caps CapabilitySet

	mu      sync.Mutex
	closed  bool                          // guarded by mu: the handler returned, no more Send
	cancels map[uint64]context.CancelFunc // guarded by mu
	work    sync.WaitGroup
	// tasks are the background tasks started on this stream (thread-safe on its own).
	tasks *taskRunner
}

func (st *stream) send(resp *pb.ReconcileResponse) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return
	}
	// A failed Send means the stream broke: Recv fails too and ends the handler.
	_ = st.grpc.Send(resp)
}

func (st *stream) cancelAll() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, cancel := range st.cancels {
		cancel()
	}
}

func (v *service) Reconcile(g pb.ControllerPluginService_ReconcileServer) error {
	s := v.s
	st := &stream{grpc: g, cancels: map[uint64]context.CancelFunc{},
		caps: StreamCapabilities(g.Context())}
	st.tasks = newTaskRunner(s.p, st.send)
	// Tasks never outlive the stream that started them.
	defer st.tasks.stop("", "stream ended", true)
	s.mu.Lock()
	s.streams[st] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.streams, st)
		s.mu.Unlock()
	}()
	// The stream's context ends when the host goes away; every reconcile derives from it.
	streamCtx, cancelStream := context.WithCancel(g.Context())
	defer cancelStream()
	recvDone := make(chan error, 1)
	go func() { recvDone <- v.read(streamCtx, st) }()
	var err error
	select {
	case err = <-recvDone:
		// The host closed its side (or the stream broke): answer what is in flight, unless the
		// stream is gone, in which case the sends fail harmlessly.
		st.work.Wait()
	case <-s.stopped:
		// The drain is over: reconciles still running are abandoned.
	}
	st.mu.Lock()
	st.closed = true
	st.mu.Unlock()
	return err
}

// read takes requests off the stream until it ends; nil when the host closed its side.
func (v *service) read(ctx context.Context, st *stream) error {
	s := v.s
	for {
		req, err := st.grpc.Recv()
		if err != nil {
			if status.Code(err) == codes.Canceled || err.Error() == "EOF" {
				return nil
			}
			return nil
		}
		id := req.GetRequestId()
		if c := req.GetCancel(); c != nil {
			st.mu.Lock()
			cancel := st.cancels[id]
			st.mu.Unlock()
			if cancel != nil {
				cancel()
			}
			continue
		}
		if t := req.GetStartTasks(); t != nil {
			if !s.isDraining() {
				st.tasks.start(t.GetController())
			}
			continue
		}
		if t := req.GetStopTasks(); t != nil {
			st.tasks.stop(t.GetController(), t.GetReason(), false)
			continue
		}
		if r := req.GetEnqueueRefused(); r != nil {
			s.p.Log.Warn("the host refused a background task's enqueue", "enqueue_id", r.GetEnqueueId(),
				"code", codes.Code(r.GetCode()).String(), "error", r.GetMessage())
			continue
		}
		call := req.GetReconcile()
		if call == nil || id == 0 {
			s.p.Log.Warn("ignoring a malformed reconcile request", "request_id", id)
			continue
		}
		if !s.begin() {
			st.send(errorResponse(id, false, "plugin shutting down"))
			continue
		}
		rctx, cancel := context.WithCancel(ctx)
		if deadline, ok := requestDeadline(call, time.Now()); ok {
			rctx, cancel = withDeadline(rctx, cancel, deadline)
		}
		st.mu.Lock()
		st.cancels[id] = cancel
		st.mu.Unlock()
		st.work.Add(1)
		go v.work(rctx, st, id, call)
	}
}

// requestDeadline is when the host gives up on a call received at now: the sooner of its
// absolute deadline and now + its relative timeout (which holds under clock skew between the
// host and a remote plugin).
func requestDeadline(call *pb.ReconcileCall, now time.Time) (time.Time, bool) {
	var deadline time.Time
	if d := call.GetDeadline(); d != nil && d.IsValid() {
		deadline = d.AsTime()
	}
	if t := call.GetTimeout(); t != nil && t.IsValid() {
		if budget := now.Add(t.AsDuration()); deadline.IsZero() || budget.Before(deadline) {
			deadline = budget
		}
	}
	return deadline, !deadline.IsZero()
}

func withDeadline(ctx context.Context, cancel context.CancelFunc, deadline time.Time) (context.Context, context.CancelFunc) {
	dctx, dcancel := context.WithDeadline(ctx, deadline)
	return dctx, func() { dcancel(); cancel() }
}

func (v *service) work(ctx context.Context, st *stream, id uint64, call *pb.ReconcileCall) {
	defer func() {
		st.mu.Lock()
		cancel := st.cancels[id]
		delete(st.cancels, id)
		st.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		v.s.end()
		st.work.Done()
	}()
	caps := st.caps
	if caps == nil {
		caps = v.s.p.Capabilities()
	}
	resp := v.s.p.handle(ctx, id, call, caps)
	if size := proto.Size(resp); size > v.limit {
		// Only this request fails; the stream and every other request go on.
		// Terminal: the same answer would not shrink on a retry.
		resp = errorResponse(id, true, fmt.Sprintf(
			"response of %d bytes exceeds the message limit of %d", size, v.limit))
		resp.Error.Reason = ResponseTooLarge
	}
	if ctx.Err() != nil {
		// Cancelled by the host or the drain, or past its deadline: the answer is discarded
		// by the host in every case.
		return
	}
	st.send(resp)
}
