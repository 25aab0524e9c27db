package ctrlhost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	ctrlhost "ctrlhost.dev/sdk/go"
	"ctrlhost.dev/sdk/go/ctrlhosttest"
)

// The issue-18 pieces of the controller model: PassContext steps, stage callbacks,
// CrudResource, the standard operator status and the resource builders.

func cm(name string, data map[string]any) ctrlhost.Object {
	o := ctrlhost.NewObject("v1", "ConfigMap", name)
	o["metadata"].(map[string]any)["namespace"] = "prod"
	if data != nil {
		o["data"] = data
	}
	return o
}

func desiredNames(out *ctrlhosttest.Outcome) []string {
	var names []string
	for _, d := range out.Desired {
		n, _ := ctrlhost.String(d, "metadata.name")
		names = append(names, n)
	}
	return names
}

// chainOf is a chain of ConfigMaps shop-<dep> whose step is step(dep).
func chainOf(step func(dep string) ctrlhost.StepFunc, deps ...string) *ctrlhost.DependentChain {
	c := &ctrlhost.DependentChain{}
	for _, dep := range deps {
		dep := dep
		c.Add(ctrlhost.Dependent{Name: dep, APIVersion: "v1", Kind: "ConfigMap",
			Desired: func(r *ctrlhost.Request) (ctrlhost.Object, error) {
				return cm(r.Name+"-"+dep, map[string]any{"v": "new"}), nil
			}, OnPass: step(dep)})
	}
	return c
}

func TestChainStepCancelsThePassAndLaterOnesAreKept(t *testing.T) {
	chain := chainOf(func(dep string) ctrlhost.StepFunc {
		return func(_ *ctrlhost.Request, _, _ ctrlhost.Object, pc *ctrlhost.PassContext) error {
			pc.SetFlag("seen-"+dep, true)
			if dep == "b" {
				pc.CancelPass("maintenance window")
				pc.CancelPass("second reason is ignored")
			}
			return nil
		}
	}, "a", "b", "c", "d")
	var state ctrlhost.ChainState
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Owns("", "v1", "ConfigMap").
		Reconcile(chain.Build(func(_ *ctrlhost.Request, s ctrlhost.ChainState, _ *ctrlhost.Result) { state = s }))
	out := ctrlhosttest.Reconcile(t, c, shop, ctrlhosttest.Children(
		cm("shop-a", map[string]any{"v": "old"}), cm("shop-c", map[string]any{"v": "old", "extra": "x"})))
	if got := desiredNames(out); !reflect.DeepEqual(got, []string{"shop-a", "shop-b", "shop-c"}) {
		t.Fatalf("desired %v: d does not exist and must not be created after the cancel", got)
	}
	if got := out.Desired[2]["data"]; !reflect.DeepEqual(got, map[string]any{"v": "old"}) {
		t.Errorf("c is kept as it is (frozen to the fields the pass sets): data %v", got)
	}
	if !reflect.DeepEqual(state.Cancelled, []string{"c", "d"}) || state.PassCancelledBy != "b" ||
		!reflect.DeepEqual(state.Flags, map[string]bool{"seen-a": true, "seen-b": true}) {
		t.Errorf("state %+v", state)
	}
	cond := out.Conditions["DependentsReady"]
	want := "b cancelled the pass: maintenance window; skipped: c, d; waiting for b"
	if cond.Reason != "Cancelled" || cond.Message != want {
		t.Errorf("condition %+v, want message %q", cond, want)
	}
}

func TestChainStepCancelsItselfAndFlagsReachLaterSteps(t *testing.T) {
	chain := chainOf(func(dep string) ctrlhost.StepFunc {
		return func(_ *ctrlhost.Request, desired, current ctrlhost.Object, pc *ctrlhost.PassContext) error {
			switch dep {
			case "a":
				pc.SetFlag(ctrlhost.UpdateAllowed, false)
			case "b":
				pc.CancelResource("not yet")
			case "c":
				if current != nil && !pc.Flag(ctrlhost.UpdateAllowed) {
					pc.CancelResource("updates not allowed")
				}
			case "d":
				desired["data"].(map[string]any)["step"] = "changed by the step"
			}
			return nil
		}
	}, "a", "b", "c", "d")
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Owns("", "v1", "ConfigMap").Reconcile(chain.Build(nil))
	out := ctrlhosttest.Reconcile(t, c, shop, ctrlhosttest.Children(
		cm("shop-a", nil), cm("shop-c", map[string]any{"v": "old"}), cm("shop-d", nil)))
	if got := desiredNames(out); !reflect.DeepEqual(got, []string{"shop-a", "shop-c", "shop-d"}) {
		t.Fatalf("desired %v (b cancelled itself and does not exist)", got)
	}
	if got := out.Desired[1]["data"]; !reflect.DeepEqual(got, map[string]any{"v": "old"}) {
		t.Errorf("c kept: %v", got)
	}
	if got, _ := ctrlhost.String(out.Desired[2], "data.step"); got != "changed by the step" {
		t.Errorf("a step's change of desired is answered: %v", out.Desired[2])
	}
	want := "skipped: b (not yet), c (updates not allowed)"
	if m := out.Conditions["DependentsReady"].Message; m != want {
		t.Errorf("message %q, want %q", m, want)
	}
}

func TestChainStepErrorFailsTheReconcile(t *testing.T) {
	chain := chainOf(func(dep string) ctrlhost.StepFunc {
		return func(*ctrlhost.Request, ctrlhost.Object, ctrlhost.Object, *ctrlhost.PassContext) error {
			if dep == "b" {
				return ctrlhost.Terminal(errors.New("bad spec"))
			}
			return nil
		}
	}, "a", "b")
	var seen *ctrlhost.ChainState
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Owns("", "v1", "ConfigMap").Reconcile(chain.Build(
		func(_ *ctrlhost.Request, state ctrlhost.ChainState, _ *ctrlhost.Result) { seen = &state }))
	out := ctrlhosttest.Reconcile(t, c, shop, ctrlhosttest.Children(cm("shop-a", nil)))
	if out.Error == nil || !out.Error.Terminal || out.Error.Message != "dependent b: bad spec" {
		t.Fatalf("error %+v", out.Error)
	}
	// The state after a failure is not ready (as in every SDK), though nothing was pending.
	if seen == nil || seen.FailedAt != "b" || seen.AllReady() || len(seen.Pending) != 0 {
		t.Fatalf("state %+v", seen)
	}
}

func TestStageCallbacksRunInOrderAndNameTheFailure(t *testing.T) {
	var log []string
	record := func(tag string) ctrlhost.StageCallback {
		return func(_ *ctrlhost.Request, stage ctrlhost.Stage, desired, current ctrlhost.Object) error {
			obj := desired
			if obj == nil {
				obj = current
			}
			name, _ := ctrlhost.String(obj, "metadata.name")
			log = append(log, fmt.Sprintf("%s %s:%s", tag, stage, name))
			if desired != nil && (stage == ctrlhost.PreCreate || stage == ctrlhost.PreUpdate) {
				desired["metadata"].(map[string]any)["labels"] = map[string]any{"stage": string(stage)}
			}
			if desired != nil && stage == ctrlhost.PostCreate {
				desired["data"] = "post-stage changes are not answered"
			}
			return nil
		}
	}
	failAt := ctrlhost.Stage("")
	cbs := &ctrlhost.StageCallbacks{}
	cbs.On("v1", "ConfigMap", ctrlhost.PreCreate, "first", record("1")).
		On("v1", "Secret", ctrlhost.PreCreate, "other-kind", record("never")).
		On("v1", "ConfigMap", ctrlhost.PreCreate, "second", record("2"))
	for _, stage := range ctrlhost.Stages {
		cbs.On("v1", "ConfigMap", stage, "guard", func(_ *ctrlhost.Request, stage ctrlhost.Stage, _, _ ctrlhost.Object) error {
			if stage == failAt {
				panic("boom")
			}
			return nil
		})
		if stage != ctrlhost.PreCreate {
			cbs.On("v1", "ConfigMap", stage, "rec", record("r"))
		}
	}
	chain := (&ctrlhost.DependentChain{}).WithCallbacks(cbs)
	for _, dep := range []string{"a", "b", "c"} {
		dep := dep
		d := ctrlhost.Dependent{Name: dep, APIVersion: "v1", Kind: "ConfigMap",
			Desired: func(r *ctrlhost.Request) (ctrlhost.Object, error) {
				return cm(r.Name+"-"+dep, map[string]any{"v": "new"}), nil
			}}
		if dep == "c" {
			d.When = func(*ctrlhost.Request) bool { return false }
		}
		chain.Add(d)
	}
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Owns("", "v1", "ConfigMap").Reconcile(chain.Build(nil))
	children := ctrlhosttest.Children(cm("shop-a", map[string]any{"v": "old"}), cm("shop-c", nil))
	out := ctrlhosttest.Reconcile(t, c, shop, children)
	want := []string{"r pre-update:shop-a", "r post-update:shop-a", "1 pre-create:shop-b",
		"2 pre-create:shop-b", "r post-create:shop-b", "r pre-delete:shop-c", "r post-delete:shop-c"}
	if !reflect.DeepEqual(log, want) || out.Error != nil {
		t.Fatalf("log %q, error %+v; want %q", log, out.Error, want)
	}
	if got := desiredNames(out); !reflect.DeepEqual(got, []string{"shop-a", "shop-b"}) {
		t.Fatalf("desired %v", got)
	}
	if l, _ := ctrlhost.String(out.Desired[1], "metadata.labels.stage"); l != "pre-create" || out.Desired[1]["data"] == "post-stage changes are not answered" {
		t.Errorf("pre-create changes answered, post-create ones not: %v", out.Desired[1])
	}

	failAt = ctrlhost.PreDelete
	out = ctrlhosttest.Reconcile(t, c, shop, children)
	if out.Error == nil || out.Error.Terminal || out.Error.Message != "dependent c: callback guard at pre-delete: panicked: boom" {
		t.Fatalf("error %+v", out.Error)
	}

	bad := (&ctrlhost.StageCallbacks{}).On("v1", "ConfigMap", "pre-apply", "typo", record("x"))
	if err := bad.Run(nil, ctrlhost.PreCreate, "v1", "ConfigMap", nil, nil); err == nil ||
		!ctrlhost.IsTerminal(err) || !strings.Contains(err.Error(), `unknown stage "pre-apply"`) {
		t.Fatalf("unknown stage: %v", err)
	}
}

func TestCrudResourcePlansCreateUpdateUnchangedRemove(t *testing.T) {
	var steps []string
	crud := &ctrlhost.CrudResource{APIVersion: "v1", Kind: "ConfigMap",
		Desired: func(r *ctrlhost.Request) ([]ctrlhost.Object, error) {
			return []ctrlhost.Object{
				{"metadata": map[string]any{"name": "new"}, "data": map[string]any{"n": 1}},
				{"metadata": map[string]any{"name": "same"}, "data": map[string]any{"n": 2}},
				{"metadata": map[string]any{"name": "changed"}, "data": map[string]any{"n": 3}},
				{"metadata": map[string]any{"name": "frozen"}, "data": map[string]any{"n": 4}},
				{"metadata": map[string]any{"name": "late"}, "data": map[string]any{"n": 5}},
			}, nil
		},
		OnPass: func(_ *ctrlhost.Request, desired, current ctrlhost.Object, pc *ctrlhost.PassContext) error {
			name, _ := ctrlhost.String(desired, "metadata.name")
			steps = append(steps, name)
			if name == "frozen" {
				pc.CancelResource("frozen by policy")
				pc.CancelPass("stop after frozen")
			}
			return nil
		}}
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").
		Owns("", "v1", "ConfigMap", ctrlhost.DeleteAbsent()).Reconcile(crud.Build(nil))
	out := ctrlhosttest.Reconcile(t, c, shop, ctrlhosttest.Children(
		cm("same", map[string]any{"n": 2, "extra": "kept"}), cm("changed", map[string]any{"n": 0}),
		cm("frozen", map[string]any{"n": 0}), cm("zombie", nil), cm("old", nil)))
	if !reflect.DeepEqual(steps, []string{"new", "changed", "frozen"}) {
		t.Errorf("steps ran for %v (not for unchanged objects, not after the cancelled pass)", steps)
	}
	if got := desiredNames(out); !reflect.DeepEqual(got, []string{"new", "changed", "same", "frozen"}) {
		t.Fatalf("desired %v (creates, updates, unchanged)", got)
	}
	if n, _ := ctrlhost.Int(out.Desired[3], "data.n"); n != 0 {
		t.Errorf("frozen keeps its current data: %v", out.Desired[3])
	}
	var events []string
	for _, e := range out.Events {
		events = append(events, e.Reason+" "+e.Message)
	}
	want := []string{"Created ConfigMap new", "Updated ConfigMap changed", "Deleted ConfigMap prod/old",
		"Deleted ConfigMap prod/zombie", "Skipped ConfigMap frozen: frozen by policy",
		"Skipped ConfigMap late: pass cancelled: stop after frozen"}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events\n%q\nwant\n%q", events, want)
	}

	plan, err := crud.Plan(mustRequest(t, shop, cm("same", map[string]any{"n": json.Number("2")})))
	if err != nil || len(plan.Unchanged) != 1 || plan.Unchanged[0]["metadata"].(map[string]any)["name"] != "same" {
		t.Errorf("a json.Number 2 equals the int 2: plan %+v, %v", plan, err)
	}
}

func mustRequest(t *testing.T, obj ctrlhost.Object, children ...ctrlhost.Object) *ctrlhost.Request {
	t.Helper()
	req, err := ctrlhost.ParseCall(ctrlhosttest.Call("shop", obj, ctrlhosttest.Children(children...)))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestCrudResourceRefusesBadDesiredLists(t *testing.T) {
	for _, tc := range []struct {
		name string
		list []ctrlhost.Object
		want string
	}{
		{"no name", []ctrlhost.Object{{"data": map[string]any{}}}, "a desired ConfigMap has no name"},
		{"duplicate", []ctrlhost.Object{cm("x", nil), {"metadata": map[string]any{"name": "x"}}},
			"two desired ConfigMap objects are named prod/x"},
		{"nil", []ctrlhost.Object{nil}, "a desired object is nil"},
	} {
		crud := &ctrlhost.CrudResource{APIVersion: "v1", Kind: "ConfigMap",
			Desired: func(*ctrlhost.Request) ([]ctrlhost.Object, error) { return tc.list, nil }}
		c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Reconcile(crud.Build(nil))
		out := ctrlhosttest.Reconcile(t, c, shop)
		if out.Error == nil || !out.Error.Terminal || out.Error.Message != tc.want {
			t.Errorf("%s: error %+v, want terminal %q", tc.name, out.Error, tc.want)
		}
	}
}

func withStatus(status map[string]any, generation int) ctrlhost.Object {
	return ctrlhost.Object{"apiVersion": "example.com/v1", "kind": "Shop",
		"metadata": map[string]any{"name": "shop", "namespace": "prod", "generation": generation},
		"status":   status}
}

func TestOperatorStatusPhases(t *testing.T) {
	type cond struct{ status, reason string }
	run := func(obj ctrlhost.Object, in ctrlhost.OperatorStatus) (map[string]any, map[string]cond) {
		c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").
			Reconcile(func(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
				res := &ctrlhost.Result{}
				ctrlhost.SetOperatorStatus(req, res, in)
				return res, nil
			})
		out := ctrlhosttest.Reconcile(t, c, obj)
		conds := map[string]cond{}
		for typ, c := range out.Conditions {
			conds[typ] = cond{string(c.Status), c.Reason}
		}
		return out.Status, conds
	}
	status, conds := run(withStatus(nil, 1), ctrlhost.OperatorStatus{OperatorVersion: "1.0.0"})
	if status["phase"] != "Deploying" || status["targetVersion"] != "1.0.0" || status["observedVersion"] != nil ||
		conds["Available"] != (cond{"False", "Deploying"}) || conds["Reconciling"] != (cond{"True", "Deploying"}) {
		t.Errorf("deploying: %v %v", status, conds)
	}
	status, conds = run(withStatus(nil, 3), ctrlhost.OperatorStatus{OperatorVersion: "1.0.0", ChildrenReady: true})
	if status["phase"] != "Deployed" || status["observedVersion"] != "1.0.0" || status["observedGeneration"] != json.Number("3") ||
		conds["Available"] != (cond{"True", "AsExpected"}) || conds["Ready"] != (cond{"True", "AsExpected"}) {
		t.Errorf("deployed: %v %v", status, conds)
	}
	previous := map[string]any{"observedVersion": "1.0.0",
		"conditions": []any{map[string]any{"type": "Available", "status": "True"}}}
	status, conds = run(withStatus(previous, 2), ctrlhost.OperatorStatus{OperatorVersion: "2.0.0", TargetVersion: "2.0.0"})
	if status["phase"] != "Upgrading" || conds["Available"] != (cond{"True", "PreviousVersionAvailable"}) ||
		conds["Degraded"] != (cond{"False", "AsExpected"}) {
		t.Errorf("upgrading: %v %v", status, conds)
	}
	status, conds = run(withStatus(nil, 2), ctrlhost.OperatorStatus{OperatorVersion: "1.0.0", Failure: "backend refuses"})
	if status["phase"] != "Error" || conds["Degraded"] != (cond{"True", "Failed"}) || conds["Stalled"] != (cond{"True", "Failed"}) ||
		conds["Available"] != (cond{"False", "NotReady"}) {
		t.Errorf("error: %v %v", status, conds)
	}
	deleting := withStatus(nil, 2)
	deleting["metadata"].(map[string]any)["deletionTimestamp"] = "2026-01-01T00:00:00Z"
	status, conds = run(deleting, ctrlhost.OperatorStatus{OperatorVersion: "1.0.0", ChildrenReady: true})
	if status["phase"] != "Deleting" || conds["Available"] != (cond{"False", "Deleting"}) {
		t.Errorf("deleting: %v %v", status, conds)
	}
}

func TestConfigHashIsTheSameInEveryLanguage(t *testing.T) {
	// The reference values come from sdk/python's builders.config_hash on the same value.
	config := map[string]any{"10": "x", "9": "y", "é": "z", "～": "v", "😀": "w", "B": "u",
		"a": "say \"hi\"\n\x01\x7f", "list": []any{json.Number("1"), true, nil, 2.0,
			json.Number("12345678901234567890")}}
	text, err := ctrlhost.CanonicalJSON(config)
	want := "{\"10\":\"x\",\"9\":\"y\",\"B\":\"u\",\"a\":\"say \\\"hi\\\"\\n\\u0001\x7f\"," +
		"\"list\":[1,true,null,2,12345678901234567890],\"é\":\"z\",\"～\":\"v\",\"😀\":\"w\"}"
	if err != nil || text != want {
		t.Fatalf("canonical JSON %s (%v)\nwant %s", text, err, want)
	}
	if h, err := ctrlhost.ConfigHash(config); err != nil || h != "9546df7d67343b7b" {
		t.Errorf("hash %s %v", h, err)
	}
	if h, _ := ctrlhost.ConfigHash(map[string]string{}); h != "9bf65e00c699fdaf" {
		t.Errorf("hash of {} %s", h)
	}
	for _, bad := range []any{2.5, json.Number("1e300"), json.Number("0.5"), float64(1 << 60), []any{map[string]any{"x": 1.5}}} {
		if _, err := ctrlhost.ConfigHash(bad); err == nil || !strings.Contains(err.Error(), "is not an integer") {
			t.Errorf("ConfigHash(%v) = %v, want an error", bad, err)
		}
	}
	deep := any("leaf")
	for i := 0; i < 70; i++ {
		deep = []any{deep}
	}
	if _, err := ctrlhost.ConfigHash(deep); err == nil || !strings.Contains(err.Error(), "deeper than 64") {
		t.Errorf("deep: %v", err)
	}
}

func TestBuildersOutput(t *testing.T) {
	labels := ctrlhost.CommonLabels("web", "shop")
	d := ctrlhost.BuildDeployment(ctrlhost.Deployment{Name: "shop", Labels: labels,
		Selector: ctrlhost.SelectorLabels("web", "shop")})
	got, _ := json.Marshal(d)
	want := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"app.kubernetes.io/instance":"shop",` +
		`"app.kubernetes.io/managed-by":"ctrlhost","app.kubernetes.io/name":"web"},"name":"shop"},"spec":{"replicas":1,` +
		`"selector":{"matchLabels":{"app.kubernetes.io/instance":"shop","app.kubernetes.io/name":"web"}},"template":{` +
		`"metadata":{"labels":{"app.kubernetes.io/instance":"shop","app.kubernetes.io/managed-by":"ctrlhost",` +
		`"app.kubernetes.io/name":"web"}},"spec":{"containers":[]}}}}`
	if string(got) != want {
		t.Errorf("deployment\n%s\nwant\n%s", got, want)
	}
	s := ctrlhost.BuildService(ctrlhost.Service{Name: "shop", Ports: []ctrlhost.ServicePort{{Port: 80}}})
	got, _ = json.Marshal(s)
	if string(got) != `{"apiVersion":"v1","kind":"Service","metadata":{"name":"shop"},"spec":{"ports":[{"port":80,"protocol":"TCP"}]}}` {
		t.Errorf("service %s", got)
	}
	rb := ctrlhost.BuildClusterRoleBinding(ctrlhost.Meta{Name: "x", Namespace: "ignored"}, "admin", nil)
	got, _ = json.Marshal(rb)
	if string(got) != `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"x"},`+
		`"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"admin"},"subjects":[]}` {
		t.Errorf("cluster role binding %s", got)
	}
}

func TestFreezeOntoAndIsSubset(t *testing.T) {
	desired := ctrlhost.Object{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "prod", "labels": map[string]any{"x": "1"}},
		"data":     map[string]any{"v": "new", "only-desired": "y"}}
	current := ctrlhost.Object{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "prod", "uid": "u"},
		"data":     map[string]any{"v": "old", "other": "z"}}
	frozen := ctrlhost.FreezeOnto(desired, current)
	want := ctrlhost.Object{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "prod"}, "data": map[string]any{"v": "old"}}
	if !reflect.DeepEqual(frozen, want) {
		t.Errorf("frozen %v", frozen)
	}
	if !ctrlhost.IsSubset(map[string]any{"n": 2, "l": []string{"a"}}, map[string]any{"n": json.Number("2.0"), "l": []any{"a"}, "x": 1}) {
		t.Error("numbers compare by value, Go slices as JSON")
	}
	if ctrlhost.IsSubset(map[string]any{"l": []any{"a"}}, map[string]any{"l": []any{"a", "b"}}) {
		t.Error("arrays compare whole")
	}
}
