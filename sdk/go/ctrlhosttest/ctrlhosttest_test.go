package ctrlhosttest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	ctrlhost "ctrlhost.dev/sdk/go"
	"ctrlhost.dev/sdk/go/ctrlhosttest"
)

// First contact (a Go plugin's author): ctrlhosttest accepted what the live host refuses (a
// desired kind the controller does not own; only `ctrlhost test --check` caught it), handed the
// plugin children without an owner reference and ignored the label selector. It now judges a
// reconcile as the host does, with the host's messages.

// recorder is a testing.TB that keeps what Reconcile reports instead of failing this test.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func greeting(labels map[string]any) ctrlhost.Object {
	meta := map[string]any{"name": "hi", "namespace": "prod", "uid": "u-hi"}
	if labels != nil {
		meta["labels"] = labels
	}
	return ctrlhost.Object{"apiVersion": "example.com/v1", "kind": "Greeting", "metadata": meta,
		"spec": map[string]any{"name": "Ada"}}
}

func answer(fn func(req *ctrlhost.Request, res *ctrlhost.Result)) ctrlhost.ReconcileFunc {
	return func(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
		res := &ctrlhost.Result{}
		fn(req, res)
		return res, nil
	}
}

func TestRegressionADesiredKindTheControllerDoesNotOwnIsRefused(t *testing.T) {
	fn := answer(func(req *ctrlhost.Request, res *ctrlhost.Result) {
		res.Desire(ctrlhost.NewObject("v1", "ConfigMap", req.Name+"-greeting"))
		res.Desire(ctrlhost.NewObject("v1", "Secret", req.Name+"-token"))
	})
	c := ctrlhost.NewController("greeter").For("example.com", "v1", "Greeting").Owns("", "v1", "ConfigMap").
		Reconcile(fn)
	out, err := ctrlhosttest.Run(c, greeting(nil))
	if err != nil {
		t.Fatal(err)
	}
	if out.Refused == nil || out.Refused.Error() != "desired_objects[1]: kind v1 Secret is not owned by controller greeter" {
		t.Errorf("Refused = %v", out.Refused)
	}
	// Reconcile fails the test that runs it, and still returns the outcome.
	r := &recorder{TB: t}
	if out := ctrlhosttest.Reconcile(r, c, greeting(nil)); len(out.Desired) != 2 {
		t.Errorf("outcome %+v", out)
	}
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "the host would refuse this answer: desired_objects[1]: kind v1 Secret") {
		t.Errorf("reported %q", r.errors)
	}
	// Owned, and an OWNED patch of an unowned kind.
	owning := ctrlhost.NewController("greeter").For("example.com", "v1", "Greeting").
		Owns("", "v1", "ConfigMap").Owns("", "v1", "Secret").Reconcile(fn)
	if out := ctrlhosttest.Reconcile(t, owning, greeting(nil)); out.Refused != nil {
		t.Errorf("owned kinds refused: %v", out.Refused)
	}
	patching := ctrlhost.NewController("greeter").For("example.com", "v1", "Greeting").
		Reconcile(answer(func(req *ctrlhost.Request, res *ctrlhost.Result) {
			res.PatchOwned("apps/v1", "Deployment", "web", ctrlhost.MergePatch, map[string]any{}, "")
		}))
	if out, _ := ctrlhosttest.Run(patching, greeting(nil)); out == nil || out.Refused == nil ||
		out.Refused.Error() != "patches[0]: kind apps/v1 Deployment is not owned by controller greeter" {
		t.Errorf("owned patch: %+v", out)
	}
	// Outside the primary's namespace.
	elsewhere := ctrlhost.NewController("greeter").For("example.com", "v1", "Greeting").Owns("", "v1", "ConfigMap").
		Reconcile(answer(func(req *ctrlhost.Request, res *ctrlhost.Result) {
			cm := res.Desire(ctrlhost.NewObject("v1", "ConfigMap", "x"))
			cm["metadata"].(map[string]any)["namespace"] = "other"
		}))
	if out, _ := ctrlhosttest.Run(elsewhere, greeting(nil)); out == nil || out.Refused == nil ||
		out.Refused.Error() != `desired_objects[0]: namespace "other" is outside the primary's "prod"` {
		t.Errorf("other namespace: %+v", out)
	}
}

func TestRegressionAPrimaryOutsideTheLabelSelectorIsNeverReconciled(t *testing.T) {
	c := ctrlhost.NewController("greeter").For("example.com", "v1", "Greeting").
		LabelSelector("hello=true,tier in (a, b),!paused").Reconcile(answer(func(*ctrlhost.Request, *ctrlhost.Result) {}))
	for _, tc := range []struct {
		labels map[string]any
		ok     bool
	}{
		{map[string]any{"hello": "true", "tier": "a"}, true},
		{map[string]any{"hello": "true", "tier": "b", "other": "x"}, true},
		{nil, false},
		{map[string]any{"hello": "false", "tier": "a"}, false},
		{map[string]any{"hello": "true", "tier": "c"}, false},
		{map[string]any{"hello": "true", "tier": "a", "paused": ""}, false},
	} {
		_, err := ctrlhosttest.Run(c, greeting(tc.labels))
		if tc.ok != (err == nil) {
			t.Errorf("labels %v: %v", tc.labels, err)
		}
		if err != nil && !strings.Contains(err.Error(), `the host would not send this request: the object's labels`) {
			t.Errorf("labels %v: %v", tc.labels, err)
		}
	}
	// The gone primary's deletion notice carries no labels: nothing to judge.
	if _, err := ctrlhosttest.Run(c, nil); err != nil {
		t.Errorf("gone: %v", err)
	}
	ns := ctrlhost.NewController("greeter").For("example.com", "v1", "Greeting").Namespaces("dev").
		Reconcile(answer(func(*ctrlhost.Request, *ctrlhost.Result) {}))
	if _, err := ctrlhosttest.Run(ns, greeting(nil)); err == nil || !strings.Contains(err.Error(), `namespace "prod" is not one of controller greeter's namespaces [dev]`) {
		t.Errorf("namespaces: %v", err)
	}
}

func TestRegressionChildrenCarryTheHostsOwnerReference(t *testing.T) {
	var seen []string
	c := ctrlhost.NewController("greeter").For("example.com", "v1", "Greeting").Owns("", "v1", "ConfigMap").
		Reconcile(answer(func(req *ctrlhost.Request, res *ctrlhost.Result) {
			for _, child := range req.Children {
				ref := ctrlhost.Lookup(child.Object, "metadata.ownerReferences").([]any)[0].(map[string]any)
				seen = append(seen, fmt.Sprintf("%s:%v/%v/%v/%v", ctrlhost.Lookup(child.Object, "metadata.name"),
					ref["kind"], ref["name"], ref["uid"], ref["controller"]))
			}
			res.Desire(ctrlhost.NewObject("v1", "ConfigMap", req.Name+"-greeting"))
		}))
	child := ctrlhost.Object{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "hi-greeting", "namespace": "prod"}}
	out := ctrlhosttest.Reconcile(t, c, greeting(nil), ctrlhosttest.Children(child))
	if strings.Join(seen, ",") != "hi-greeting:Greeting/hi/u-hi/true" || out.Refused != nil {
		t.Errorf("children seen %v, refused %v", seen, out.Refused)
	}
	if _, ok := child["metadata"].(map[string]any)["ownerReferences"]; ok {
		t.Error("the caller's fixture was changed")
	}
	// A child of an unowned kind, or controlled by another object, is never passed by the host.
	secret := ctrlhost.Object{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "namespace": "prod"}}
	if _, err := ctrlhosttest.Run(c, greeting(nil), ctrlhosttest.Children(secret)); err == nil ||
		!strings.Contains(err.Error(), "child v1 Secret s: controller greeter does not own that kind") {
		t.Errorf("unowned child: %v", err)
	}
	foreign := ctrlhost.Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "hi-greeting",
		"namespace": "prod", "ownerReferences": []any{map[string]any{"apiVersion": "example.com/v1",
			"kind": "Greeting", "name": "other", "uid": "u-other", "controller": true}}}}
	if _, err := ctrlhosttest.Run(c, greeting(nil), ctrlhosttest.Children(foreign)); err == nil ||
		!strings.Contains(err.Error(), "child v1 ConfigMap hi-greeting: it is controlled by another object (uid u-other)") {
		t.Errorf("foreign child: %v", err)
	}
	// The same object as Existing: desiring it is refused as NotControlled, like the host.
	out, err := ctrlhosttest.Run(c, greeting(nil), ctrlhosttest.Existing(foreign))
	if err != nil || out.Refused == nil || out.Refused.Error() != "desired_objects[0]: ConfigMap prod/hi-greeting exists and is "+
		"controlled by another object (uid u-other); Greeting prod/hi does not adopt it (the protocol has no adoption): "+
		"delete it (Greeting prod/hi is reconciled again when it is gone) or rename the child" {
		t.Errorf("existing: %v %v", out, err)
	}
	handMade := ctrlhost.Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "hi-greeting", "namespace": "prod"}}
	if out, _ := ctrlhosttest.Run(c, greeting(nil), ctrlhosttest.Existing(handMade)); out == nil || out.Refused == nil ||
		!strings.Contains(out.Refused.Error(), "exists and has no controller") {
		t.Errorf("hand-made: %+v", out)
	}
}

func TestRegressionStatusOnAKindWithoutAStatusSubresourceIsRefused(t *testing.T) {
	hello := func(fn func(*ctrlhost.Result)) *ctrlhost.Controller {
		return ctrlhost.NewController("hello").For("", "v1", "ConfigMap").LabelSelector("hello=true").
			Owns("", "v1", "ConfigMap").Reconcile(answer(func(_ *ctrlhost.Request, res *ctrlhost.Result) { fn(res) }))
	}
	cm := ctrlhost.Object{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "hi", "namespace": "prod", "labels": map[string]any{"hello": "true"}}}
	for want, fn := range map[string]func(*ctrlhost.Result){
		"conditions: kind v1 ConfigMap has no status subresource, so it has no status to write; record the outcome with an event instead": func(res *ctrlhost.Result) {
			res.SetCondition("Ready", ctrlhost.ConditionTrue, "Copied", "")
		},
		"status: kind v1 ConfigMap has no status subresource": func(res *ctrlhost.Result) {
			res.MergeStatus(map[string]any{"phase": "Copied"})
		},
		"patches[0]: a PRIMARY_STATUS patch needs a status subresource": func(res *ctrlhost.Result) {
			res.PatchStatus(ctrlhost.MergePatch, map[string]any{"status": map[string]any{}}, "")
		},
	} {
		out, err := ctrlhosttest.Run(hello(fn), cm)
		if err != nil || out.Refused == nil || !strings.HasPrefix(out.Refused.Error(), want) {
			t.Errorf("%s: %v %v", want, out, err)
		}
	}
	out := ctrlhosttest.Reconcile(t, hello(func(res *ctrlhost.Result) {
		res.Event(ctrlhost.EventNormal, "Copied", "copy is up to date")
	}), cm)
	if len(out.Events) != 1 {
		t.Errorf("events %v", out.Events)
	}
}
