package ctrlhost_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	"ctrlhost.dev/sdk/go/ctrlhosttest"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
)

func noop(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) { return nil, nil }

var shop = ctrlhost.Object{"apiVersion": "example.com/v1", "kind": "Shop",
	"metadata": map[string]any{"name": "shop", "namespace": "prod", "uid": "u1"}}

func TestSpecRefusesBadDeclarations(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *ctrlhost.Controller
		want string
	}{
		{"name", ctrlhost.NewController("Shop").For("g", "v1", "K").Reconcile(noop), "not a lowercase RFC 1123 label"},
		{"primary", ctrlhost.NewController("shop").Reconcile(noop), "For() is required"},
		{"function", ctrlhost.NewController("shop").For("g", "v1", "K"), "no reconcile function"},
		{"finalizer", ctrlhost.NewController("shop").For("g", "v1", "K").Finalizer("cleanup").Reconcile(noop), "qualified name"},
		{"mapping", ctrlhost.NewController("shop").For("g", "v1", "K").Watches("", "v1", "Secret", nil, ctrlhost.WatchOptions{}).Reconcile(noop), "a mapping is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.c.Spec(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Spec error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestSpecAndRequiredCapabilities(t *testing.T) {
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").
		Owns("", "v1", "Service", ctrlhost.DeleteAbsent()).
		Watches("", "v1", "ConfigMap", ctrlhost.ByFieldPath("spec.configMapName"), ctrlhost.WatchOptions{IncludeInRequests: true}).
		Schedule("*/5 * * * *", "").MaxConcurrent(4).Finalizer("example.com/cleanup").Reconcile(noop)
	spec, err := c.Spec()
	if err != nil {
		t.Fatal(err)
	}
	if !spec.RequestContents.Children || !spec.RequestContents.RelatedObjects || spec.MaxConcurrentReconciles != 4 ||
		spec.Watches[0].GetFieldPath().GetPrimaryFieldPath() != "spec.configMapName" || !spec.Owns[0].DeleteAbsent {
		t.Errorf("spec = %v", spec)
	}
	need, _ := c.RequiredCapabilities()
	want := []pb.Capability{pb.Capability_CAPABILITY_CHILDREN, pb.Capability_CAPABILITY_RELATED_OBJECTS,
		pb.Capability_CAPABILITY_SERVER_SIDE_APPLY, pb.Capability_CAPABILITY_SCHEDULES}
	if got := need.Sorted(); len(got) != len(want) || got[0] != want[0] || got[3] != want[3] {
		t.Errorf("required = %v, want %v", got, want)
	}
	off := false
	c.RequestContents(ctrlhost.RequestContents{Children: &off})
	if spec, _ := c.Spec(); spec.RequestContents.Children {
		t.Error("children turned off explicitly are still on")
	}
}

func TestInvokeTurnsFailuresIntoErrorAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fn       ctrlhost.ReconcileFunc
		terminal bool
		want     string
	}{
		{"error", func(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) {
			return nil, errors.New("the database is down")
		}, false, "the database is down"},
		{"terminal", func(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) {
			return nil, ctrlhost.Terminal(errors.New("spec.image is required"))
		}, true, "spec.image is required"},
		{"panic", func(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) {
			var m map[string]int
			m["x"] = 1 // panics
			return nil, nil
		}, false, "reconcile panicked: assignment to entry in nil map at "},
		{"invalid result", func(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) {
			return &ctrlhost.Result{Events: []ctrlhost.Event{{Type: "Odd", Reason: "R"}}}, nil
		}, false, "invalid reconcile result: event type must be Normal or Warning"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Reconcile(tc.fn)
			out := ctrlhosttest.Reconcile(t, c, shop)
			if out.Error == nil || out.Error.Terminal != tc.terminal || !strings.Contains(out.Error.Message, tc.want) {
				t.Fatalf("error = %+v, want terminal=%v containing %q", out.Error, tc.terminal, tc.want)
			}
		})
	}
	// A reason and a retry-after survive wrapping with %w and reach the answer.
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Reconcile(
		func(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) {
			err := ctrlhost.WithReason(ctrlhost.RetryAfter(errors.New("bucket quota used up"), 45*time.Second), "QuotaExceeded")
			return nil, fmt.Errorf("uploading: %w", err)
		})
	out := ctrlhosttest.Reconcile(t, c, shop)
	if want := (ctrlhost.ResultError{Message: "uploading: bucket quota used up", Reason: "QuotaExceeded", RetryAfter: 45 * time.Second}); out.Error == nil || *out.Error != want {
		t.Errorf("error = %+v, want %+v", out.Error, want)
	}
	// Validated as the host does: a terminal error cannot say when to retry.
	c = ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Reconcile(
		func(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) {
			return nil, ctrlhost.Terminal(ctrlhost.RetryAfter(errors.New("bad spec"), time.Second))
		})
	out = ctrlhosttest.Reconcile(t, c, shop)
	if out.Error == nil || out.Error.Terminal || !strings.Contains(out.Error.Message, "invalid reconcile result: error RetryAfter is only allowed on a retryable error") {
		t.Errorf("terminal with retry-after answered %+v", out.Error)
	}
	c = ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Reconcile(noop)
	resp := c.Invoke(context.Background(), 3, &pb.ReconcileCall{Object: []byte("{")}, ctrlhost.AllCapabilities())
	if resp.GetError().GetKind() != pb.ErrorKind_ERROR_KIND_RETRYABLE || !strings.HasPrefix(resp.GetError().GetMessage(), "cannot read the request: ") || resp.RequestId != 3 {
		t.Errorf("malformed request answered %v", resp)
	}
}

func TestHandlers(t *testing.T) {
	var calls []string
	h := ctrlhost.Handlers{
		OnUpsert: func(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) {
			calls = append(calls, "upsert")
			return nil, nil
		},
		OnDelete: func(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
			calls = append(calls, "delete")
			if req.Exists() && req.Annotations()["fail"] == "yes" {
				return nil, errors.New("cleanup failed")
			}
			return nil, nil
		},
	}
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Reconcile(h.Reconcile)
	if out := ctrlhosttest.Reconcile(t, c, shop); out.Finalized || out.Error != nil {
		t.Errorf("upsert: %+v", out)
	}
	if out := ctrlhosttest.Reconcile(t, c, shop, ctrlhosttest.Finalizing()); !out.Finalized {
		t.Errorf("finalizing without error is finalized: %+v", out)
	}
	failing := ctrlhost.Object{"apiVersion": "example.com/v1", "kind": "Shop", "metadata": map[string]any{"name": "shop", "annotations": map[string]any{"fail": "yes"}}}
	if out := ctrlhosttest.Reconcile(t, c, failing, ctrlhosttest.Finalizing()); out.Finalized || out.Error == nil {
		t.Errorf("failed cleanup: %+v", out)
	}
	if out := ctrlhosttest.Reconcile(t, c, nil); out.Error != nil {
		t.Errorf("gone: %+v", out)
	}
	deleting := ctrlhost.Object{"apiVersion": "example.com/v1", "kind": "Shop", "metadata": map[string]any{"name": "shop", "deletionTimestamp": "2026-11-25T00:00:00Z"}}
	ctrlhosttest.Reconcile(t, c, deleting)
	if strings.Join(calls, ",") != "upsert,delete,delete,delete" {
		t.Errorf("calls = %v", calls)
	}
}

func TestDependentChainCreatesInOrderAndDeletesInReverse(t *testing.T) {
	wantCache := true
	chain := (&ctrlhost.DependentChain{}).
		Add(ctrlhost.Dependent{Name: "db", APIVersion: "apps/v1", Kind: "StatefulSet",
			Desired: func(req *ctrlhost.Request) (ctrlhost.Object, error) {
				return ctrlhost.Object{"metadata": map[string]any{"name": req.Name + "-db"}}, nil
			},
			Ready: func(cur ctrlhost.Object) bool { n, _ := ctrlhost.Int(cur, "status.readyReplicas"); return n >= 1 }}).
		Add(ctrlhost.Dependent{Name: "cache", APIVersion: "apps/v1", Kind: "Deployment",
			Desired: func(req *ctrlhost.Request) (ctrlhost.Object, error) {
				return ctrlhost.Object{"metadata": map[string]any{"name": req.Name + "-cache"}}, nil
			},
			When: func(*ctrlhost.Request) bool { return wantCache }}).
		Add(ctrlhost.Dependent{Name: "web", APIVersion: "apps/v1", Kind: "Deployment"})
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Owns("apps", "v1", "StatefulSet").Owns("apps", "v1", "Deployment").Reconcile(chain.Build(nil))

	out := ctrlhosttest.Reconcile(t, c, shop)
	if len(out.Desired) != 1 || out.Conditions["DependentsReady"].Message != "waiting for db, cache, web" {
		t.Fatalf("fresh: desired %v, condition %+v", out.Desired, out.Conditions)
	}
	db := ctrlhost.Object{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": map[string]any{"name": "shop-db"}, "status": map[string]any{"readyReplicas": 1}}
	cache := ctrlhost.Object{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "shop-cache"}}
	web := ctrlhost.Object{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "shop"}}
	out = ctrlhosttest.Reconcile(t, c, shop, ctrlhosttest.Children(db, cache, web))
	if len(out.Desired) != 3 || out.Conditions["DependentsReady"].Reason != "AllReady" {
		t.Fatalf("all present: desired %d, condition %+v", len(out.Desired), out.Conditions)
	}
	wantCache = false
	out = ctrlhosttest.Reconcile(t, c, shop, ctrlhosttest.Children(db, cache, web))
	if len(out.Desired) != 2 || out.Conditions["DependentsReady"].Message != "waiting for cache" {
		t.Fatalf("cache unwanted: desired %v, condition %+v", out.Desired, out.Conditions)
	}
}
