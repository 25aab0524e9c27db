package ctrlhost

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	pb "ctrlhost.dev/sdk/go/gen/ctrlhost/plugin/v1alpha1"
)

const (
	// ProtocolVersion is the protocol this SDK speaks.
	ProtocolVersion = "v1alpha1"
	// ServiceName is the plugin service's full name (also a health service name).
	ServiceName = "ctrlhost.plugin.v1alpha1.ControllerPluginService"
	// MaxMessageBytes is the host's message limit in both directions (docs/protocol.md §9).
	MaxMessageBytes = 64 << 20
	// AddressEnv names the variable holding the address the host asks the plugin to serve.
	AddressEnv = "CTRLHOST_PLUGIN_ADDRESS"
)

// Plugin is the process that serves controllers to the host. Set its fields and add controllers
// before serving; afterwards it is only read, except for the negotiated capabilities (guarded
// by mu). Safe for concurrent use once serving.
type Plugin struct {
	Name    string
	Version string
	// DrainTimeout bounds how long a drain waits for in-flight reconciles (default 10 s).
	DrainTimeout time.Duration
	// MaxMessageBytes is the largest message received or sent (default MaxMessageBytes).
	MaxMessageBytes int
	// Log receives the SDK's records (default: stderr at $CTRLHOST_LOG_LEVEL).
	Log *Logger
	// TLS, when set, makes Serve speak TLS with this configuration (Run sets it from
	// TLSConfigFromEnv when nil). Without it, Serve refuses a TCP listener that is not loopback.
	TLS *tls.Config
	// TaskBackoff is the delay before a failed background task starts again (zero:
	// DefaultTaskBackoff).
	TaskBackoff TaskBackoff

	controllers map[string]*Controller
	order       []string

	mu      sync.Mutex
	caps    CapabilitySet    // guarded by mu; every capability until Describe narrows them
	servers map[*server]bool // guarded by mu; the servers Serve is running (for SetServing)
}

// NewPlugin is a plugin serving controllers.
func NewPlugin(name, version string, controllers ...*Controller) *Plugin {
	p := &Plugin{Name: name, Version: version, DrainTimeout: 10 * time.Second,
		MaxMessageBytes: MaxMessageBytes, Log: defaultLogger(),
		controllers: map[string]*Controller{}, caps: AllCapabilities()}
	for _, c := range controllers {
		p.Add(c)
	}
	return p
}

// Add adds a controller. A declaration error is reported by Serve and Run (before serving).
func (p *Plugin) Add(c *Controller) *Plugin {
	if _, dup := p.controllers[c.Name()]; !dup {
		p.order = append(p.order, c.Name())
	}
	p.controllers[c.Name()] = c
	return p
}

// Controller is the controller named name (nil when the plugin has none), e.g. to replay its
// recordings (ctrlhosttest.ReplayPlugin).
func (p *Plugin) Controller(name string) *Controller { return p.controllers[name] }

// Validate checks every controller's declaration.
func (p *Plugin) Validate() error {
	if len(p.controllers) == 0 {
		return fmt.Errorf("plugin %q declares no controller", p.Name)
	}
	if len(p.order) != len(p.controllers) {
		return fmt.Errorf("plugin %q declares a controller twice", p.Name)
	}
	for _, name := range p.order {
		if _, err := p.controllers[name].Spec(); err != nil {
			return err
		}
	}
	return nil
}

// Capabilities is the set in effect (the intersection negotiated by the last Describe).
func (p *Plugin) Capabilities() CapabilitySet {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.caps
}

// ErrDescribeRefused wraps the reasons Describe fails with FAILED_PRECONDITION.
var ErrDescribeRefused = errors.New("describe refused")

// Describe answers the handshake: protocol v1alpha1, the effective capabilities (the host's
// offer; a controller needing one the host lacks refuses the handshake), the controllers.
func (p *Plugin) Describe(req *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDescribeRefused, err)
	}
	offered := false
	for _, v := range req.GetProtocolVersions() {
		offered = offered || v == ProtocolVersion
	}
	if !offered {
		return nil, fmt.Errorf("%w: plugin %q speaks protocol %s only; the host offered [%s]",
			ErrDescribeRefused, p.Name, ProtocolVersion, strings.Join(req.GetProtocolVersions(), ", "))
	}
	all := AllCapabilities()
	host := CapabilitySet{}
	for _, c := range req.GetCapabilities() {
		if all.Has(c) {
			host[c] = true
		}
	}
	resp := &pb.DescribeResponse{ProtocolVersion: ProtocolVersion, PluginName: p.Name,
		PluginVersion: p.Version, Capabilities: all.Sorted()}
	for _, name := range p.order {
		c := p.controllers[name]
		need, _ := c.RequiredCapabilities()
		for _, cap := range need.Sorted() {
			if !host.Has(cap) {
				return nil, fmt.Errorf("%w: controller %q needs %v, which the host does not offer",
					ErrDescribeRefused, name, cap)
			}
		}
		spec, _ := c.Spec()
		resp.Controllers = append(resp.Controllers, spec)
	}
	p.mu.Lock()
	p.caps = host
	p.mu.Unlock()
	p.Log.Info("plugin described", "plugin", p.Name, "host_version", req.GetHostVersion(),
		"instance", req.GetInstanceName(), "controllers", len(p.order))
	return resp, nil
}

// Handle runs one reconcile and always returns its answer.
func (p *Plugin) Handle(ctx context.Context, requestID uint64, call *pb.ReconcileCall) *pb.ReconcileResponse {
	return p.handle(ctx, requestID, call, p.Capabilities())
}

func (p *Plugin) handle(ctx context.Context, requestID uint64, call *pb.ReconcileCall, caps CapabilitySet) *pb.ReconcileResponse {
	c := p.controllers[call.GetController()]
	if c == nil {
		return errorResponse(requestID, true, fmt.Sprintf("plugin %q has no controller %q", p.Name, call.GetController()))
	}
	resp := c.Invoke(ctx, requestID, call, caps)
	if e := resp.GetError(); e != nil {
		p.Log.Warn("reconcile failed", "controller", call.GetController(), "namespace", call.GetNamespace(),
			"name", call.GetName(), "trace_id", call.GetTraceId(), "error", e.GetMessage())
	}
	return resp
}

// Listen parses a CTRLHOST_PLUGIN_ADDRESS value ("unix:///abs/path.sock", "unix:rel.sock" or
// "host:port") into a network and address for net.Listen.
func ParseAddress(address string) (network, addr string, err error) {
	if address == "" {
		return "", "", fmt.Errorf("%s is not set (want unix:///path/to.sock or host:port)", AddressEnv)
	}
	if strings.HasPrefix(address, "unix:") {
		path := strings.TrimPrefix(strings.TrimPrefix(address, "unix:"), "//")
		if path == "" || strings.ContainsRune(path, 0) {
			return "", "", fmt.Errorf("%s=%q names no socket path", AddressEnv, address)
		}
		if len(path) > 107 {
			return "", "", fmt.Errorf("%s: socket path longer than 107 bytes", AddressEnv)
		}
		return "unix", path, nil
	}
	i := strings.LastIndex(address, ":")
	if i <= 0 {
		return "", "", fmt.Errorf("%s=%q is neither unix:///path nor host:port", AddressEnv, address)
	}
	port, err := strconv.Atoi(address[i+1:])
	if err != nil || port < 0 || port > 65535 || strings.HasPrefix(address[i+1:], "+") {
		return "", "", fmt.Errorf("%s=%q is neither unix:///path nor host:port", AddressEnv, address)
	}
	return "tcp", address, nil
}

// Listen listens on a CTRLHOST_PLUGIN_ADDRESS value, removing a stale socket file first.
func Listen(address string) (net.Listener, error) {
	network, addr, err := ParseAddress(address)
	if err != nil {
		return nil, err
	}
	if network == "unix" {
		if fi, err := os.Lstat(addr); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(addr) // a stale socket of an earlier instance
		}
	}
	return net.Listen(network, addr)
}

// Run serves $CTRLHOST_PLUGIN_ADDRESS until SIGTERM or SIGINT, drains, and returns the process
// exit code: 0 after a graceful stop, 1 when it cannot listen, 2 for a bad address or
// declaration.
func (p *Plugin) Run() int {
	address := os.Getenv(AddressEnv)
	if _, _, err := ParseAddress(address); err != nil {
		return p.startFailure(err, 2)
	}
	if err := p.Validate(); err != nil {
		return p.startFailure(err, 2)
	}
	if p.TLS == nil {
		cfg, err := TLSConfigFromEnv()
		if err != nil {
			return p.startFailure(err, 2)
		}
		p.TLS = cfg
	}
	if network, addr, _ := ParseAddress(address); network == "tcp" && p.TLS == nil {
		if err := checkPlaintextAddress(addr); err != nil {
			return p.startFailure(err, 2)
		}
	}
	lis, err := Listen(address)
	if err != nil {
		p.Log.Error("cannot listen", "plugin", p.Name, "address", address, "error", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := p.Serve(ctx, lis); err != nil {
		p.Log.Error("plugin failed", "plugin", p.Name, "error", err)
		return 1
	}
	return 0
}

func (p *Plugin) startFailure(err error, code int) int {
	p.Log.Error("cannot start plugin", "plugin", p.Name, "error", err)
	fmt.Fprintf(os.Stderr, "error: %v\n", err)
	return code
}

// Main is os.Exit(p.Run()): the whole main function of a plugin.
func (p *Plugin) Main() { os.Exit(p.Run()) }
