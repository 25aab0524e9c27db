package ctrlhost_test

import (
	"context"
	"fmt"

	ctrlhost "ctrlhost.dev/sdk/go"
	"ctrlhost.dev/sdk/go/ctrlhosttest"
)

var example = ctrlhost.Object{"apiVersion": "example.com/v1", "kind": "Shop",
	"metadata": map[string]any{"name": "shop", "namespace": "default", "uid": "3f1c", "generation": 4},
	"spec":     map[string]any{"frozen": true}}

// Steps of a chain share a PassContext: "config" says whether updates are allowed, and "web",
// which exists, is kept as it is when they are not.
func ExamplePassContext() {
	web := ctrlhost.Object{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "shop", "namespace": "default"},
		"spec":     map[string]any{"replicas": 1}}
	chain := (&ctrlhost.DependentChain{}).
		Add(ctrlhost.Dependent{Name: "config", APIVersion: "v1", Kind: "ConfigMap",
			OnPass: func(req *ctrlhost.Request, _, _ ctrlhost.Object, pc *ctrlhost.PassContext) error {
				frozen, _ := ctrlhost.Bool(req.Object, "spec.frozen")
				pc.SetFlag(ctrlhost.UpdateAllowed, !frozen)
				return nil
			}}).
		Add(ctrlhost.Dependent{Name: "web", APIVersion: "apps/v1", Kind: "Deployment",
			Desired: func(*ctrlhost.Request) (ctrlhost.Object, error) {
				return ctrlhost.Object{"spec": map[string]any{"replicas": 3}}, nil
			},
			OnPass: func(_ *ctrlhost.Request, _, current ctrlhost.Object, pc *ctrlhost.PassContext) error {
				if current != nil && !pc.Flag(ctrlhost.UpdateAllowed) {
					pc.CancelResource("updates are frozen")
				}
				return nil
			}})
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Owns("", "v1", "ConfigMap").Owns("apps", "v1", "Deployment").Reconcile(chain.Build(nil))
	out := must(ctrlhosttest.Run(c, example, ctrlhosttest.Children(web)))
	fmt.Println(out.DesiredOfKind("Deployment")[0]["spec"])
	fmt.Println(out.Conditions["DependentsReady"].Reason+":", out.Conditions["DependentsReady"].Message)
	// Output:
	// map[replicas:1]
	// Cancelled: skipped: web (updates are frozen); waiting for config
}

// A CrudResource keeps one ConfigMap per listed tenant: it creates the missing ones and prunes
// the ones no longer listed.
func ExampleCrudResource() {
	tenants := &ctrlhost.CrudResource{APIVersion: "v1", Kind: "ConfigMap",
		Desired: func(req *ctrlhost.Request) ([]ctrlhost.Object, error) {
			var list []ctrlhost.Object
			for _, t := range []string{"blue", "green"} {
				cm := ctrlhost.NewObject("v1", "ConfigMap", req.Name+"-"+t)
				cm["data"] = map[string]any{"tenant": t}
				list = append(list, cm)
			}
			return list, nil
		}}
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").
		Owns("", "v1", "ConfigMap", ctrlhost.DeleteAbsent()).Reconcile(tenants.Build(nil))
	old := ctrlhost.Object{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "shop-red", "namespace": "default"}}
	out := must(ctrlhosttest.Run(c, example, ctrlhosttest.Children(old)))
	for _, e := range out.Events {
		fmt.Println(e.Reason, e.Message)
	}
	// Output:
	// Created ConfigMap shop-blue
	// Created ConfigMap shop-green
	// Deleted ConfigMap default/shop-red
}

// Stage callbacks add a label to every ConfigMap the chain creates.
func ExampleStageCallbacks() {
	cbs := (&ctrlhost.StageCallbacks{}).On("v1", "ConfigMap", ctrlhost.PreCreate, "label",
		func(_ *ctrlhost.Request, stage ctrlhost.Stage, desired, _ ctrlhost.Object) error {
			desired["metadata"].(map[string]any)["labels"] = map[string]any{"created-at": string(stage)}
			return nil
		})
	chain := (&ctrlhost.DependentChain{}).WithCallbacks(cbs).
		Add(ctrlhost.Dependent{Name: "config", APIVersion: "v1", Kind: "ConfigMap",
			Desired: func(req *ctrlhost.Request) (ctrlhost.Object, error) {
				return ctrlhost.NewObject("v1", "ConfigMap", req.Name+"-config"), nil
			}})
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Owns("", "v1", "ConfigMap").Reconcile(chain.Build(nil))
	out := must(ctrlhosttest.Run(c, example))
	fmt.Println(ctrlhost.Lookup(out.Desired[0], "metadata.labels"))
	// Output:
	// map[created-at:pre-create]
}

// The standard operator status of an object whose children are not ready yet.
func ExampleSetOperatorStatus() {
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").
		Reconcile(ctrlhost.ReconcileFunc(func(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
			res := &ctrlhost.Result{}
			ctrlhost.SetOperatorStatus(req, res, ctrlhost.OperatorStatus{OperatorVersion: "1.4.0",
				ChildrenReady: false, Message: "waiting for web"})
			return res, nil
		}))
	out := must(ctrlhosttest.Run(c, example))
	fmt.Println(out.Status)
	for _, typ := range []string{"Available", "Progressing", "Degraded"} {
		fmt.Println(typ, out.Conditions[typ].Status, out.Conditions[typ].Reason)
	}
	// Output:
	// map[observedGeneration:4 operatorVersion:1.4.0 phase:Deploying targetVersion:1.4.0]
	// Available False Deploying
	// Progressing True Deploying
	// Degraded False AsExpected
}

// A Deployment whose pods roll when its configuration changes.
func ExampleBuildDeployment() {
	config := map[string]any{"greeting": "hello", "workers": 4}
	hash, err := ctrlhost.ConfigHash(config)
	if err != nil {
		panic(err)
	}
	d := ctrlhost.BuildDeployment(ctrlhost.Deployment{Name: "shop",
		Labels:         ctrlhost.CommonLabels("shop", "shop"),
		Selector:       ctrlhost.SelectorLabels("shop", "shop"),
		Replicas:       ctrlhost.Replicas(2),
		Containers:     []ctrlhost.Object{{"name": "web", "image": "nginx:1.25"}},
		PodAnnotations: map[string]string{ctrlhost.ConfigHashAnnotation: hash}})
	fmt.Println(ctrlhost.Lookup(d, "spec.selector.matchLabels"))
	fmt.Println(ctrlhost.Lookup(d, "spec.template.metadata.annotations"))
	// Output:
	// map[app.kubernetes.io/instance:shop app.kubernetes.io/name:shop]
	// map[ctrlhost.dev/config-hash:71c7c1ae6c504f43]
}
