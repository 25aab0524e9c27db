package ctrlhost_test

import (
	"errors"
	"strings"
	"testing"

	ctrlhost "ctrlhost.dev/sdk/go"
	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
)

func TestDescribeNegotiates(t *testing.T) {
	c := ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Owns("", "v1", "Service").Reconcile(noop)
	p := ctrlhost.NewPlugin("shop", "1.2.3", c)
	p.Log = ctrlhost.NewLogger(&strings.Builder{}, ctrlhost.LevelError)
	offer := []pb.Capability{pb.Capability_CAPABILITY_CHILDREN, pb.Capability_CAPABILITY_CONDITIONS, pb.Capability(99)}
	resp, err := p.Describe(&pb.DescribeRequest{ProtocolVersions: []string{"v1beta1", "v1alpha1"}, Capabilities: offer})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtocolVersion != "v1alpha1" || resp.PluginName != "shop" || resp.PluginVersion != "1.2.3" ||
		len(resp.Controllers) != 1 || len(resp.Capabilities) != 8 { // every capability, background tasks included
		t.Errorf("describe = %v", resp)
	}
	if got := p.Capabilities().Sorted(); len(got) != 2 {
		t.Errorf("effective capabilities = %v, want the known ones offered", got)
	}
	for _, tc := range []struct {
		req  *pb.DescribeRequest
		want string
	}{
		{&pb.DescribeRequest{ProtocolVersions: []string{"v2"}}, `speaks protocol v1alpha1 only; the host offered [v2]`},
		{&pb.DescribeRequest{ProtocolVersions: []string{"v1alpha1"}}, `controller "shop" needs CAPABILITY_CHILDREN`},
	} {
		_, err := p.Describe(tc.req)
		if !errors.Is(err, ctrlhost.ErrDescribeRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Describe(%v) error = %v, want %q", tc.req, err, tc.want)
		}
	}
	if err := ctrlhost.NewPlugin("empty", "1").Validate(); err == nil || !strings.Contains(err.Error(), "declares no controller") {
		t.Errorf("empty plugin: %v", err)
	}
}

func TestParseAddress(t *testing.T) {
	for _, tc := range []struct{ in, network, addr, err string }{
		{"unix:///run/p.sock", "unix", "/run/p.sock", ""},
		{"unix:rel.sock", "unix", "rel.sock", ""},
		{"127.0.0.1:0", "tcp", "127.0.0.1:0", ""},
		{"[::1]:8080", "tcp", "[::1]:8080", ""},
		{"", "", "", "is not set"},
		{"unix://", "", "", "names no socket path"},
		{"unix:///" + strings.Repeat("x", 120), "", "", "longer than 107 bytes"},
		{"localhost", "", "", "neither"},
		{"host:99999", "", "", "neither"},
		{":80", "", "", "neither"},
	} {
		network, addr, err := ctrlhost.ParseAddress(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseAddress(%q) error = %v, want %q", tc.in, err, tc.err)
			}
		} else if err != nil || network != tc.network || addr != tc.addr {
			t.Errorf("ParseAddress(%q) = %q %q %v", tc.in, network, addr, err)
		}
	}
}

func TestLoggerQuotesValues(t *testing.T) {
	var b strings.Builder
	log := ctrlhost.NewLogger(&b, ctrlhost.LevelInfo).With("plugin", "shop")
	log.Debug("hidden")
	log.Info("reconcile failed", "error", `a "b"`+"\n", "n", 3, "odd")
	line := b.String()
	if strings.Count(line, "\n") != 1 || !strings.Contains(line, ` level=info msg="reconcile failed" plugin=shop error="a \"b\"\n" n=3 odd="(missing)"`) {
		t.Errorf("record = %q", line)
	}
}
