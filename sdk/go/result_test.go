package ctrlhost_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
)

func primaryRequest(t *testing.T, finalizing bool) *ctrlhost.Request {
	t.Helper()
	req, err := ctrlhost.ParseCall(&pb.ReconcileCall{Name: "shop", Namespace: "prod", Finalizing: finalizing,
		Object: []byte(`{"apiVersion":"example.com/v1","kind":"Shop","metadata":{"name":"shop","namespace":"prod","labels":{"team":"a"}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestToResponseRefusesWhatTheHostRefuses(t *testing.T) {
	gone, _ := ctrlhost.ParseCall(&pb.ReconcileCall{Name: "shop"})
	noSSA := ctrlhost.AllCapabilities()
	delete(noSSA, pb.Capability_CAPABILITY_SERVER_SIDE_APPLY)
	noConditions := ctrlhost.AllCapabilities()
	delete(noConditions, pb.Capability_CAPABILITY_CONDITIONS)
	for _, tc := range []struct {
		name string
		res  ctrlhost.Result
		req  *ctrlhost.Request
		caps ctrlhost.CapabilitySet
		want string
	}{
		{"desired for a gone primary", ctrlhost.Result{Desired: []ctrlhost.Object{ctrlhost.NewObject("v1", "ConfigMap", "x")}}, gone, nil, "the primary is gone"},
		{"status for a gone primary", ctrlhost.Result{Status: map[string]any{}}, gone, nil, "the primary is gone"},
		{"finalized when not finalizing", ctrlhost.Result{Finalized: true}, nil, nil, "not finalizing"},
		{"finalized with an error", ctrlhost.Result{Finalized: true, Err: &ctrlhost.ResultError{Message: "x"}}, primaryRequest(t, true), nil, "together with an error"},
		{"negative requeue", ctrlhost.Result{RequeueAfter: -time.Second}, nil, nil, "negative"},
		{"desired without kind", ctrlhost.Result{Desired: []ctrlhost.Object{{"apiVersion": "v1"}}}, nil, nil, "desired object 0 needs apiVersion and kind"},
		{"desired with bad metadata", ctrlhost.Result{Desired: []ctrlhost.Object{{"apiVersion": "v1", "kind": "K", "metadata": 3}}}, nil, nil, "metadata that is not an object"},
		{"desired with empty name", ctrlhost.Result{Desired: []ctrlhost.Object{{"apiVersion": "v1", "kind": "K", "metadata": map[string]any{"name": ""}}}}, nil, nil, "has no name"},
		{"desired not JSON", ctrlhost.Result{Desired: []ctrlhost.Object{{"apiVersion": "v1", "kind": "K", "x": func() {}}}}, nil, nil, "cannot be written as JSON"},
		{"desired without SSA", ctrlhost.Result{Desired: []ctrlhost.Object{ctrlhost.NewObject("v1", "K", "")}}, nil, noSSA, "CAPABILITY_SERVER_SIDE_APPLY"},
		{"json patch not a list", ctrlhost.Result{Patches: []ctrlhost.Patch{{Target: pb.PatchTarget_PATCH_TARGET_PRIMARY, Type: ctrlhost.JSONPatch, Patch: map[string]any{}}}}, nil, nil, "array of operations"},
		{"merge patch not an object", ctrlhost.Result{Patches: []ctrlhost.Patch{{Target: pb.PatchTarget_PATCH_TARGET_PRIMARY, Type: ctrlhost.MergePatch, Patch: []any{}}}}, nil, nil, "must be a JSON object"},
		{"owned patch without name", ctrlhost.Result{Patches: []ctrlhost.Patch{{Target: pb.PatchTarget_PATCH_TARGET_OWNED, Patch: map[string]any{}}}}, nil, nil, "needs apiVersion, kind, name"},
		{"patch without target", ctrlhost.Result{Patches: []ctrlhost.Patch{{Patch: map[string]any{}}}}, nil, nil, "is not one of"},
		{"condition reason", ctrlhost.Result{Conditions: []ctrlhost.Condition{{Type: "Ready", Status: ctrlhost.ConditionTrue, Reason: "not camel"}}}, nil, nil, "is not CamelCase"},
		{"condition status", ctrlhost.Result{Conditions: []ctrlhost.Condition{{Type: "Ready", Status: "Yes", Reason: "R"}}}, nil, nil, "True, False or Unknown"},
		{"condition type", ctrlhost.Result{Conditions: []ctrlhost.Condition{{Status: ctrlhost.ConditionTrue, Reason: "R"}}}, nil, nil, "without type"},
		{"condition without capability", ctrlhost.Result{Conditions: []ctrlhost.Condition{{Type: "Ready", Status: ctrlhost.ConditionTrue, Reason: "R"}}}, nil, noConditions, "CAPABILITY_CONDITIONS"},
		{"event type", ctrlhost.Result{Events: []ctrlhost.Event{{Type: "Info", Reason: "R"}}}, nil, nil, "Normal or Warning"},
		{"event reason", ctrlhost.Result{Events: []ctrlhost.Event{{Type: ctrlhost.EventNormal}}}, nil, nil, "without reason"},
		{"error reason", ctrlhost.Result{Err: &ctrlhost.ResultError{Reason: "quota exceeded"}}, nil, nil, `error reason "quota exceeded" must be CamelCase`},
		{"error reason too long", ctrlhost.Result{Err: &ctrlhost.ResultError{Reason: strings.Repeat("A", 129)}}, nil, nil, "at most 128 characters"},
		{"negative retry after", ctrlhost.Result{Err: &ctrlhost.ResultError{RetryAfter: -time.Second}}, nil, nil, "RetryAfter is negative"},
		{"terminal retry after", ctrlhost.Result{Err: &ctrlhost.ResultError{Terminal: true, RetryAfter: time.Second}}, nil, nil, "only allowed on a retryable error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			if req == nil {
				req = primaryRequest(t, false)
			}
			caps := tc.caps
			if caps == nil {
				caps = ctrlhost.AllCapabilities()
			}
			_, err := tc.res.ToResponse(req, 1, caps)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ToResponse error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// First contact (a Go plugin's author): a label-selected ConfigMap controller that owns
// ConfigMaps gave its children the primary's labels by default, so each child matched the
// selector and became a primary with a child of its own. Objects of the primary's own kind (any
// version) get no default labels; other kinds still do. The same in every SDK (conformance).
func TestRegressionChildrenOfThePrimarysKindGetNoDefaultLabels(t *testing.T) {
	req, err := ctrlhost.ParseCall(&pb.ReconcileCall{Controller: "hello", Namespace: "prod", Name: "cm",
		Object: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"prod","labels":{"hello":"true"}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	res := &ctrlhost.Result{}
	res.Desire(ctrlhost.NewObject("v1", "ConfigMap", "cm-hello"))
	res.Desire(ctrlhost.NewObject("v1", "Secret", "cm-secret"))
	explicit := res.Desire(ctrlhost.NewObject("v1", "ConfigMap", "cm-explicit"))
	explicit["metadata"].(map[string]any)["labels"] = map[string]any{"hello-copy": "true"}
	resp, err := res.ToResponse(req, 1, ctrlhost.AllCapabilities())
	if err != nil {
		t.Fatal(err)
	}
	var child, secret, kept map[string]any
	json.Unmarshal(resp.DesiredObjects[0], &child)
	json.Unmarshal(resp.DesiredObjects[1], &secret)
	json.Unmarshal(resp.DesiredObjects[2], &kept)
	if got, _ := json.Marshal(child["metadata"]); string(got) != `{"name":"cm-hello","namespace":"prod"}` {
		t.Errorf("a ConfigMap child of a ConfigMap: %s", got)
	}
	if got, _ := json.Marshal(secret["metadata"]); string(got) != `{"labels":{"hello":"true"},"name":"cm-secret","namespace":"prod"}` {
		t.Errorf("a Secret child of a ConfigMap: %s", got)
	}
	if got, _ := json.Marshal(kept["metadata"]); string(got) != `{"labels":{"hello-copy":"true"},"name":"cm-explicit","namespace":"prod"}` {
		t.Errorf("explicit labels: %s", got)
	}
}

func TestToResponseDefaultsDesiredObjectsFromThePrimary(t *testing.T) {
	res := &ctrlhost.Result{RequeueAfter: 1500 * time.Millisecond}
	res.Desire(ctrlhost.NewObject("v1", "ConfigMap", ""))
	res.Desire(ctrlhost.Object{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "svc", "labels": map[string]any{}}})
	res.Desire(ctrlhost.NewObject("example.com/v1", "Shop", "shop")) // the primary: no labels added
	res.MergeStatus(map[string]any{"a": map[string]any{"b": 1}})
	res.MergeStatus(map[string]any{"a": map[string]any{"c": 2}})
	res.SetCondition("Ready", ctrlhost.ConditionFalse, "Waiting", "")
	res.SetCondition("Ready", ctrlhost.ConditionTrue, "Done", "ok")
	resp, err := res.ToResponse(primaryRequest(t, false), 9, ctrlhost.AllCapabilities())
	if err != nil {
		t.Fatal(err)
	}
	var cm, svc, primary map[string]any
	json.Unmarshal(resp.DesiredObjects[0], &cm)
	json.Unmarshal(resp.DesiredObjects[1], &svc)
	json.Unmarshal(resp.DesiredObjects[2], &primary)
	if got, _ := json.Marshal(cm["metadata"]); string(got) != `{"labels":{"team":"a"},"name":"shop","namespace":"prod"}` {
		t.Errorf("defaulted metadata = %s", got)
	}
	if got, _ := json.Marshal(svc["metadata"]); string(got) != `{"labels":{},"name":"svc","namespace":"prod"}` {
		t.Errorf("explicit labels kept: %s", got)
	}
	if _, ok := primary["metadata"].(map[string]any)["labels"]; ok {
		t.Error("the primary got the primary's labels")
	}
	if string(resp.Status) != `{"a":{"b":1,"c":2}}` || len(resp.Conditions) != 1 || resp.Conditions[0].Reason != "Done" {
		t.Errorf("status %s, conditions %v", resp.Status, resp.Conditions)
	}
	if resp.RequestId != 9 || resp.RequeueAfter.AsDuration() != 1500*time.Millisecond {
		t.Errorf("request id %d, requeue %v", resp.RequestId, resp.RequeueAfter)
	}
}

func TestResultMerge(t *testing.T) {
	a := &ctrlhost.Result{RequeueAfter: time.Minute, Finalized: true}
	a.SetCondition("Ready", ctrlhost.ConditionFalse, "A", "")
	b := &ctrlhost.Result{RequeueAfter: time.Second, Err: &ctrlhost.ResultError{Message: "b"}}
	b.SetCondition("Ready", ctrlhost.ConditionTrue, "B", "")
	b.Event(ctrlhost.EventNormal, "E", "")
	a.Merge(b)
	if a.RequeueAfter != time.Second || a.Err.Message != "b" || a.Finalized || len(a.Conditions) != 1 ||
		a.Conditions[0].Reason != "B" || len(a.Events) != 1 {
		t.Errorf("merged = %+v", a)
	}
}

func TestTerminal(t *testing.T) {
	if ctrlhost.Terminal(nil) != nil {
		t.Error("Terminal(nil) != nil")
	}
	err := ctrlhost.Terminal(context.Canceled)
	if !ctrlhost.IsTerminal(err) || ctrlhost.IsTerminal(context.Canceled) || err.Error() != "context canceled" {
		t.Errorf("IsTerminal: %v", err)
	}
}
