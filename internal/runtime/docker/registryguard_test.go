package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/registrytest"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// TestOptions_checkRegistry: a pull from a registry whose address is not
// public is refused as the workload's fault, unless the node's owner
// lists the registry; a name that does not resolve is left to the pull.
func TestOptions_checkRegistry(t *testing.T) {
	hosts := map[string][]string{
		"ghcr.io":        {"140.82.112.34"},
		"registry-1.x":   {"2606:4700::6810:84e5"},
		"registry.lan":   {"192.168.1.5"},
		"mixed.example":  {"140.82.112.34", "10.0.0.7"},
		"rebind.example": {"::ffff:127.0.0.1"},
	}
	o := Options{LocalRegistries: []string{"127.0.0.1:5000", "registry.lan"},
		lookupHost: func(_ context.Context, host string) ([]netip.Addr, error) {
			var out []netip.Addr
			for _, a := range hosts[host] {
				out = append(out, netip.MustParseAddr(a))
			}
			if host == "flaky.example" {
				return nil, &net.DNSError{Err: "i/o timeout", Name: host, IsTimeout: true}
			}
			if out == nil {
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}
			return out, nil
		}}
	for _, tt := range []struct {
		ref     string
		refused string // the address named, "" if allowed
	}{
		{"ghcr.io/acme/train:1", ""},
		{"registry-1.x/acme/train:1", ""},
		{"nowhere.example/acme/train:1", "does not exist"},
		{"flaky.example/acme/train:1", "cannot look up"},
		{"127.0.0.1:5000/acme/train:1", ""}, // listed
		{"registry.lan/acme/train:1", ""},   // listed
		{"127.0.0.1:5001/acme/train:1", "127.0.0.1"},
		{"localhost:5000/acme/train:1", "localhost"},
		{"builds.localhost/acme/train:1", "localhost"},
		{"[::1]:5000/acme/train:1", "::1"},
		{"10.1.2.3/acme/train:1", "10.1.2.3"},
		{"172.16.0.1:443/acme/train:1", "172.16.0.1"},
		{"169.254.169.254/latest/meta:1", "169.254.169.254"},
		{"100.64.0.1/acme/train:1", "100.64.0.1"},
		{"0.0.0.0:80/acme/train:1", "0.0.0.0"},
		{"[fd00::1]/acme/train:1", "fd00::1"},
		{"[fe80::1]:5000/acme/train:1", "fe80::1"},
		{"mixed.example/acme/train:1", "10.0.0.7"},
		{"rebind.example/acme/train:1", "127.0.0.1"},
	} {
		err := o.checkRegistry(context.Background(), tt.ref)
		switch {
		case tt.refused == "does not exist" || tt.refused == "cannot look up":
			want := map[string]string{"does not exist": idlegrid.EINVALID, "cannot look up": idlegrid.EINTERNAL}[tt.refused]
			if idlegrid.ErrorCode(err) != want || !strings.Contains(fmt.Sprint(err), tt.refused) {
				t.Errorf("checkRegistry(%s) = %v, want %s saying it %s", tt.ref, err, want, tt.refused)
			}
		case tt.refused == "" && err != nil:
			t.Errorf("checkRegistry(%s) = %v, want allowed", tt.ref, err)
		case tt.refused != "" && (idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN ||
			!strings.Contains(err.Error(), "("+tt.refused+")") || !strings.Contains(err.Error(), "sandbox.local_registries")):
			t.Errorf("checkRegistry(%s) = %v, want EFORBIDDEN naming %s and sandbox.local_registries", tt.ref, err, tt.refused)
		}
	}
}

// TestRuntime_Start_LocalRegistry: a workload whose image names a
// registry on the node's own machine is refused, with or without a login,
// before the engine sends the registry a single request.
func TestRuntime_Start_LocalRegistry(t *testing.T) {
	t.Parallel()
	reg := registrytest.New(t, "renter", "s3cret-Pa55")
	ref := mustPushedImage(t, "acme/local", reg)[0]
	before := reg.Requests()
	r := mustRuntime(t, Options{})
	for _, auth := range []*idlegrid.RegistryAuth{nil, reg.Login} {
		w := testWorkload(nil)
		w.Job.Image, w.RegistryAuth = ref, auth
		err := r.Start(context.Background(), w, make(chan runtime.Event, 1))
		if idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN || !strings.Contains(err.Error(), "sandbox.local_registries") {
			t.Errorf("Start (login %v): %v, want EFORBIDDEN saying how the node's owner may allow the registry", auth != nil, err)
		}
		mustBeGone(t, w.LeaseID)
	}
	if n := reg.Requests() - before; n != 0 {
		t.Errorf("the registry had %d requests from the refused pulls, want none", n)
	}
}

// TestMissingError_unknownHost: a registry whose name does not exist is
// the image's name at fault (EINVALID), not the node.
func TestMissingError_unknownHost(t *testing.T) {
	engine := errors.New(`Error response from daemon: Get "https://nowhere.invalid/v2/": dial tcp: lookup nowhere.invalid on 127.0.0.11:53: no such host`)
	for _, err := range []error{
		missingError("nowhere.invalid/acme/x:1", engine),
		loginError("nowhere.invalid/acme/x:1", idlegrid.RegistryAuth{Registry: "nowhere.invalid", Username: "u", Password: "p"}, engine),
	} {
		if idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), "its registry nowhere.invalid does not exist") {
			t.Errorf("got %v, want EINVALID saying the registry does not exist", err)
		}
	}
	for _, engine := range []string{
		`Error response from daemon: Get "https://ghcr.io/v2/": dial tcp: lookup ghcr.io: i/o timeout`,
		`Error response from daemon: Get "https://ghcr.io/v2/": proxyconnect tcp: dial tcp: lookup proxy.corp on 127.0.0.53:53: no such host`,
	} {
		if err := missingError("ghcr.io/acme/x:1", errors.New(engine)); idlegrid.ErrorCode(err) == idlegrid.EINVALID {
			t.Errorf("%s: %v, want the node's problem, not the image's", engine, err)
		}
	}
}
