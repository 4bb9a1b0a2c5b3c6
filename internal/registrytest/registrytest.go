// Package registrytest runs a container image registry in memory on the
// loopback, for tests that push and pull images through the real Docker
// engine, which reaches it over plain HTTP (the engine treats 127.0.0.0/8
// as an insecure registry). No registry on the internet is needed.
package registrytest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/idlegrid/idlegrid"
)

// Registry is go-containerregistry's registry in memory behind an HTTP
// Basic login, when it has one: then it serves only to that login, as a
// private registry does.
type Registry struct {
	Host     string                 // "127.0.0.1:port", as image references name it
	Login    *idlegrid.RegistryAuth // nil: it serves anyone
	requests atomic.Int64
	handler  http.Handler
}

// New starts a registry until the test ends: open to anyone when user is
// "", else only to user and password.
func New(tb testing.TB, user, password string) *Registry {
	tb.Helper()
	reg := &Registry{handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	srv := httptest.NewServer(reg)
	tb.Cleanup(srv.Close)
	reg.Host = strings.TrimPrefix(srv.URL, "http://")
	if user != "" {
		reg.Login = &idlegrid.RegistryAuth{Registry: reg.Host, Username: user, Password: password}
	}
	return reg
}

// Requests is how many requests the registry has had.
func (reg *Registry) Requests() int64 { return reg.requests.Load() }

// ServeHTTP answers a request without the login 401, with the Basic
// challenge that makes the engine send its credentials.
func (reg *Registry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reg.requests.Add(1)
	if reg.Login != nil {
		if user, password, ok := r.BasicAuth(); !ok || user != reg.Login.Username || password != reg.Login.Password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
	}
	reg.handler.ServeHTTP(w, r)
}
