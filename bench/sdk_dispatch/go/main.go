// The no-op plugin of the sdk-dispatch benchmark on the Go SDK: controller "echo" answers every
// request with the status {"seen": NAME}, the same answer as the C++ baseline's.
//
// NOOP_GO_CPUPROFILE=FILE writes a CPU profile (runtime/pprof) of the whole run to FILE, read
// with `go tool pprof BINARY FILE` (bench/sdk_dispatch/README.md, "Profiling the Go SDK").
// NOOP_GO_CPUSTATS=1 prints, when the plugin stops, the reconciles answered and the process's
// CPU time (user + system) per reconcile: a figure the machine's load moves far less than
// reconciles/s.
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
)

func main() {
	var answered atomic.Int64
	echo := ctrlhost.NewController("echo").For("example.com", "v1", "WebApp").MaxConcurrent(64).
		Reconcile(func(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
			answered.Add(1)
			return &ctrlhost.Result{Status: map[string]any{"seen": req.Name}}, nil
		})
	plugin := ctrlhost.NewPlugin("noop-go", "0.1.0", echo)
	var profile *os.File
	if path := os.Getenv("NOOP_GO_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "error: NOOP_GO_CPUPROFILE: %v\n", err)
			os.Exit(2)
		}
		profile = f
	}
	code := plugin.Run() // returns after the drain that SIGTERM starts
	if profile != nil {
		pprof.StopCPUProfile()
		if err := profile.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "error: NOOP_GO_CPUPROFILE: %v\n", err)
			code = 1
		}
	}
	if os.Getenv("NOOP_GO_CPUSTATS") != "" {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
			cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			n := answered.Load()
			perReconcile := 0.0
			if n > 0 {
				perReconcile = float64(cpu.Microseconds()) / float64(n)
			}
			fmt.Fprintf(os.Stderr, "noop-go: %d reconciles, CPU %v, %.1f us CPU per reconcile\n",
				n, cpu.Round(time.Millisecond), perReconcile)
		}
	}
	os.Exit(code)
}
