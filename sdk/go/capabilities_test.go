package ctrlhost_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	"ctrlhost.dev/sdk/go/ctrlhosttest"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
	"google.golang.org/grpc/metadata"
)

// Two hosts dial one plugin: each stream is answered with the capabilities its own metadata
// carries, not with those of the last Describe.
func TestEachStreamUsesTheCapabilitiesOfItsMetadata(t *testing.T) {
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Owns("", "v1", "ConfigMap").
		Reconcile(func(_ context.Context, req *ctrlhost.Request) (*ctrlhost.Result, error) {
			res := &ctrlhost.Result{}
			res.Desire(ctrlhost.NewObject("v1", "ConfigMap", req.Name))
			return res, nil
		})
	p := ctrlhost.NewPlugin("shop", "1.0.0", c)
	p.Log = ctrlhost.NewLogger(io.Discard, ctrlhost.LevelError)
	served := ctrlhosttest.Serve(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The last Describe offered everything.
	if _, err := served.Client.Describe(ctx, &pb.DescribeRequest{ProtocolVersions: []string{"v1alpha1"},
		Capabilities: ctrlhost.AllCapabilities().Sorted()}); err != nil {
		t.Fatal(err)
	}
	answer := func(md metadata.MD) *pb.ReconcileResponse {
		sctx := ctx
		if md != nil {
			sctx = metadata.NewOutgoingContext(ctx, md)
		}
		stream, err := served.Client.Reconcile(sctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(call(1, "a")); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		stream.CloseSend()
		return resp
	}
	// An older host's connection (no server-side apply negotiated there).
	old := answer(metadata.Pairs(ctrlhost.CapabilitiesMetadata, "CAPABILITY_CONDITIONS,CAPABILITY_UNKNOWN_TO_US"))
	if !strings.Contains(old.GetError().GetMessage(), "needs CAPABILITY_SERVER_SIDE_APPLY") {
		t.Errorf("stream without server-side apply: %v", old)
	}
	full := answer(metadata.Pairs(ctrlhost.CapabilitiesMetadata, "CAPABILITY_SERVER_SIDE_APPLY"))
	if full.GetError() != nil || len(full.GetDesiredObjects()) != 1 {
		t.Errorf("stream with server-side apply: %v", full)
	}
	// No metadata (a host before this change): the last Describe's set.
	if none := answer(nil); none.GetError() != nil {
		t.Errorf("stream without metadata: %v", none)
	}
}
