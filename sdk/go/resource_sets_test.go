package ctrlhost_test

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"

	ctrlhost "ctrlhost.dev/sdk/go"
)

// The same cases as sdk/cpp resource_sets_test and sdk/python tests/resource_sets_test.py.

func appRequest(labels map[string]any) *ctrlhost.Request {
	return &ctrlhost.Request{Namespace: "n", Name: "a", Object: ctrlhost.Object{
		"apiVersion": "example.com/v1", "kind": "App",
		"metadata": map[string]any{"name": "a", "namespace": "n", "labels": labels}}}
}

func reconcileAs(_ context.Context, _ *ctrlhost.Request, c map[string]any) (*ctrlhost.Result, error) {
	res := &ctrlhost.Result{}
	res.MergeStatus(map[string]any{"context": c})
	return res, nil
}

func testRouter() *ctrlhost.ResourceRouter {
	return ctrlhost.NewResourceRouter().
		MustAdd(ctrlhost.ResourceSet{Name: "v1", Reconcile: reconcileAs,
			Handles: func(r *ctrlhost.Request) bool { return r.Labels()["version"] != "v2" }}).
		MustAdd(ctrlhost.ResourceSet{Name: "v2", Reconcile: reconcileAs,
			Handles: func(r *ctrlhost.Request) bool { return r.Labels()["version"] == "v2" },
			InitContext: func(r *ctrlhost.Request) map[string]any {
				return map[string]any{"set": "v2", "name": r.Name}
			}}).
		MustAdd(ctrlhost.ResourceSet{Name: "canary", Reconcile: reconcileAs,
			Handles: func(r *ctrlhost.Request) bool { return r.Labels()["track"] == "canary" }})
}

func TestResourceRouterRunsExactlyOneSetWithItsContext(t *testing.T) {
	router := testRouter()
	res, err := router.Route(context.Background(), appRequest(map[string]any{}))
	if err != nil || !reflect.DeepEqual(res.Status["context"], map[string]any{}) {
		t.Fatalf("v1: %v, %v", res, err)
	}
	res, err = router.Route(context.Background(), appRequest(map[string]any{"version": "v2"}))
	if want := map[string]any{"set": "v2", "name": "a"}; err != nil || !reflect.DeepEqual(res.Status["context"], want) {
		t.Fatalf("v2: status %v, err %v, want context %v", res.Status, err, want)
	}
	if n := router.Skipped(); n != 0 {
		t.Fatalf("Skipped = %d, want 0", n)
	}
}

func TestResourceRouterSeveralSetsAreATerminalErrorNamingThem(t *testing.T) {
	res, err := testRouter().Route(context.Background(), appRequest(map[string]any{"track": "canary"}))
	if err != nil {
		t.Fatal(err)
	}
	message := `the object matches 2 resource sets: "v1", "canary"; exactly one must handle it`
	if res.Err == nil || !res.Err.Terminal || res.Err.Message != message {
		t.Fatalf("Err = %+v, want terminal %q", res.Err, message)
	}
	if want := []ctrlhost.Condition{{Type: "Reconciled", Status: ctrlhost.ConditionFalse,
		Reason: "AmbiguousRoute", Message: message}}; !reflect.DeepEqual(res.Conditions, want) {
		t.Fatalf("Conditions = %+v, want %+v", res.Conditions, want)
	}
	if want := []ctrlhost.Event{{Type: ctrlhost.EventWarning, Reason: "AmbiguousRoute",
		Message: message}}; !reflect.DeepEqual(res.Events, want) {
		t.Fatalf("Events = %+v, want %+v", res.Events, want)
	}
	if res.Status != nil {
		t.Fatalf("no set may run, status = %v", res.Status)
	}
}

func TestResourceRouterNoSetIsSkippedAndCountedGoneIsNot(t *testing.T) {
	var logs bytes.Buffer
	router := ctrlhost.NewResourceRouter().MustAdd(ctrlhost.ResourceSet{Name: "v2",
		Handles: func(r *ctrlhost.Request) bool { return r.Labels()["version"] == "v2" },
		Reconcile: func(context.Context, *ctrlhost.Request, map[string]any) (*ctrlhost.Result, error) {
			t.Error("a set that does not handle the object ran")
			return nil, nil
		}})
	router.Log = ctrlhost.NewLogger(&logs, ctrlhost.LevelDebug)
	res, err := router.Route(context.Background(), appRequest(map[string]any{"version": "v3"}))
	if err != nil || res.Err != nil || res.Status != nil {
		t.Fatalf("skipped object answered %+v, %v", res, err)
	}
	if n := router.Skipped(); n != 1 {
		t.Fatalf("Skipped = %d, want 1", n)
	}
	if !strings.Contains(logs.String(), "no resource set handles the object: skipped") ||
		!strings.Contains(logs.String(), "key=n/a") {
		t.Fatalf("log = %q", logs.String())
	}
	res, err = router.Route(context.Background(), &ctrlhost.Request{Namespace: "n", Name: "gone"})
	if err != nil || res.Err != nil || router.Skipped() != 1 {
		t.Fatalf("gone object: %+v, %v, skipped %d", res, err, router.Skipped())
	}
}

func TestResourceRouterRefusesBadSets(t *testing.T) {
	router := ctrlhost.NewResourceRouter()
	always := func(*ctrlhost.Request) bool { return true }
	for _, tc := range []struct {
		set  ctrlhost.ResourceSet
		want string
	}{
		{ctrlhost.ResourceSet{Handles: always, Reconcile: reconcileAs}, "a resource set needs a name"},
		{ctrlhost.ResourceSet{Name: "x", Reconcile: reconcileAs}, `resource set "x" needs handles and reconcile`},
		{ctrlhost.ResourceSet{Name: "x", Handles: always}, `resource set "x" needs handles and reconcile`},
	} {
		if err := router.Add(tc.set); err == nil || err.Error() != tc.want {
			t.Errorf("Add(%q) = %v, want %q", tc.set.Name, err, tc.want)
		}
	}
	if err := router.Add(ctrlhost.ResourceSet{Name: "x", Handles: always, Reconcile: reconcileAs}); err != nil {
		t.Fatal(err)
	}
	if err := router.Add(ctrlhost.ResourceSet{Name: "x", Handles: always, Reconcile: reconcileAs}); err == nil ||
		err.Error() != `resource set "x" is already defined` {
		t.Fatalf("duplicate: %v", err)
	}
}

func TestResourceRouterCountsConcurrentSkips(t *testing.T) {
	router := ctrlhost.NewResourceRouter()
	router.Log = ctrlhost.NewLogger(&bytes.Buffer{}, ctrlhost.LevelInfo)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				router.Route(context.Background(), appRequest(nil))
			}
		}()
	}
	wg.Wait()
	if n := router.Skipped(); n != 400 {
		t.Fatalf("Skipped = %d, want 400", n)
	}
}
