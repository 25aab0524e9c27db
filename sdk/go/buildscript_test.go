package ctrlhost_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's commands for a first-time Go plugin author, run as written from a fresh work
// directory (what a fresh machine has): `eval "$(sdk/go/build.sh env)"; go doc ...` once failed
// with "cannot find package" because `env` did not put the sources in place, and a plugin
// outside the repository had no commands at all. build.sh test exports CTRLHOST_REPO_ROOT (the
// checkout whose build.sh runs); without it (go test run by hand) the test is skipped.

const outsidePlugin = `package main

import (
	"context"

	ctrlhost "ctrlhost.dev/sdk/go"
)

func reconcile(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
	res := &ctrlhost.Result{}
	res.Event(ctrlhost.EventNormal, "Seen", "seen "+req.Name)
	return res, nil
}

func main() {
	seen := ctrlhost.NewController("seen").For("", "v1", "ConfigMap").Reconcile(reconcile)
	ctrlhost.NewPlugin("seen", "0.1.0", seen).Main()
}
`

func buildScript(t *testing.T) (script string, env []string) {
	t.Helper()
	root := os.Getenv("CTRLHOST_REPO_ROOT")
	if root == "" {
		t.Skip("CTRLHOST_REPO_ROOT is not set (sdk/go/build.sh test sets it)")
	}
	if testing.Short() {
		t.Skip("copies the sources and runs the Go tool (-short)")
	}
	// A work directory nothing has filled yet, as on a fresh machine; the build cache stays
	// shared (content-addressed), so this costs seconds, not minutes.
	env = append(os.Environ(), "CTRLHOST_GO_WORK="+t.TempDir())
	return filepath.Join(root, "sdk", "go", "build.sh"), env
}

func run(t *testing.T, env []string, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestBuildScriptEnvFromAFreshWorkDirectory(t *testing.T) {
	script, env := buildScript(t)
	out := run(t, env, t.TempDir(), "bash", "-c",
		`set -e; eval "$("$0" env)"; go doc ctrlhost.dev/sdk/go NewController; `+
			`go list ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1`, script)
	for _, want := range []string{"func NewController(name string) *Controller",
		"ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestBuildScriptBuildsAPluginOutsideTheRepository(t *testing.T) {
	script, env := buildScript(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(outsidePlugin), 0o644); err != nil {
		t.Fatal(err)
	}
	// As the README says: build.sh build DIR OUT ...
	bin := filepath.Join(t.TempDir(), "seen")
	run(t, env, dir, script, "build", ".", bin)
	// ... or the Go tool by hand after eval "$(build.sh env)", in the plugin's own directory.
	run(t, env, dir, "bash", "-c", `set -e; eval "$("$0" env)"; go vet . && go build -o seen2 .`,
		script)
	for _, b := range []string{bin, filepath.Join(dir, "seen2")} {
		// Without CTRLHOST_PLUGIN_ADDRESS the plugin exits 2 naming the variable: it was built
		// against the SDK and runs.
		cmd := exec.Command(b)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		exit, ok := err.(*exec.ExitError)
		if !ok || exit.ExitCode() != 2 || !strings.Contains(string(out), "CTRLHOST_PLUGIN_ADDRESS") {
			t.Errorf("%s without an address: %v\n%s", b, err, out)
		}
	}
}
