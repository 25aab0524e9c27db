// The conformance "scenario" controller on the Go SDK (see ../scenario.cc for the outcomes).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
)

func configMap(name string) ctrlhost.Object {
	cm := ctrlhost.NewObject("v1", "ConfigMap", name)
	cm["data"] = map[string]any{"v": "new"}
	return cm
}

func specIs(req *ctrlhost.Request, field string, value any) bool {
	v, ok := req.Spec()[field]
	return ok && v == value
}

func chain(ctx context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
	deps := &ctrlhost.DependentChain{}
	for _, dep := range []string{"a", "b", "c"} {
		dep := dep
		deps.Add(ctrlhost.Dependent{Name: dep, APIVersion: "v1", Kind: "ConfigMap",
			Desired: func(r *ctrlhost.Request) (ctrlhost.Object, error) {
				return configMap(r.Name + "-" + dep), nil
			},
			OnPass: func(r *ctrlhost.Request, _, current ctrlhost.Object, pc *ctrlhost.PassContext) error {
				pc.SetFlag("seen-"+dep, true)
				if dep == "a" {
					pc.SetFlag(ctrlhost.UpdateAllowed, specIs(r, "allowUpdates", true))
				}
				if specIs(r, "failStep", dep) {
					return ctrlhost.Terminal(errors.New("spec.failStep"))
				}
				if specIs(r, "cancelPass", dep) {
					pc.CancelPass("spec.cancelPass")
				}
				if specIs(r, "cancelResource", dep) {
					pc.CancelResource("spec.cancelResource")
				}
				if dep == "c" && current != nil && !pc.Flag(ctrlhost.UpdateAllowed) {
					pc.CancelResource("updates not allowed")
				}
				return nil
			}})
	}
	return deps.Build(func(_ *ctrlhost.Request, state ctrlhost.ChainState, res *ctrlhost.Result) {
		res.MergeStatus(map[string]any{"phase": "Done",
			"cancelled": append([]string{}, state.Cancelled...), "flags": state.Flags,
			"allReady": state.AllReady(), "failedAt": state.FailedAt})
	})(ctx, req)
}

func callbacks(ctx context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
	log := []string{}
	label := func(_ *ctrlhost.Request, stage ctrlhost.Stage, desired, _ ctrlhost.Object) error {
		if desired != nil {
			meta := desired["metadata"].(map[string]any)
			labels, ok := meta["labels"].(map[string]any)
			if !ok {
				labels = map[string]any{}
				meta["labels"] = labels
			}
			labels["stage"] = string(stage)
		}
		return nil
	}
	record := func(_ *ctrlhost.Request, stage ctrlhost.Stage, desired, current ctrlhost.Object) error {
		obj := desired
		if obj == nil {
			obj = current
		}
		name, _ := ctrlhost.String(obj, "metadata.name")
		log = append(log, fmt.Sprintf("%s:%s", stage, name))
		return nil
	}
	guard := func(r *ctrlhost.Request, stage ctrlhost.Stage, _, _ ctrlhost.Object) error {
		if specIs(r, "failAt", string(stage)) {
			return ctrlhost.Terminal(errors.New("spec.failAt"))
		}
		return nil
	}
	cbs := &ctrlhost.StageCallbacks{}
	for _, stage := range ctrlhost.Stages {
		cbs.On("v1", "ConfigMap", stage, "label", label).
			On("v1", "ConfigMap", stage, "record", record).
			On("v1", "ConfigMap", stage, "guard", guard)
	}
	deps := (&ctrlhost.DependentChain{}).WithCallbacks(cbs)
	for _, dep := range []string{"a", "b", "c"} {
		dep := dep
		d := ctrlhost.Dependent{Name: dep, APIVersion: "v1", Kind: "ConfigMap",
			Desired: func(r *ctrlhost.Request) (ctrlhost.Object, error) {
				return configMap(r.Name + "-" + dep), nil
			}}
		if dep == "c" {
			d.When = func(*ctrlhost.Request) bool { return false }
		}
		deps.Add(d)
	}
	return deps.Build(func(_ *ctrlhost.Request, _ ctrlhost.ChainState, res *ctrlhost.Result) {
		res.MergeStatus(map[string]any{"phase": "Done", "log": log})
	})(ctx, req)
}

func operatorStatus(req *ctrlhost.Request) *ctrlhost.Result {
	stringAt := func(field, fallback string) string {
		if v, ok := req.Spec()[field].(string); ok {
			return v
		}
		return fallback
	}
	version := stringAt("version", "1.0.0")
	res := &ctrlhost.Result{}
	res.Desire(ctrlhost.NewObject("v1", "ConfigMap", req.Name))["data"] = map[string]any{"version": version}
	child := req.Child("ConfigMap", req.Name)
	have, _ := ctrlhost.String(child, "data.version")
	ready := child != nil && have == version
	message := ""
	if !ready {
		message = "waiting for ConfigMap " + req.Name
	}
	ctrlhost.SetOperatorStatus(req, res, ctrlhost.OperatorStatus{OperatorVersion: "1.0.0",
		TargetVersion: version, ChildrenReady: ready, Message: message,
		Failure: stringAt("failure", "")})
	return res
}

func builders(req *ctrlhost.Request) (*ctrlhost.Result, error) {
	name := req.Name
	labels := ctrlhost.CommonLabels("scenario", name)
	selector := ctrlhost.SelectorLabels("scenario", name)
	config, ok := req.Spec()["config"]
	if !ok {
		config = map[string]any{}
	}
	hash, err := ctrlhost.ConfigHash(config)
	if err != nil {
		return nil, ctrlhost.Terminal(err)
	}
	rules := []ctrlhost.Object{
		ctrlhost.PolicyRule([]string{""}, []string{"configmaps"}, []string{"get", "list"}),
		ctrlhost.PolicyRule([]string{"apps"}, []string{"deployments"}, []string{"watch"}),
	}
	subjects := []ctrlhost.Object{ctrlhost.ServiceAccountSubject(name, req.Namespace)}
	meta := func(suffix string) ctrlhost.Meta { return ctrlhost.Meta{Name: name + suffix, Labels: labels} }
	configMeta := meta("-config")
	configMeta.Owner = ctrlhost.OwnerReference(req)
	built := []any{
		ctrlhost.BuildDeployment(ctrlhost.Deployment{Name: name, Labels: labels, Selector: selector,
			Replicas:       ctrlhost.Replicas(2),
			Containers:     []ctrlhost.Object{{"name": "main", "image": "busybox"}},
			PodAnnotations: map[string]string{ctrlhost.ConfigHashAnnotation: hash},
			PodSpec:        ctrlhost.Object{"serviceAccountName": name}}),
		ctrlhost.BuildService(ctrlhost.Service{Name: name, Labels: labels, Selector: selector,
			Ports: []ctrlhost.ServicePort{{Name: "http", Port: 80, TargetPort: "http"},
				{Name: "dns", Port: 53, TargetPort: 53, Protocol: "UDP"}},
			Type: "ClusterIP"}),
		ctrlhost.BuildConfigMap(configMeta, map[string]string{"a": "b"}),
		ctrlhost.BuildSecret(meta("-secret"), map[string]string{"token": "t"}, "Opaque"),
		ctrlhost.BuildServiceAccount(meta("")),
		ctrlhost.BuildRole(meta(""), rules),
		ctrlhost.BuildRoleBinding(meta(""), name, subjects),
		ctrlhost.BuildClusterRole(meta("-cluster"), rules),
		ctrlhost.BuildClusterRoleBinding(meta("-cluster"), name+"-cluster", subjects),
	}
	res := &ctrlhost.Result{}
	res.MergeStatus(map[string]any{"phase": "Done", "configHash": hash, "built": built})
	return res, nil
}

func reconcileAs(set string) ctrlhost.ResourceSetFunc {
	return func(_ context.Context, req *ctrlhost.Request, setContext map[string]any) (*ctrlhost.Result, error) {
		res := &ctrlhost.Result{}
		res.Desire(ctrlhost.NewObject("v1", "ConfigMap", req.Name))["data"] = map[string]any{"set": set}
		res.MergeStatus(map[string]any{"phase": "Done", "set": set, "context": setContext})
		return res, nil
	}
}

var router = ctrlhost.NewResourceRouter().
	MustAdd(ctrlhost.ResourceSet{Name: "v1", Reconcile: reconcileAs("v1"),
		Handles: func(r *ctrlhost.Request) bool { v := r.Labels()["version"]; return v == "" || v == "v1" }}).
	MustAdd(ctrlhost.ResourceSet{Name: "v2", Reconcile: reconcileAs("v2"),
		Handles: func(r *ctrlhost.Request) bool { return r.Labels()["version"] == "v2" },
		InitContext: func(*ctrlhost.Request) map[string]any {
			return map[string]any{"replicas": 2, "set": "v2"}
		}}).
	MustAdd(ctrlhost.ResourceSet{Name: "canary", Reconcile: reconcileAs("canary"),
		Handles: func(r *ctrlhost.Request) bool { return r.Labels()["track"] == "canary" }})

func route(ctx context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
	skippedBefore := router.Skipped()
	res, err := router.Route(ctx, req)
	if err == nil && router.Skipped() > skippedBefore {
		res.MergeStatus(map[string]any{"skipped": router.Skipped()})
	}
	return res, err
}

func reconcile(ctx context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
	if !req.Exists() || req.Deleting() {
		return nil, nil
	}
	outcome, ok := ctrlhost.String(req.Object, "spec.outcome")
	if !ok {
		outcome = "ok"
	}
	res := &ctrlhost.Result{}
	switch outcome {
	case "chain":
		return chain(ctx, req)
	case "callbacks":
		return callbacks(ctx, req)
	case "status":
		return operatorStatus(req), nil
	case "builders":
		return builders(req)
	case "route":
		return route(ctx, req)
	case "task":
		return task(req), nil
	case "requeue":
		res.MergeStatus(map[string]any{"phase": "Waiting"})
		res.RequeueAfter = 30 * time.Second
	case "retryable":
		return nil, errors.New("the scenario asks for a retry")
	case "retry-after":
		return nil, ctrlhost.WithReason(ctrlhost.RetryAfter(errors.New("the scenario's quota is used up"), 45*time.Second), "QuotaExceeded")
	case "terminal":
		res.Event(ctrlhost.EventWarning, "GivingUp", "the scenario asks to stop")
		res.SetError(true, "the scenario asks to stop")
	case "forbidden":
		res.Desire(ctrlhost.NewObject("v1", "Secret", req.Name))["stringData"] = map[string]any{"token": "x"}
	case "labels":
		// Default labels: a child of another kind gets the primary's, one of its own kind none.
		res.Desire(ctrlhost.NewObject("v1", "ConfigMap", req.Name))["data"] = map[string]any{"k": "v"}
		res.Desire(ctrlhost.NewObject("e2e.ctrlhost.dev/v1", "Scenario", req.Name+"-child"))["spec"] = map[string]any{"outcome": "ok"}
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

var taskFile = os.Getenv("SCENARIO_TASK_FILE")

// readTokens: "namespace/name" -> token, from the lines "namespace/name token".
func readTokens() map[string]string {
	tokens := map[string]string{}
	data, err := os.ReadFile(taskFile)
	if err != nil {
		return tokens
	}
	for _, line := range strings.Split(string(data), "\n") {
		if fields := strings.Fields(line); len(fields) == 2 {
			tokens[fields[0]] = fields[1]
		}
	}
	return tokens
}

func task(req *ctrlhost.Request) *ctrlhost.Result {
	token := readTokens()[req.Namespace+"/"+req.Name]
	res := &ctrlhost.Result{}
	res.Desire(ctrlhost.NewObject("v1", "ConfigMap", req.Name))["data"] = map[string]any{"token": token}
	res.MergeStatus(map[string]any{"phase": "Done", "token": token})
	return res
}

var (
	pokeMu   sync.Mutex
	pokeRuns int
)

func poke(ctx context.Context, t *ctrlhost.Task) error {
	pokeMu.Lock()
	pokeRuns++
	first := pokeRuns == 1
	pokeMu.Unlock()
	if first {
		return errors.New("scenario task fails on its first run")
	}
	seen := map[string]string{}
	for {
		tokens := readTokens()
		keys := make([]string, 0, len(tokens))
		for key := range tokens {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		for _, key := range keys {
			if old, ok := seen[key]; ok && old == tokens[key] {
				continue
			}
			seen[key] = tokens[key]
			namespace, name, _ := strings.Cut(key, "/")
			if err := t.Enqueue(namespace, name); err != nil {
				fmt.Fprintf(os.Stderr, "scenario task: %v\n", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func main() {
	scenario := ctrlhost.NewController("scenario").For("e2e.ctrlhost.dev", "v1", "Scenario").
		Owns("", "v1", "ConfigMap").Owns("e2e.ctrlhost.dev", "v1", "Scenario").Reconcile(reconcile)
	if taskFile != "" {
		scenario.BackgroundTask("poke", poke)
	}
	ctrlhost.NewPlugin("scenario", "1.0.0", scenario).Main()
}
