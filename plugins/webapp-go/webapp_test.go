// webapp-go through the SDK's in-process harness: the cases of plugins/webapp/webapp_test.cc
// (and plugins/webapp-py/webapp_test.py). The whole answers are compared with the C++ plugin's
// in e2e/conformance.
package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	"ctrlhost.dev/sdk/go/ctrlhosttest"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
)

// sample is plugins/webapp/testdata/webapp.yaml.
func sample() ctrlhost.Object {
	return ctrlhost.Object{
		"apiVersion": "apps.ctrlhost.dev/v1alpha1", "kind": "WebApp",
		"metadata": map[string]any{"name": "shop", "namespace": "default", "generation": 3,
			"uid": "0b6c2d9e-4a51-4f0e-9a7e-5b1f3c2d1a00"},
		"spec": map[string]any{"image": "nginx:1.25", "replicas": 2, "port": 8080,
			"env": map[string]any{"LOG_LEVEL": "info"}, "config": map[string]any{"GREETING": "hello"}},
	}
}

func setup(t *testing.T) (RecordStore, *ctrlhost.Controller) {
	records := RecordStore{Dir: filepath.Join(t.TempDir(), "records")}
	return records, NewController(records)
}

func desired(t *testing.T, out *ctrlhosttest.Outcome, kind, name string) ctrlhost.Object {
	t.Helper()
	for _, d := range out.DesiredOfKind(kind) {
		if n, _ := ctrlhost.String(d, "metadata.name"); n == name {
			return d
		}
	}
	t.Fatalf("no desired %s %s in %v", kind, name, out.Desired)
	return nil
}

func TestSpecDeclaresOwnsAndFinalizer(t *testing.T) {
	_, c := setup(t)
	spec, err := c.Spec()
	if err != nil {
		t.Fatal(err)
	}
	var owns []string
	for _, o := range spec.Owns {
		owns = append(owns, o.Kind.Kind)
	}
	if spec.Primary.Kind != "WebApp" || strings.Join(owns, ",") != "Deployment,Service,ConfigMap" ||
		spec.Finalizer != "apps.ctrlhost.dev/external-record" || !spec.RequestContents.Children ||
		spec.MaxConcurrentReconciles != 4 {
		t.Errorf("spec = %v", spec)
	}
}

func TestCreatesChildrenAndReportsProgress(t *testing.T) {
	_, c := setup(t)
	out := ctrlhosttest.Reconcile(t, c, sample())
	if out.Error != nil {
		t.Fatal(out.Error)
	}
	cm := desired(t, out, "ConfigMap", "shop-config")
	if d := ctrlhost.StringMap(cm, "data"); !reflect.DeepEqual(d, map[string]string{"GREETING": "hello"}) {
		t.Errorf("config data = %v", d)
	}
	dep := desired(t, out, "Deployment", "shop")
	if r, _ := ctrlhost.Int(dep, "spec.replicas"); r != 2 {
		t.Errorf("replicas = %d", r)
	}
	containers := ctrlhost.Lookup(dep, "spec.template.spec.containers").([]any)
	c0 := containers[0].(map[string]any)
	if c0["image"] != "nginx:1.25" || len(c0["env"].([]any)) != 1 {
		t.Errorf("container = %v", c0)
	}
	svc := desired(t, out, "Service", "shop")
	port := ctrlhost.Lookup(svc, "spec.ports").([]any)[0].(map[string]any)
	if p, _ := ctrlhost.Int(port, "port"); p != 8080 || port["protocol"] != "TCP" {
		t.Errorf("service port = %v", port)
	}
	if url, _ := ctrlhost.String(out.Status, "url"); url != "http://shop.default.svc:8080" {
		t.Errorf("url = %q", url)
	}
	if r := out.Conditions["Ready"]; r.Status != ctrlhost.ConditionFalse || r.Reason != "ReplicasNotReady" || r.Message != "0/2 replicas ready" {
		t.Errorf("Ready = %+v", r)
	}
}

func TestReadyOnceTheDeploymentIsAndStableAcrossRounds(t *testing.T) {
	_, c := setup(t)
	first := ctrlhosttest.Reconcile(t, c, sample())
	second := ctrlhosttest.Reconcile(t, c, sample(), ctrlhosttest.Children(first.Desired...))
	if !reflect.DeepEqual(first.Desired, second.Desired) {
		t.Error("level-based: a second round answers differently")
	}
	dep := desired(t, first, "Deployment", "shop")
	dep["status"] = map[string]any{"readyReplicas": 2}
	out := ctrlhosttest.Reconcile(t, c, sample(), ctrlhosttest.Children(first.Desired...))
	if r, _ := ctrlhost.Int(out.Status, "readyReplicas"); r != 2 {
		t.Errorf("readyReplicas = %d", r)
	}
	if out.Conditions["Ready"].Reason != "AllReplicasReady" || out.Conditions["Progressing"].Status != ctrlhost.ConditionFalse {
		t.Errorf("conditions = %+v", out.Conditions)
	}
}

func TestConfigChangeRestartsPods(t *testing.T) {
	_, c := setup(t)
	hash := func(out *ctrlhosttest.Outcome) string {
		// The annotation key has dots, which Lookup's paths cannot name.
		ann := ctrlhost.Map(desired(t, out, "Deployment", "shop"), "spec.template.metadata.annotations")
		return ann[configHashAnnotation].(string)
	}
	before := hash(ctrlhosttest.Reconcile(t, c, sample()))
	changed := sample()
	changed["spec"].(map[string]any)["config"] = map[string]any{"GREETING": "bonjour"}
	if hash(ctrlhosttest.Reconcile(t, c, changed)) == before {
		t.Error("a config change keeps the hash")
	}
	// FNV-1a 64 of {"GREETING":"hello"}: the hash the C++ plugin (nlohmann's compact dump)
	// wrote before the builders, so pods did not restart when the plugins switched to them.
	if before != "56d5bfdb2ff2a622" {
		t.Errorf("hash %s", before)
	}
}

func TestInvalidSpecIsTerminalWithACondition(t *testing.T) {
	_, c := setup(t)
	for _, tc := range []struct {
		field   string
		value   any
		message string
	}{
		{"image", "", "spec.image is required (a container image reference)"},
		{"replicas", -1, "spec.replicas must be between 0 and 1000, not -1"},
		{"replicas", true, "spec.replicas must be an integer"},
		{"replicas", 2.5, "spec.replicas must be an integer"},
		{"port", 70000, "spec.port must be between 1 and 65535, not 70000"},
		{"port", "http", "spec.port must be an integer"},
		{"env", map[string]any{"A": 1}, "spec.env.A must be a string"},
		{"config", []any{1}, "spec.config must be a map of strings"},
	} {
		bad := sample()
		bad["spec"].(map[string]any)[tc.field] = tc.value
		out := ctrlhosttest.Reconcile(t, c, bad)
		if out.Error == nil || !out.Error.Terminal || out.Error.Message != tc.message {
			t.Errorf("%s=%v: error %+v, want terminal %q", tc.field, tc.value, out.Error, tc.message)
			continue
		}
		if len(out.Desired) != 0 || out.Conditions["Ready"].Reason != "InvalidSpec" ||
			len(out.Events) != 1 || out.Events[0].Type != ctrlhost.EventWarning {
			t.Errorf("%s: %+v", tc.field, out)
		}
		if g, _ := ctrlhost.Int(out.Status, "observedGeneration"); g != 3 {
			t.Errorf("%s: status %v", tc.field, out.Status)
		}
	}
}

func TestFinalizingRemovesTheRecordThenReleasesTheFinalizer(t *testing.T) {
	records, c := setup(t)
	if out := ctrlhosttest.Reconcile(t, c, sample()); out.Error != nil {
		t.Fatal(out.Error)
	}
	if records.read("default", "shop") == nil {
		t.Fatal("no record written")
	}
	out := ctrlhosttest.Reconcile(t, c, sample(), ctrlhosttest.Finalizing())
	if out.Error != nil || !out.Finalized || len(out.Events) != 1 || out.Events[0].Reason != "RecordRemoved" || len(out.Desired) != 0 {
		t.Errorf("finalizing: %+v", out)
	}
	if records.read("default", "shop") != nil {
		t.Error("the record is still there")
	}
	if !ctrlhosttest.Reconcile(t, c, sample(), ctrlhosttest.Finalizing()).Finalized {
		t.Error("repeated finalizing is not finalized")
	}
	if gone := ctrlhosttest.Reconcile(t, c, nil, ctrlhosttest.WithReason(pb.Reason_REASON_PRIMARY_DELETED)); gone.Error != nil {
		t.Errorf("deletion notice: %+v", gone.Error)
	}
}

func TestRecordProblemsAreErrors(t *testing.T) {
	c := NewController(RecordStore{Dir: "/proc/ctrlhost-no-such-dir"})
	out := ctrlhosttest.Reconcile(t, c, sample())
	if out.Error == nil || out.Error.Terminal || !strings.HasPrefix(out.Error.Message, "external record: mkdir /proc/ctrlhost-no-such-dir: ") {
		t.Errorf("error = %+v", out.Error)
	}
	if len(out.Desired) != 3 {
		t.Errorf("children are still applied: %d", len(out.Desired))
	}
	records, _ := setup(t)
	for _, key := range [][2]string{{"default", "../etc"}, {"Default", "x"}, {"", "x"}} {
		if _, err := records.pathFor(key[0], key[1]); err == nil {
			t.Errorf("pathFor(%q, %q) accepted", key[0], key[1])
		}
	}
}

func TestRecordWrittenOnlyOnChange(t *testing.T) {
	records, c := setup(t)
	ctrlhosttest.Reconcile(t, c, sample())
	path, _ := records.pathFor("default", "shop")
	old := time.Unix(1, 0)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	ctrlhosttest.Reconcile(t, c, sample())
	if fi, err := os.Stat(path); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("rewritten: %v %v", fi.ModTime(), err)
	}
}
