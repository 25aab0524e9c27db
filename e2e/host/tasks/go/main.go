// The background-task e2e plugin on the Go SDK: the same behaviour as ../task_plugin.py (see it
// and ../../tasks_e2e_test.py), so one test checks both SDKs against the host.
package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
)

var (
	taskDir = os.Getenv("TASK_DIR")
	version = envOr("TASK_VERSION", "v1")

	mu    sync.Mutex
	poked = map[string]bool{} // guarded by mu: keys the task enqueued

	logMu sync.Mutex // serializes appends to the log file

	flakyMu   sync.Mutex
	flakyRuns int // guarded by flakyMu
)

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// logLine appends what a task does to $TASK_DIR/$TASK_VERSION.log.
func logLine(line string) {
	logMu.Lock()
	defer logMu.Unlock()
	f, err := os.OpenFile(filepath.Join(taskDir, version+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	f.WriteString(line + "\n")
}

func reconcile(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
	res := &ctrlhost.Result{}
	if !req.Exists() || req.Deleting() {
		return res, nil
	}
	mu.Lock()
	isPoked := poked[req.Namespace+"/"+req.Name]
	mu.Unlock()
	if isPoked {
		child := res.Desire(ctrlhost.NewObject("v1", "ConfigMap", req.Name+"-poked"))
		child["metadata"].(map[string]any)["labels"] = map[string]any{"tasks-e2e-child": "true"}
		child["data"] = map[string]any{"version": version}
	}
	return res, nil
}

func poll(ctx context.Context, task *ctrlhost.Task) error {
	logLine("started")
	seen := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			logLine("stopped: " + task.StopReason())
			return nil
		case <-time.After(100 * time.Millisecond):
		}
		data, err := os.ReadFile(filepath.Join(taskDir, "names"))
		if err != nil {
			continue
		}
		for _, key := range strings.Split(string(data), "\n") {
			key = strings.TrimSpace(key)
			if key == "" || seen[key] {
				continue
			}
			seen[key] = true
			namespace, name, _ := strings.Cut(key, "/")
			mu.Lock()
			poked[key] = true
			mu.Unlock()
			logLine("enqueue " + key)
			if err := task.Enqueue(namespace, name); err != nil {
				return err
			}
		}
	}
}

func flaky(ctx context.Context, _ *ctrlhost.Task) error {
	flakyMu.Lock()
	flakyRuns++
	first := flakyRuns == 1
	flakyMu.Unlock()
	if first {
		return errors.New("flaky task failed on its first run")
	}
	<-ctx.Done()
	return nil
}

func main() {
	poke := ctrlhost.NewController("poke").For("", "v1", "ConfigMap").LabelSelector("tasks-e2e=true").
		Owns("", "v1", "ConfigMap").Reconcile(reconcile).
		BackgroundTask("poll", poll).BackgroundTask("flaky", flaky)
	if n, err := strconv.ParseUint(os.Getenv("TASK_MAX_CONCURRENT"), 10, 32); err == nil {
		// Another Describe (the test's v2): the host replaces the controllers on the swap.
		poke.MaxConcurrent(uint32(n))
	}
	p := ctrlhost.NewPlugin("tasks", version, poke)
	p.TaskBackoff = ctrlhost.TaskBackoff{Initial: 200 * time.Millisecond, Max: time.Second}
	p.Main()
}
