// The no-op plugin of the sdk-dispatch benchmark on the Go SDK: controller "echo" answers every
// request with the status {"seen": NAME}, the same answer as the C++ baseline's.
//
// NOOP_GO_CPUPROFILE=FILE writes a CPU profile (runtime/pprof) of the whole run to FILE, read
// with `go tool pprof BINARY FILE` (bench/sdk_dispatch/README.md, "Profiling the Go SDK").
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"

	ctrlhost "ctrlhost.dev/sdk/go"
)

func main() {
	echo := ctrlhost.NewController("echo").For("example.com", "v1", "WebApp").MaxConcurrent(64).
		Reconcile(func(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
			return &ctrlhost.Result{Status: map[string]any{"seen": req.Name}}, nil
		})
	plugin := ctrlhost.NewPlugin("noop-go", "0.1.0", echo)
	path := os.Getenv("NOOP_GO_CPUPROFILE")
	if path == "" {
		plugin.Main()
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: NOOP_GO_CPUPROFILE: %v\n", err)
		os.Exit(2)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "error: NOOP_GO_CPUPROFILE: %v\n", err)
		os.Exit(2)
	}
	code := plugin.Run() // returns after the drain that SIGTERM starts
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "error: NOOP_GO_CPUPROFILE: %v\n", err)
		code = 1
	}
	os.Exit(code)
}
