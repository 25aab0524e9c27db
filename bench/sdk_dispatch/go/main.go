// The no-op plugin of the sdk-dispatch benchmark on the Go SDK: controller "echo" answers every
// request with the status {"seen": NAME}, the same answer as the C++ baseline's.
package main

import (
	"context"

	ctrlhost "ctrlhost.dev/sdk/go"
)

func main() {
	echo := ctrlhost.NewController("echo").For("example.com", "v1", "WebApp").MaxConcurrent(64).
		Reconcile(func(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
			return &ctrlhost.Result{Status: map[string]any{"seen": req.Name}}, nil
		})
	ctrlhost.NewPlugin("noop-go", "0.1.0", echo).Main()
}
