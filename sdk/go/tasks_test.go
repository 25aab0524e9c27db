package ctrlhost_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	"ctrlhost.dev/sdk/go/ctrlhosttest"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
	"google.golang.org/grpc/codes"
)

// A bounded wait for anything a test expects to happen; never a timing assertion.
const taskWait = 30 * time.Second

// syncBuffer is a log destination the test reads while the plugin writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func shopWithTasks() *ctrlhost.Controller {
	return ctrlhost.NewController("shop").For("example.com", "v1", "Shop").
		Reconcile(func(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) { return nil, nil })
}

func TestBackgroundTaskDeclarations(t *testing.T) {
	noop := func(context.Context, *ctrlhost.Task) error { return nil }
	for _, tc := range []struct {
		c    *ctrlhost.Controller
		want string
	}{
		{shopWithTasks().BackgroundTask("Poll", noop), `background task "Poll": name must be a lowercase RFC 1123 label`},
		{shopWithTasks().BackgroundTask("poll", nil), `background task "poll" has no function`},
		{shopWithTasks().BackgroundTask("poll", noop).BackgroundTask("poll", noop), `background task "poll" declared twice`},
	} {
		if _, err := tc.c.Spec(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Spec() = %v, want %q", err, tc.want)
		}
	}
	c := shopWithTasks().BackgroundTask("poll", noop).BackgroundTask("watch", noop)
	spec, err := c.Spec()
	if err != nil || len(spec.BackgroundTasks) != 2 || spec.BackgroundTasks[1].Name != "watch" {
		t.Fatalf("Spec() = %v, %v", spec, err)
	}
	p := ctrlhost.NewPlugin("shop", "1.0.0", c)
	p.Log = ctrlhost.NewLogger(&bytes.Buffer{}, ctrlhost.LevelError)
	_, err = p.Describe(&pb.DescribeRequest{ProtocolVersions: []string{"v1alpha1"},
		Capabilities: []pb.Capability{pb.Capability_CAPABILITY_CONDITIONS}})
	if !errors.Is(err, ctrlhost.ErrDescribeRefused) || !strings.Contains(err.Error(), "CAPABILITY_BACKGROUND_TASKS") {
		t.Fatalf("Describe without the capability = %v", err)
	}
}

func TestCheckTaskKey(t *testing.T) {
	for _, tc := range []struct{ namespace, name, want string }{
		{"ns", "a.b-c", ""},
		{"", "cluster-wide", ""},
		{"ns", "", `name "" is not a valid object name (RFC 1123 subdomain)`},
		{"ns", "Bad", `name "Bad" is not a valid object name (RFC 1123 subdomain)`},
		{"ns", strings.Repeat("a", 254), "is not a valid object name"},
		{"a.b", "x", `namespace "a.b" is not a valid namespace (RFC 1123 label)`},
	} {
		err := ctrlhost.CheckTaskKey(tc.namespace, tc.name)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckTaskKey(%q, %q) = %v, want %q", tc.namespace, tc.name, err, tc.want)
		}
	}
}

// taskHost plays the host on one Reconcile stream: it sends notices and sorts what comes back
// by task (statuses and enqueues of several tasks interleave).
type taskHost struct {
	t      *testing.T
	stream pb.ControllerPluginService_ReconcileClient
	mu     sync.Mutex
	byTask map[string][]*pb.ReconcileResponse
	more   chan struct{}
}

func newTaskHost(t *testing.T, p *ctrlhost.Plugin) *taskHost {
	h := &taskHost{t: t, stream: openStream(t, ctrlhosttest.Serve(t, p)),
		byTask: map[string][]*pb.ReconcileResponse{}, more: make(chan struct{}, 1)}
	go func() {
		for {
			resp, err := h.stream.Recv()
			if err != nil {
				return
			}
			task := resp.GetTaskStatus().GetTask() + resp.GetTaskEnqueue().GetTask()
			h.mu.Lock()
			h.byTask[task] = append(h.byTask[task], resp)
			h.mu.Unlock()
			select {
			case h.more <- struct{}{}:
			default:
			}
		}
	}()
	return h
}

func (h *taskHost) send(req *pb.ReconcileRequest) {
	if err := h.stream.Send(req); err != nil {
		h.t.Fatal(err)
	}
}

// next is the next message of task, waiting for it (bounded).
func (h *taskHost) next(task string) *pb.ReconcileResponse {
	h.t.Helper()
	deadline := time.After(taskWait)
	for {
		h.mu.Lock()
		if q := h.byTask[task]; len(q) > 0 {
			h.byTask[task] = q[1:]
			h.mu.Unlock()
			return q[0]
		}
		h.mu.Unlock()
		select {
		case <-h.more:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			h.t.Fatalf("no message from task %q", task)
		}
	}
}

func (h *taskHost) wantStatus(task string, state pb.TaskState, restarts uint32, lastError string) {
	h.t.Helper()
	s := h.next(task).GetTaskStatus()
	if s.GetState() != state || s.GetRestarts() != restarts || !strings.HasPrefix(s.GetLastError(), lastError) ||
		s.GetController() != "shop" {
		h.t.Fatalf("task %s status = %v, want %v restarts=%d last_error=%q...", task, s, state, restarts, lastError)
	}
}

func startTasks(id uint64, controller string) *pb.ReconcileRequest {
	return &pb.ReconcileRequest{RequestId: id, Payload: &pb.ReconcileRequest_StartTasks{
		StartTasks: &pb.StartTasks{Controller: controller}}}
}

func stopTasks(id uint64, controller, reason string) *pb.ReconcileRequest {
	return &pb.ReconcileRequest{RequestId: id, Payload: &pb.ReconcileRequest_StopTasks{
		StopTasks: &pb.StopTasks{Controller: controller, Reason: reason}}}
}

func TestBackgroundTaskEnqueuesUntilTheHostStopsIt(t *testing.T) {
	stopped := make(chan string, 1)
	c := shopWithTasks().BackgroundTask("poll", func(ctx context.Context, task *ctrlhost.Task) error {
		if err := task.Enqueue("ns", "a"); err != nil {
			return err
		}
		if err := task.Enqueue("ns", "Not_A_Name"); err == nil {
			return errors.New("a malformed key was accepted")
		}
		<-ctx.Done()
		stopped <- task.StopReason()
		return ctx.Err()
	})
	logs := &syncBuffer{}
	p := ctrlhost.NewPlugin("shop", "1.0.0", c)
	p.Log = ctrlhost.NewLogger(logs, ctrlhost.LevelInfo)
	h := newTaskHost(t, p)

	h.send(startTasks(1, "shop"))
	h.wantStatus("poll", pb.TaskState_TASK_STATE_RUNNING, 0, "")
	enq := h.next("poll").GetTaskEnqueue()
	if enq.GetController() != "shop" || enq.GetNamespace() != "ns" || enq.GetName() != "a" || enq.GetEnqueueId() == 0 {
		t.Fatalf("enqueue = %v", enq)
	}
	h.send(startTasks(2, "shop")) // idempotent: the running task is kept
	h.send(&pb.ReconcileRequest{RequestId: 3, Payload: &pb.ReconcileRequest_EnqueueRefused{
		EnqueueRefused: &pb.TaskEnqueueRefused{EnqueueId: enq.GetEnqueueId(),
			Code: int32(codes.ResourceExhausted), Message: "over the enqueue rate"}}})
	h.send(stopTasks(4, "other", "not ours")) // stops nothing of shop's
	h.send(stopTasks(5, "shop", "plugin swapped out"))
	h.wantStatus("poll", pb.TaskState_TASK_STATE_STOPPED, 0, "")
	select {
	case reason := <-stopped:
		if reason != "plugin swapped out" {
			t.Fatalf("StopReason = %q", reason)
		}
	case <-time.After(taskWait):
		t.Fatal("the task was not cancelled")
	}
	for _, want := range []string{"background tasks started", "background tasks stopped",
		`msg="the host refused a background task's enqueue" enqueue_id=`, "code=ResourceExhausted",
		`error="over the enqueue rate"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Count(logs.String(), "background tasks started") != 1 {
		t.Errorf("a repeated StartTasks started the tasks again:\n%s", logs.String())
	}
}

func TestFailingTaskIsReportedAndRestartedAndStopsWithItsStream(t *testing.T) {
	var mu sync.Mutex
	runs := 0
	stopped := make(chan string, 1)
	c := shopWithTasks().
		BackgroundTask("flaky", func(ctx context.Context, task *ctrlhost.Task) error {
			mu.Lock()
			runs++
			n := runs
			mu.Unlock()
			switch n {
			case 1:
				return errors.New("remote down")
			case 2:
				panic("boom")
			case 3:
				// Not UTF-8, and longer than the 1024 bytes reported: still reported.
				return errors.New("\xff" + strings.Repeat("é", 600))
			}
			<-ctx.Done()
			stopped <- task.StopReason()
			return nil
		}).
		BackgroundTask("once", func(context.Context, *ctrlhost.Task) error { return nil })
	p := ctrlhost.NewPlugin("shop", "1.0.0", c)
	p.Log = ctrlhost.NewLogger(&syncBuffer{}, ctrlhost.LevelInfo)
	p.TaskBackoff = ctrlhost.TaskBackoff{Initial: time.Millisecond, Max: 2 * time.Millisecond}
	h := newTaskHost(t, p)

	h.send(startTasks(1, "shop"))
	h.wantStatus("flaky", pb.TaskState_TASK_STATE_RUNNING, 0, "")
	h.wantStatus("flaky", pb.TaskState_TASK_STATE_BACKOFF, 1, "remote down")
	h.wantStatus("flaky", pb.TaskState_TASK_STATE_RUNNING, 1, "remote down")
	h.wantStatus("flaky", pb.TaskState_TASK_STATE_BACKOFF, 2, "task panicked: boom at ")
	h.wantStatus("flaky", pb.TaskState_TASK_STATE_RUNNING, 2, "task panicked: boom")
	h.wantStatus("flaky", pb.TaskState_TASK_STATE_BACKOFF, 3, "\uFFFDéé")
	h.wantStatus("flaky", pb.TaskState_TASK_STATE_RUNNING, 3, "\uFFFDéé")
	h.wantStatus("once", pb.TaskState_TASK_STATE_RUNNING, 0, "")
	h.wantStatus("once", pb.TaskState_TASK_STATE_FINISHED, 0, "")

	// The host's side of the stream ends: the stream's tasks are cancelled.
	if err := h.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	select {
	case reason := <-stopped:
		if reason != "stream ended" {
			t.Fatalf("StopReason = %q", reason)
		}
	case <-time.After(taskWait):
		t.Fatal("the task outlived its stream")
	}
}

func TestDrainStopsBackgroundTasks(t *testing.T) {
	stopped := make(chan string, 1)
	started := make(chan struct{})
	c := shopWithTasks().BackgroundTask("poll", func(ctx context.Context, task *ctrlhost.Task) error {
		close(started)
		<-ctx.Done()
		stopped <- task.StopReason()
		return nil
	})
	p := ctrlhost.NewPlugin("shop", "1.0.0", c)
	p.Log = ctrlhost.NewLogger(&syncBuffer{}, ctrlhost.LevelInfo)
	served := ctrlhosttest.Serve(t, p)
	stream := openStream(t, served)
	if err := stream.Send(startTasks(1, "shop")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(taskWait):
		t.Fatal("the task did not start")
	}
	served.Stop()
	select {
	case reason := <-stopped:
		if reason != "plugin shutting down" {
			t.Fatalf("StopReason = %q", reason)
		}
	case <-time.After(taskWait):
		t.Fatal("the drain left the task running")
	}
}

// A controller with a background task that polls something and enqueues the primaries it
// concerns. The host starts it (StartTasks) and cancels ctx when the controller stops.
func ExampleController_BackgroundTask() {
	changes := make(chan string) // e.g. fed by polling a file or an HTTP endpoint
	poller := ctrlhost.NewController("poller").For("", "v1", "ConfigMap").
		Reconcile(func(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) { return nil, nil }).
		BackgroundTask("watch-remote", func(ctx context.Context, task *ctrlhost.Task) error {
			for {
				select {
				case <-ctx.Done(): // StopTasks, the stream ended, or the plugin drains
					return nil
				case name := <-changes:
					// An error (malformed key) is reported to the host and the task restarted
					// after a backoff, as a panic would be.
					if err := task.Enqueue("default", name); err != nil {
						return err
					}
				}
			}
		})
	spec, _ := poller.Spec()
	need, _ := poller.RequiredCapabilities()
	fmt.Println(spec.BackgroundTasks[0].Name, need.Has(pb.Capability_CAPABILITY_BACKGROUND_TASKS))
	// Output: watch-remote true
}
