package ctrlhost_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	"ctrlhost.dev/sdk/go/ctrlhosttest"
)

// A controller declared and run once in process, as a unit test would.
func ExampleController() {
	greeter := ctrlhost.NewController("greeter").
		For("example.com", "v1", "Greeting").
		Owns("", "v1", "ConfigMap").
		Reconcile(func(ctx context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
			who, _ := ctrlhost.String(req.Object, "spec.name")
			if who == "" {
				return nil, ctrlhost.Terminal(errors.New("spec.name is required"))
			}
			res := &ctrlhost.Result{}
			cm := res.Desire(ctrlhost.NewObject("v1", "ConfigMap", req.Name+"-greeting"))
			cm["data"] = map[string]any{"text": "Hello, " + who + "!"}
			res.MergeStatus(map[string]any{"observedGeneration": req.Generation()})
			res.SetCondition("Ready", ctrlhost.ConditionTrue, "Greeted", "ConfigMap written")
			return res, nil
		})

	greeting := ctrlhost.Object{"apiVersion": "example.com/v1", "kind": "Greeting",
		"metadata": map[string]any{"name": "hi", "namespace": "default", "generation": 2},
		"spec":     map[string]any{"name": "world"}}
	out := must(ctrlhosttest.Run(greeter, greeting))
	fmt.Println(out.Desired[0]["data"], out.Desired[0]["metadata"])
	fmt.Println(out.Status, out.Conditions["Ready"].Reason)

	delete(greeting["spec"].(map[string]any), "name")
	out = must(ctrlhosttest.Run(greeter, greeting))
	fmt.Printf("terminal=%v %s\n", out.Error.Terminal, out.Error.Message)
	// Output:
	// map[text:Hello, world!] map[name:hi-greeting namespace:default]
	// map[observedGeneration:2] Greeted
	// terminal=true spec.name is required
}

// The upsert/delete style: OnDelete runs while finalizing and the finalizer is released when it
// succeeds.
func ExampleHandlers() {
	h := ctrlhost.Handlers{
		OnUpsert: func(context.Context, *ctrlhost.Request) (*ctrlhost.Result, error) {
			return &ctrlhost.Result{RequeueAfter: time.Minute}, nil
		},
		OnDelete: func(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
			res := &ctrlhost.Result{}
			res.Event(ctrlhost.EventNormal, "CleanedUp", "external record of "+req.Name+" removed")
			return res, nil
		},
	}
	c := ctrlhost.NewController("records").For("example.com", "v1", "Record").
		Finalizer("example.com/cleanup").Reconcile(h.Reconcile)
	obj := ctrlhost.Object{"apiVersion": "example.com/v1", "kind": "Record", "metadata": map[string]any{"name": "r1"}}
	fmt.Println(must(ctrlhosttest.Run(c, obj)).RequeueAfter)
	out := must(ctrlhosttest.Run(c, obj, ctrlhosttest.Finalizing()))
	fmt.Println(out.Finalized, out.Events[0].Message)
	// Output:
	// 1m0s
	// true external record of r1 removed
}

// A chain of dependents: the web Deployment waits until the database is ready.
func ExampleDependentChain() {
	chain := (&ctrlhost.DependentChain{}).
		Add(ctrlhost.Dependent{Name: "db", APIVersion: "apps/v1", Kind: "StatefulSet",
			Desired: func(req *ctrlhost.Request) (ctrlhost.Object, error) {
				return ctrlhost.Object{"metadata": map[string]any{"name": req.Name + "-db"}}, nil
			},
			Ready: func(cur ctrlhost.Object) bool {
				n, _ := ctrlhost.Int(cur, "status.readyReplicas")
				return n > 0
			}}).
		Add(ctrlhost.Dependent{Name: "web", APIVersion: "apps/v1", Kind: "Deployment"})
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").
		Owns("apps", "v1", "StatefulSet").Owns("apps", "v1", "Deployment").Reconcile(chain.Build(nil))
	shop := ctrlhost.Object{"apiVersion": "example.com/v1", "kind": "Shop", "metadata": map[string]any{"name": "shop"}}
	out := must(ctrlhosttest.Run(c, shop))
	fmt.Println(len(out.Desired), out.Conditions["DependentsReady"].Message)
	// Output:
	// 1 waiting for db, web
}

func must(out *ctrlhosttest.Outcome, err error) *ctrlhosttest.Outcome {
	if err != nil {
		panic(err)
	}
	return out
}
