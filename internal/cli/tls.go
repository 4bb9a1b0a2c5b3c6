package cli

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sync"
	"time"
)

// certFiles serves the certificate in a pair of PEM files to TLS
// handshakes, and reads the files again when either changes, so that a
// renewed certificate (certbot, cert-manager) is served without a restart.
// A pair that fails to load keeps the last good one, with a warning.
type certFiles struct {
	certPath, keyPath string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime [2]time.Time // of the files cert was read from
}

// loadCertFiles reads the pair once, so that a bad flag fails at start.
func loadCertFiles(certPath, keyPath string, log *slog.Logger) (*certFiles, error) {
	c := &certFiles{certPath: certPath, keyPath: keyPath, log: log}
	mod, err := c.modTimes()
	if err != nil {
		return nil, err
	}
	if err := c.read(mod); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *certFiles) modTimes() ([2]time.Time, error) {
	var mod [2]time.Time
	for i, p := range []string{c.certPath, c.keyPath} {
		fi, err := os.Stat(p)
		if err != nil {
			return mod, err
		}
		mod[i] = fi.ModTime()
	}
	return mod, nil
}

// read loads the pair; the caller holds mu or has not shared c yet.
func (c *certFiles) read(mod [2]time.Time) error {
	cert, err := tls.LoadX509KeyPair(c.certPath, c.keyPath)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", c.certPath, c.keyPath, err)
	}
	c.cert, c.modTime = &cert, mod
	return nil
}

// get is tls.Config.GetCertificate.
func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mod, err := c.modTimes()
	if err == nil && mod != c.modTime {
		err = c.read(mod)
	}
	if err != nil && c.modTime != mod { // warn once per change of the files
		c.modTime = mod
		c.log.Warn("serving the last good TLS certificate: the files changed and do not load", "err", err)
	}
	return c.cert, nil
}

// tlsConfig is the server's TLS: TLS 1.2 and later, the certificate from
// the files.
func (c *certFiles) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get}
}

// loopback reports whether a listen address only takes connections from
// this machine.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// plainBeyondLoopback reports whether a server address is plain HTTP to
// another machine.
func plainBeyondLoopback(server string) bool {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "http" {
		return false
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	return !loopback(host)
}
