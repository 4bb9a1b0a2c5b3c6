package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 with the given serial
// number, and its key, to the files, dated at; it returns the certificate.
func selfSigned(t *testing.T, serial int64, certPath, keyPath string, at time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	mustOK(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "market.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	mustOK(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	mustOK(t, err)
	mustOK(t, os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	mustOK(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	for _, p := range []string{certPath, keyPath} {
		mustOK(t, os.Chtimes(p, at, at))
	}
	cert, err := x509.ParseCertificate(der)
	mustOK(t, err)
	return cert
}

// TestServer_TLS serves HTTPS from a certificate's files, and serves a
// renewed certificate from the next handshake on without a restart; a
// renewal that does not load keeps the last good certificate.
func TestServer_TLS(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "privkey.pem")
	start := time.Now().Add(-time.Minute)
	first := selfSigned(t, 1, certPath, keyPath, start)
	rs, err := startServer(context.Background(), serveConfig{
		listen: "127.0.0.1:0", dsn: filepath.Join(dir, "idlegrid.db"), tlsCert: certPath, tlsKey: keyPath,
		logger: slog.New(slog.DiscardHandler),
	})
	mustOK(t, err)
	t.Cleanup(func() { rs.stop() })
	if !strings.HasPrefix(rs.url, "https://") {
		t.Fatalf("url %s, want https", rs.url)
	}

	// servedSerial makes a new connection, trusting cert, and returns the
	// serial number of the certificate the server showed.
	servedSerial := func(trust *x509.Certificate) int64 {
		t.Helper()
		pool := x509.NewCertPool()
		pool.AddCert(trust)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
		resp, err := c.Get(rs.url + "/v1/healthz")
		if err != nil {
			t.Fatalf("GET /v1/healthz over TLS: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/healthz over TLS: %s", resp.Status)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	if got := servedSerial(first); got != 1 {
		t.Fatalf("served certificate %d, want 1", got)
	}

	renewed := selfSigned(t, 2, certPath, keyPath, start.Add(30*time.Second))
	if got := servedSerial(renewed); got != 2 {
		t.Fatalf("after the renewal the server showed certificate %d, want 2", got)
	}

	mustOK(t, os.WriteFile(certPath, []byte("not a certificate\n"), 0o600))
	if got := servedSerial(renewed); got != 2 {
		t.Fatalf("after a broken renewal the server showed certificate %d, want the last good one, 2", got)
	}
}

// TestServerCommand_TLSFlags: the certificate and its key go together,
// and files that do not load stop the server at start.
func TestServerCommand_TLSFlags(t *testing.T) {
	dir := t.TempDir()
	r := run(t, nil, "server", "--db", filepath.Join(dir, "x.db"), "--tls-cert", filepath.Join(dir, "cert.pem"))
	if r.code != 2 || !strings.Contains(r.err, "--tls-cert and --tls-key go together") {
		t.Errorf("--tls-cert alone: %s, want a usage error", r)
	}
	mustOK(t, os.WriteFile(filepath.Join(dir, "cert.pem"), []byte("junk"), 0o600))
	mustOK(t, os.WriteFile(filepath.Join(dir, "key.pem"), []byte("junk"), 0o600))
	r = runUntil(t, waitLimit, nil, "server", "--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "x.db"),
		"--tls-cert", filepath.Join(dir, "cert.pem"), "--tls-key", filepath.Join(dir, "key.pem"))
	if r.code != 1 || !strings.Contains(r.err, "check --tls-cert and --tls-key") {
		t.Errorf("files that are no certificate: %s, want exit 1 with a hint", r)
	}
	// Nothing was made for a server that never started.
	if _, err := os.Stat(filepath.Join(dir, "x.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the database after a start refused for its certificate: %v, want none made", err)
	}
}

// TestServerCommand_plainBeyondThisMachine: plain HTTP on an address
// other machines reach is served, with a warning that says what to do.
func TestServerCommand_plainBeyondThisMachine(t *testing.T) {
	b := startMain(t, "server", "--listen", "0.0.0.0:0", "--db", filepath.Join(t.TempDir(), "x.db"))
	b.waitForMatch(t, regexp.MustCompile(`listening on (http://\S+)`))
	if !strings.Contains(b.err.String(), "serving plain HTTP beyond this machine") || !strings.Contains(b.err.String(), "--tls-cert") {
		t.Errorf("stderr does not warn of plain HTTP on 0.0.0.0:\n%s", b.err.String())
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": true, "[::1]:7070": true, "localhost:7070": true,
		"0.0.0.0:7070": false, "[::]:7070": false, "10.0.0.5:7070": false, "market.example.com:443": false, "nonsense": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestPlainBeyondLoopback(t *testing.T) {
	for server, want := range map[string]bool{
		"http://127.0.0.1:7070": false, "http://localhost": false, "http://[::1]:7070/": false,
		"https://market.example.com": false, "http://market.example.com": true, "http://10.0.0.5:7070": true,
	} {
		if got := plainBeyondLoopback(server); got != want {
			t.Errorf("plainBeyondLoopback(%q) = %v, want %v", server, got, want)
		}
	}
}

// TestServerCommand_logFormatJSON: with --log-format json every line the
// server logs is a JSON object with its time, level and message.
func TestServerCommand_logFormatJSON(t *testing.T) {
	dir := t.TempDir()
	b := startMain(t, "server", "--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "x.db"), "--log-format", "json",
		"--bootstrap-admin-key-file", filepath.Join(dir, "admin.key")) // else the key is shown on stderr, for a person
	b.waitForMatch(t, regexp.MustCompile(`listening on (http://\S+)`))
	lines := strings.Split(strings.TrimSpace(b.err.String()), "\n")
	for _, line := range lines {
		var rec struct{ Time, Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Time == "" || rec.Level == "" || rec.Msg == "" {
			t.Errorf("a log line is not a JSON record with time, level and msg: %q (%v)", line, err)
		}
	}
	if len(lines) < 2 {
		t.Errorf("stderr: %q, want the server's start logged", b.err.String())
	}
}
