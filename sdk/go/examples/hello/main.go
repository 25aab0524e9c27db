// The minimal plugin of sdk/go/README.md: copies every ConfigMap labelled hello=true to
// "<name>-hello" in the same namespace and records an event (a ConfigMap has no status, so no
// condition: the host would refuse one).
package main

import (
	"context"

	ctrlhost "ctrlhost.dev/sdk/go"
)

func reconcile(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
	if !req.Exists() || req.Deleting() {
		return nil, nil // nothing to do for the gone
	}
	res := &ctrlhost.Result{}
	cp := res.Desire(ctrlhost.NewObject("v1", "ConfigMap", req.Name+"-hello"))
	// Labels of its own: a ConfigMap child of a ConfigMap gets none of the primary's by default
	// (with hello=true the copy would be a primary too); these say what it is.
	cp["metadata"].(map[string]any)["labels"] = map[string]any{"hello-copy": "true"}
	cp["data"] = ctrlhost.Map(req.Object, "data")
	res.Event(ctrlhost.EventNormal, "Copied", "copy is up to date")
	return res, nil
}

func main() {
	hello := ctrlhost.NewController("hello").For("", "v1", "ConfigMap").
		LabelSelector("hello=true").Owns("", "v1", "ConfigMap").Reconcile(reconcile)
	ctrlhost.NewPlugin("hello", "1.0.0", hello).Main()
}
