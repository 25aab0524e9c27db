package ctrlhost_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctrlhost "ctrlhost.dev/sdk/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// testCA issues certificates for the TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

var serial int64

func newCA(t *testing.T, name string) *testCA {
	key := newKey(t)
	serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns PEM certificate and key for a server (127.0.0.1) or a client.
func (ca *testCA) issue(t *testing.T, name string, server bool) (certPEM, keyPEM []byte) {
	key := newKey(t)
	serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serveTLS serves a plugin with the environment's TLS configuration on 127.0.0.1 and returns its
// address; the plugin is drained when the test ends.
func serveTLS(t *testing.T) string {
	cfg, err := ctrlhost.TLSConfigFromEnv()
	if err != nil || cfg == nil {
		t.Fatalf("TLSConfigFromEnv = %v, %v", cfg, err)
	}
	p := ctrlhost.NewPlugin("tls", "1.0.0", ctrlhost.NewController("shop").
		For("example.com", "v1", "Shop").Reconcile(noop))
	p.Log = ctrlhost.NewLogger(&strings.Builder{}, ctrlhost.LevelError)
	p.TLS = cfg
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// check calls Health.Check over a connection with the given transport credentials.
func check(t *testing.T, address string, creds grpc.DialOption) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, address, creds)
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err == nil && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return errors.New(resp.GetStatus().String())
	}
	return err
}

func TestTLSServingWithAndWithoutClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, clientCA, otherCA := newCA(t, "plugin-ca"), newCA(t, "host-ca"), newCA(t, "stranger-ca")
	serverCert, serverKey := ca.issue(t, "plugin", true)
	t.Setenv(ctrlhost.TLSCertFileEnv, writeFile(t, dir, "tls.crt", serverCert))
	t.Setenv(ctrlhost.TLSKeyFileEnv, writeFile(t, dir, "tls.key", serverKey))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.pem)
	withTLS := func(certs ...tls.Certificate) grpc.DialOption {
		return grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots,
			Certificates: certs, MinVersion: tls.VersionTLS12}))
	}

	// Server TLS only.
	address := serveTLS(t)
	if err := check(t, address, withTLS()); err != nil {
		t.Fatalf("TLS health check: %v", err)
	}
	if err := check(t, address, grpc.WithInsecure()); status.Code(err) != codes.Unavailable {
		t.Errorf("a plaintext client got %v, want Unavailable", err)
	}

	// Mutual TLS: a client certificate signed by the client CA is required.
	t.Setenv(ctrlhost.TLSClientCAFileEnv, writeFile(t, dir, "client-ca.crt", clientCA.pem))
	address = serveTLS(t)
	hostCert, hostKey := clientCA.issue(t, "host", false)
	good, err := tls.X509KeyPair(hostCert, hostKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(t, address, withTLS(good)); err != nil {
		t.Fatalf("mutual TLS health check: %v", err)
	}
	if err := check(t, address, withTLS()); status.Code(err) != codes.Unavailable {
		t.Errorf("no client certificate: %v, want Unavailable", err)
	}
	strangerCert, strangerKey := otherCA.issue(t, "stranger", false)
	stranger, _ := tls.X509KeyPair(strangerCert, strangerKey)
	if err := check(t, address, withTLS(stranger)); status.Code(err) != codes.Unavailable {
		t.Errorf("a client certificate of another CA: %v, want Unavailable", err)
	}
}

func TestTLSConfigFromEnvRefusesIncompleteSettings(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	cert, key := ca.issue(t, "plugin", true)
	_, otherKey := ca.issue(t, "other", true)
	certFile, keyFile := writeFile(t, dir, "tls.crt", cert), writeFile(t, dir, "tls.key", key)
	for _, tc := range []struct {
		name            string
		cert, key, ca   string
		want            string
		wantNilNoConfig bool
	}{
		{name: "none", wantNilNoConfig: true},
		{name: "cert only", cert: certFile, want: "must be set together"},
		{name: "key only", key: keyFile, want: "must be set together"},
		{name: "client CA only", ca: certFile, want: "must be set together"},
		{name: "missing file", cert: filepath.Join(dir, "absent.crt"), key: keyFile, want: "absent.crt"},
		{name: "key mismatch", cert: certFile, key: writeFile(t, dir, "other.key", otherKey), want: "does not match"},
		{name: "CA without PEM", cert: certFile, key: keyFile, ca: writeFile(t, dir, "empty.pem", []byte("not pem")),
			want: "holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(ctrlhost.TLSCertFileEnv, tc.cert)
			t.Setenv(ctrlhost.TLSKeyFileEnv, tc.key)
			t.Setenv(ctrlhost.TLSClientCAFileEnv, tc.ca)
			cfg, err := ctrlhost.TLSConfigFromEnv()
			if tc.wantNilNoConfig {
				if cfg != nil || err != nil {
					t.Fatalf("got %v, %v; want no TLS", cfg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// fakeListener reports a non-loopback address; nothing is bound.
type fakeListener struct{ addr net.Addr }

func (l fakeListener) Accept() (net.Conn, error) { return nil, errors.New("closed") }
func (l fakeListener) Close() error              { return nil }
func (l fakeListener) Addr() net.Addr            { return l.addr }

func TestPlaintextIsRefusedOffLoopback(t *testing.T) {
	p := ctrlhost.NewPlugin("plain", "1.0.0", ctrlhost.NewController("shop").
		For("example.com", "v1", "Shop").Reconcile(noop))
	p.Log = ctrlhost.NewLogger(&strings.Builder{}, ctrlhost.LevelError)
	err := p.Serve(context.Background(), fakeListener{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 9443}})
	if !errors.Is(err, ctrlhost.ErrPlaintextNotLoopback) || !strings.Contains(err.Error(), "10.1.2.3:9443") ||
		!strings.Contains(err.Error(), ctrlhost.TLSCertFileEnv) {
		t.Fatalf("Serve on 10.1.2.3 without TLS: %v", err)
	}
	for _, address := range []string{"0.0.0.0:9443", ":9443", "plugin.example.com:9443", "[::]:9443"} {
		t.Setenv(ctrlhost.AddressEnv, address)
		if code := p.Run(); code != 2 {
			t.Errorf("Run on %s without TLS exited %d, want 2 (refused before listening)", address, code)
		}
	}
}
