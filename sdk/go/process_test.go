package ctrlhost_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// buildHello builds examples/hello with the toolchain and GOPATH running this test.
func buildHello(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hello")
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin,
		"ctrlhost.dev/sdk/go/examples/hello").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestProcessServesAndExitsZeroOnSIGTERM(t *testing.T) {
	bin := buildHello(t)
	dir, err := os.MkdirTemp("", "ctrlhost-go-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "hello.sock")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CTRLHOST_PLUGIN_ADDRESS=unix://"+sock)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := grpc.DialContext(ctx, "unix://"+sock, grpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: ctrlhost.ServiceName},
		grpc.WaitForReady(true))
	if err != nil || health.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v\n%s", health, err, stderr.String())
	}
	desc, err := pb.NewControllerPluginServiceClient(conn).Describe(ctx, &pb.DescribeRequest{
		ProtocolVersions: []string{"v1alpha1"}, Capabilities: ctrlhost.AllCapabilities().Sorted()})
	if err != nil || desc.Controllers[0].LabelSelector != "hello=true" {
		t.Fatalf("describe: %v %v", desc, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"msg=\"plugin serving\" plugin=hello", "msg=\"plugin stopped\" plugin=hello abandoned=0"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestProcessRefusesABadAddressWithExitCode2(t *testing.T) {
	bin := buildHello(t)
	for _, address := range []string{"", "nonsense"} {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "CTRLHOST_PLUGIN_ADDRESS="+address)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "error: CTRLHOST_PLUGIN_ADDRESS") {
			t.Errorf("address %q: exit %d, output %s", address, code, out)
		}
	}
}
