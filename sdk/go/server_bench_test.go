package ctrlhost_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	"ctrlhost.dev/sdk/go/ctrlhosttest"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
)

// benchCall is the call of bench/sdk_dispatch (bench/dispatch/harness.cc): a ~1 KiB primary.
func benchCall() *pb.ReconcileCall {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"example.com/v1","kind":"Shop","metadata":{"name":"app-1",` +
		`"namespace":"team-a","uid":"6f0d1c3e-8f7e-4d4b-9a57-0c6a3d2f1b10",` +
		`"resourceVersion":"12345","generation":3,"labels":{"app":"web","tier":"front"}},` +
		`"spec":{"replicas":3,"image":"registry.example.com/web:1.4.0","env":[`)
	for i := 0; i < 12; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name":"VAR_%d","value":"value-%d-xxxxxxxxxxxxxxxxxxxxxxxx"}`, i, i)
	}
	b.WriteString("]}}")
	return &pb.ReconcileCall{
		Controller: "shop", Namespace: "team-a", Name: "app-1", Uid: "6f0d1c3e-8f7e-4d4b-9a57-0c6a3d2f1b10",
		Reason: pb.Reason_REASON_PRIMARY_CHANGED, Attempt: 1, TraceId: "4bf92f3577b34da6a3ce929d0e0e4736",
		Object: []byte(b.String())}
}

// BenchmarkServeReconcileStream is the SDK's serving path end to end, in one process: a gRPC
// client over a Unix socket keeps 64 reconciles in flight on one stream (the sdk-dispatch
// benchmark's shape); ns/op and allocs/op are per reconcile, client included.
func BenchmarkServeReconcileStream(b *testing.B) {
	const inFlight = 64
	s := ctrlhosttest.Serve(b, testPlugin(newGate()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := s.Client.Describe(ctx, &pb.DescribeRequest{ProtocolVersions: []string{"v1alpha1"},
		Capabilities: ctrlhost.AllCapabilities().Sorted()}); err != nil {
		b.Fatal(err)
	}
	stream, err := s.Client.Reconcile(ctx)
	if err != nil {
		b.Fatal(err)
	}
	payload := &pb.ReconcileRequest_Reconcile{Reconcile: benchCall()}
	// Request ids are unique per stream (docs/protocol.md): request n is id n.
	send := func(n int) {
		if err := stream.Send(&pb.ReconcileRequest{RequestId: uint64(n), Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	for sent < inFlight && sent < b.N {
		sent++
		send(sent)
	}
	for done := 0; done < b.N; done++ {
		resp, err := stream.Recv()
		if err != nil {
			b.Fatal(err)
		}
		if resp.GetError() != nil {
			b.Fatalf("answer %d: %v", resp.GetRequestId(), resp.GetError())
		}
		if sent < b.N {
			sent++
			send(sent)
		}
	}
	b.StopTimer()
	_ = stream.CloseSend()
}
