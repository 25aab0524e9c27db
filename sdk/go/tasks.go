package ctrlhost

import (
	"context"
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
)

// Background tasks (docs/protocol.md §13): long-running functions of a controller that the host
// starts and stops. The same semantics as the C++, Python and Node SDKs:
//
//	poller := ctrlhost.NewController("poller").For("", "v1", "ConfigMap").Reconcile(reconcile).
//		BackgroundTask("watch-file", func(ctx context.Context, task *ctrlhost.Task) error {
//			for {
//				select {
//				case <-ctx.Done(): // the host stopped the task
//					return nil
//				case <-time.After(time.Second):
//				}
//				for _, key := range readChanges() {
//					if err := task.Enqueue(key.Namespace, key.Name); err != nil {
//						return err // a malformed key: reported, restarted after a backoff
//					}
//				}
//			}
//		})
//
// The host sends StartTasks when the controller starts on this plugin instance and StopTasks
// when it stops (operator removed, plugin swapped out, leadership lost, host shutting down):
// ctx is then cancelled. The tasks of a Reconcile stream are also cancelled when that stream
// ends, and when the plugin drains. A task that returns an error or panics is logged, reported
// to the host (TaskStatus BACKOFF with the error; it shows in /debug/dump) and started again
// after a backoff (Plugin.TaskBackoff: 1 s doubling up to 60 s by default); it never takes the
// plugin down. A task that returns nil while not cancelled is finished and not restarted.

// TaskFunc is a background task. It runs until ctx is cancelled (then it should return).
type TaskFunc func(ctx context.Context, task *Task) error

// TaskBackoff is the delay before a failed task starts again: Initial, doubling up to Max.
type TaskBackoff struct {
	Initial, Max time.Duration
}

// DefaultTaskBackoff is 1 s doubling up to 60 s, as in the other SDKs.
var DefaultTaskBackoff = TaskBackoff{Initial: time.Second, Max: time.Minute}

var (
	rfc1123Subdomain = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)
	nextEnqueueID    atomic.Uint64
)

// CheckTaskKey reports whether (namespace, name) is a well-formed key by the host's rules: name
// an RFC 1123 subdomain of at most 253 characters, namespace empty or an RFC 1123 label.
func CheckTaskKey(namespace, name string) error {
	if len(name) > 253 || !rfc1123Subdomain.MatchString(name) {
		return fmt.Errorf(`name "%s" is not a valid object name (RFC 1123 subdomain)`, name)
	}
	if namespace != "" && !rfc1123Label.MatchString(namespace) {
		return fmt.Errorf(`namespace "%s" is not a valid namespace (RFC 1123 label)`, namespace)
	}
	return nil
}

// Task is what a TaskFunc gets: its names and Enqueue. Safe for concurrent use.
type Task struct {
	Controller string
	Name       string

	send func(*pb.ReconcileResponse)
	ctx  context.Context

	mu         sync.Mutex
	stopReason string // guarded by mu
}

// Enqueue asks the host to reconcile the primary (namespace, name) of this controller. It
// returns an error for a malformed key (CheckTaskKey) and does nothing once the task is
// cancelled. The host may still refuse the key (the controller stopped, or over its enqueue
// rate): the SDK logs such refusals.
func (t *Task) Enqueue(namespace, name string) error {
	if err := CheckTaskKey(namespace, name); err != nil {
		return err
	}
	if t.ctx.Err() != nil {
		return nil
	}
	t.send(&pb.ReconcileResponse{TaskEnqueue: &pb.TaskEnqueue{Controller: t.Controller,
		Task: t.Name, Namespace: namespace, Name: name, EnqueueId: nextEnqueueID.Add(1)}})
	return nil
}

// StopReason is why the task was cancelled ("plugin swapped out", "stream ended", ...), "" while
// it runs.
func (t *Task) StopReason() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopReason
}

type declaredTask struct {
	name string
	fn   TaskFunc
}

// BackgroundTask declares a task (name: a lowercase RFC 1123 label, unique in the controller).
// Declaring one makes the controller need CAPABILITY_BACKGROUND_TASKS.
func (c *Controller) BackgroundTask(name string, fn TaskFunc) *Controller {
	switch {
	case !rfc1123Label.MatchString(name):
		c.errs = append(c.errs, fmt.Errorf("background task %q: name must be a lowercase RFC 1123 label", name))
	case fn == nil:
		c.errs = append(c.errs, fmt.Errorf("background task %q has no function", name))
	}
	for _, t := range c.tasks {
		if t.name == name {
			c.errs = append(c.errs, fmt.Errorf("background task %q declared twice", name))
		}
	}
	c.tasks = append(c.tasks, declaredTask{name, fn})
	c.spec.BackgroundTasks = append(c.spec.BackgroundTasks, &pb.BackgroundTask{Name: name})
	return c
}

// runningTasks are the tasks of one controller started on one stream.
type runningTasks struct {
	cancel context.CancelFunc
	tasks  []*Task
}

// taskRunner runs the background tasks started on one Reconcile stream. mu guards the running
// set; each task runs on its own goroutine and sends through the stream's send (thread-safe).
type taskRunner struct {
	p    *Plugin
	send func(*pb.ReconcileResponse)

	mu      sync.Mutex
	closed  bool                     // guarded by mu: the stream ended, no more starts
	running map[string]*runningTasks // guarded by mu, by controller
}

func newTaskRunner(p *Plugin, send func(*pb.ReconcileResponse)) *taskRunner {
	return &taskRunner{p: p, send: send, running: map[string]*runningTasks{}}
}

// start runs the tasks of controller; a no-op when they already run (StartTasks is idempotent).
func (r *taskRunner) start(controller string) {
	c := r.p.controllers[controller]
	if c == nil || len(c.tasks) == 0 {
		r.p.Log.Warn("StartTasks for a controller without background tasks", "controller", controller)
		return
	}
	r.mu.Lock()
	if r.closed || r.running[controller] != nil {
		r.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt := &runningTasks{cancel: cancel}
	for _, d := range c.tasks {
		rt.tasks = append(rt.tasks, &Task{Controller: controller, Name: d.name, send: r.send, ctx: ctx})
	}
	r.running[controller] = rt
	r.mu.Unlock()
	r.p.Log.Info("background tasks started", "controller", controller, "tasks", len(rt.tasks))
	for i, t := range rt.tasks {
		go r.run(ctx, t, c.tasks[i].fn)
	}
}

// stop cancels the tasks of controller ("": all); closing also refuses later starts.
func (r *taskRunner) stop(controller, reason string, closing bool) {
	r.mu.Lock()
	r.closed = r.closed || closing
	var stopped []*runningTasks
	for name, rt := range r.running {
		if controller == "" || name == controller {
			stopped = append(stopped, rt)
			delete(r.running, name)
		}
	}
	r.mu.Unlock()
	for _, rt := range stopped {
		for _, t := range rt.tasks {
			t.mu.Lock()
			t.stopReason = reason
			t.mu.Unlock()
		}
		rt.cancel()
	}
	if len(stopped) > 0 {
		if controller == "" {
			controller = "*"
		}
		r.p.Log.Info("background tasks stopped", "controller", controller, "reason", reason)
	}
}

func (r *taskRunner) status(t *Task, state pb.TaskState, restarts uint32, lastError string) {
	if len(lastError) > 1024 {
		lastError = lastError[:1024]
	}
	// A proto string must be UTF-8 (Marshal fails otherwise): the cut above, or the task's own
	// error text, may have broken that.
	lastError = strings.ToValidUTF8(lastError, "\uFFFD")
	r.send(&pb.ReconcileResponse{TaskStatus: &pb.TaskStatus{Controller: t.Controller, Task: t.Name,
		State: state, Restarts: restarts, LastError: lastError}})
}

// runOnce runs fn once; a panic becomes an error naming where it happened.
func runOnce(ctx context.Context, t *Task, fn TaskFunc) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("task panicked: %v%s", p, panicLocation(debug.Stack()))
		}
	}()
	return fn(ctx, t)
}

func (r *taskRunner) run(ctx context.Context, t *Task, fn TaskFunc) {
	backoff := r.p.TaskBackoff
	if backoff.Initial <= 0 {
		backoff = DefaultTaskBackoff
	}
	delay := backoff.Initial
	var restarts uint32
	lastError := "" // reported with every state: the last failure's message
	for ctx.Err() == nil {
		r.status(t, pb.TaskState_TASK_STATE_RUNNING, restarts, lastError)
		err := runOnce(ctx, t, fn)
		if ctx.Err() != nil {
			break
		}
		if err == nil {
			r.p.Log.Info("background task finished", "controller", t.Controller, "task", t.Name)
			r.status(t, pb.TaskState_TASK_STATE_FINISHED, restarts, lastError)
			return
		}
		restarts++
		lastError = err.Error()
		r.p.Log.Error("background task failed; restarting after backoff", "controller", t.Controller,
			"task", t.Name, "restarts", restarts, "backoff", delay.String(), "error", lastError)
		r.status(t, pb.TaskState_TASK_STATE_BACKOFF, restarts, lastError)
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
		case <-timer.C:
		}
		if delay *= 2; backoff.Max > 0 && delay > backoff.Max {
			delay = backoff.Max
		}
	}
	r.status(t, pb.TaskState_TASK_STATE_STOPPED, restarts, lastError)
}
