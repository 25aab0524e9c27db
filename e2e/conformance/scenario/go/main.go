// The conformance "scenario" controller on the Go SDK (see ../scenario.cc for the outcomes).
package main

import (
	"context"
	"errors"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
)

func reconcile(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
	if !req.Exists() || req.Deleting() {
		return nil, nil
	}
	outcome, ok := ctrlhost.String(req.Object, "spec.outcome")
	if !ok {
		outcome = "ok"
	}
	res := &ctrlhost.Result{}
	switch outcome {
	case "requeue":
		res.MergeStatus(map[string]any{"phase": "Waiting"})
		res.RequeueAfter = 30 * time.Second
	case "retryable":
		return nil, errors.New("the scenario asks for a retry")
	case "terminal":
		res.Event(ctrlhost.EventWarning, "GivingUp", "the scenario asks to stop")
		res.SetError(true, "the scenario asks to stop")
	case "forbidden":
		res.Desire(ctrlhost.NewObject("v1", "Secret", req.Name))["stringData"] = map[string]any{"token": "x"}
	default:
		data, ok := ctrlhost.Lookup(req.Object, "spec.data").(map[string]any)
		if !ok {
			data = map[string]any{}
		}
		res.Desire(ctrlhost.NewObject("v1", "ConfigMap", req.Name))["data"] = data
		res.MergeStatus(map[string]any{"phase": "Done"})
	}
	return res, nil
}

func main() {
	scenario := ctrlhost.NewController("scenario").For("e2e.ctrlhost.dev", "v1", "Scenario").
		Owns("", "v1", "ConfigMap").Reconcile(reconcile)
	ctrlhost.NewPlugin("scenario", "1.0.0", scenario).Main()
}
