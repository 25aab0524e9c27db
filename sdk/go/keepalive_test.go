package ctrlhost_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	"ctrlhost.dev/sdk/go/ctrlhosttest"
	"golang.org/x/net/http2"
)

// h2conn is a raw HTTP/2 connection to a served plugin: it sends keepalive PINGs the way the
// host's gRPC channel does (grpc-go's own client cannot ping more often than every 10 s).
type h2conn struct {
	conn net.Conn
	fr   *http2.Framer
}

func dialH2(t *testing.T, address string) *h2conn {
	conn, err := net.DialTimeout("unix", strings.TrimPrefix(address, "unix://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return &h2conn{conn, fr}
}

// ping sends a PING and waits (bounded) for its ACK; an error for a GOAWAY or a closed
// connection.
func (c *h2conn) ping(n byte) error {
	data := [8]byte{n}
	if err := c.fr.WritePing(false, data); err != nil {
		return err
	}
	for {
		c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		f, err := c.fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := c.fr.WriteSettingsAck(); err != nil {
					return err
				}
			}
		case *http2.PingFrame:
			if f.IsAck() && f.Data == data {
				return nil
			}
		case *http2.GoAwayFrame:
			return fmt.Errorf("GOAWAY %v %q", f.ErrCode, f.DebugData())
		}
	}
}

func TestServerAcceptsTheHostsKeepalivePings(t *testing.T) {
	served := ctrlhosttest.Serve(t, ctrlhost.NewPlugin("keepalive", "1.0.0",
		ctrlhost.NewController("shop").For("example.com", "v1", "Shop").Reconcile(noop)))

	// One ping per KeepaliveMinTime (and a bit) on a connection without any stream: accepted.
	c := dialH2(t, served.Address)
	for i := byte(1); i <= 5; i++ { // grpc-go sends GOAWAY at the 3rd strike, after its ACK
		if err := c.ping(i); err != nil {
			t.Fatalf("ping %d, %v after the previous one: %v", i, ctrlhost.KeepaliveMinTime, err)
		}
		time.Sleep(ctrlhost.KeepaliveMinTime + 100*time.Millisecond)
	}

	// Pings faster than that are still refused (the policy is enforced, so this test would see
	// grpc-go's default of 5 minutes as GOAWAY above).
	c = dialH2(t, served.Address)
	for i := byte(1); i <= 6; i++ {
		if err := c.fr.WritePing(false, [8]byte{i}); err != nil {
			break // the server may close after its GOAWAY
		}
	}
	var goaway *http2.GoAwayFrame
	for goaway == nil {
		c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("6 pings back to back: %v before any GOAWAY, want GOAWAY too_many_pings", err)
		}
		goaway, _ = f.(*http2.GoAwayFrame)
	}
	if !strings.Contains(string(goaway.DebugData()), "too_many_pings") {
		t.Fatalf("GOAWAY %v %q, want too_many_pings", goaway.ErrCode, goaway.DebugData())
	}
}
