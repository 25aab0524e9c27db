package ctrlhost

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
)

// The environment variables that make a plugin serve TLS (the same in every SDK).
const (
	// TLSCertFileEnv and TLSKeyFileEnv name the PEM server certificate (chain) and its key:
	// both or neither.
	TLSCertFileEnv = "CTRLHOST_PLUGIN_TLS_CERT_FILE"
	TLSKeyFileEnv  = "CTRLHOST_PLUGIN_TLS_KEY_FILE"
	// TLSClientCAFileEnv names a PEM CA bundle; when set, the host must present a client
	// certificate signed by it (mutual TLS).
	TLSClientCAFileEnv = "CTRLHOST_PLUGIN_TLS_CLIENT_CA_FILE"
)

// TLSConfigFromEnv is the server TLS configuration the environment asks for
// (CTRLHOST_PLUGIN_TLS_CERT_FILE + CTRLHOST_PLUGIN_TLS_KEY_FILE, optionally
// CTRLHOST_PLUGIN_TLS_CLIENT_CA_FILE), or nil when none of them is set. The files are read once,
// here. An error names the variable and the file: one of the pair without the other, a client CA
// without a certificate, an unreadable file, a key that does not match, a CA file with no
// certificate.
func TLSConfigFromEnv() (*tls.Config, error) {
	certFile, keyFile := os.Getenv(TLSCertFileEnv), os.Getenv(TLSKeyFileEnv)
	caFile := os.Getenv(TLSClientCAFileEnv)
	switch {
	case certFile == "" && keyFile == "" && caFile == "":
		return nil, nil
	case certFile == "" || keyFile == "":
		return nil, fmt.Errorf("%s and %s must be set together (serving TLS needs both)",
			TLSCertFileEnv, TLSKeyFileEnv)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%s=%s, %s=%s: %v", TLSCertFileEnv, certFile, TLSKeyFileEnv, keyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", TLSClientCAFileEnv, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s=%s holds no PEM certificate", TLSClientCAFileEnv, caFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ErrPlaintextNotLoopback refuses to serve without TLS on a TCP address other than loopback.
var ErrPlaintextNotLoopback = errors.New("refusing to serve plaintext on a non-loopback address")

// checkPlaintext refuses a TCP listener on a non-loopback address when serving without TLS
// (Unix sockets and 127.0.0.0/8, ::1 are fine).
func checkPlaintext(addr net.Addr) error {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp.IP.IsLoopback() {
		return nil
	}
	return plaintextError(addr.String())
}

func plaintextError(addr string) error {
	return fmt.Errorf("%w %s: set %s and %s (and %s for mutual TLS), or listen on 127.0.0.1 or a "+
		"unix: socket", ErrPlaintextNotLoopback, addr, TLSCertFileEnv, TLSKeyFileEnv, TLSClientCAFileEnv)
}

// checkPlaintextAddress is checkPlaintext for a host:port before listening: the host must be
// a loopback IP or "localhost".
func checkPlaintextAddress(hostPort string) error {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return fmt.Errorf("%s=%q: %v", AddressEnv, hostPort, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return plaintextError(hostPort) // a name other than localhost may resolve anywhere
}
