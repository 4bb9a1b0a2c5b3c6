package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// A renter names the image, and so the registry the node's engine pulls
// from: without a guard, "127.0.0.1:8080/x" or "10.0.0.5/x" would have the
// engine send requests to services on the provider's own machine or
// network, and show the renter their answers in the lease's failure. So a
// pull from a registry whose address is not public is refused, unless the
// node's owner lists the registry (Options.LocalRegistries). The name is
// resolved here and again by the engine, so a name whose answers change
// between the two (DNS rebinding) can still get past it: a node that must
// be sure firewalls its engine's own traffic too (deploy/README.md).

// registryLookupTimeout bounds the look-up of a registry's addresses.
const registryLookupTimeout = 5 * time.Second

// cgnat is the carrier-grade NAT range (RFC 6598), not public either.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// checkRegistry refuses, as the workload's fault (EFORBIDDEN), a pull of
// ref from a registry on the node's own machine or network: a host named
// localhost, an address that is not public, or a name any of whose
// addresses is not. A name that does not exist is the image's name at
// fault (EINVALID); one this node cannot look up now is its own problem
// (a plain error): either way nothing is pulled, since the engine may
// resolve the name otherwise than the agent does (another resolver, the
// host's /etc/hosts).
func (o *Options) checkRegistry(ctx context.Context, ref string) error {
	reg, err := idlegrid.ImageRegistry(ref)
	if err != nil || slices.Contains(o.LocalRegistries, reg) {
		return nil // the engine refuses a malformed reference itself
	}
	host := reg
	if h, _, err := net.SplitHostPort(reg); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if addr, err := netip.ParseAddr(host); err == nil {
		return refuseLocal(ref, reg, addr)
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return localRegistryError(ref, reg, "localhost")
	}
	ctx, cancel := context.WithTimeout(ctx, registryLookupTimeout)
	defer cancel()
	addrs, err := o.lookup(ctx, host)
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return idlegrid.Errorf(idlegrid.EINVALID, "image %s could not be pulled: its registry %s does not exist (%v); check the image's name", ref, reg, err)
	case err != nil:
		return fmt.Errorf("image %s: this node cannot look up its registry %s now: %w", ref, reg, err)
	}
	for _, a := range addrs {
		if err := refuseLocal(ref, reg, a); err != nil {
			return err
		}
	}
	return nil
}

// lookup resolves a registry's host name: Options.lookupHost, for tests,
// else the system's resolver, as the engine on this machine would.
func (o *Options) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if o.lookupHost != nil {
		return o.lookupHost(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// refuseLocal refuses addr unless it is a public unicast address.
func refuseLocal(ref, reg string, addr netip.Addr) error {
	addr = addr.Unmap()
	if isPublic(addr) {
		return nil
	}
	return localRegistryError(ref, reg, addr.String())
}

// isPublic reports whether addr is a unicast address on the internet:
// not loopback, private, link-local (cloud metadata services live there),
// carrier-grade NAT, unspecified or multicast.
func isPublic(addr netip.Addr) bool {
	return addr.IsValid() && addr.IsGlobalUnicast() && !addr.IsPrivate() && !cgnat.Contains(addr) &&
		!(addr.Is4() && addr.As4()[0] == 0)
}

func localRegistryError(ref, reg, addr string) error {
	return idlegrid.Errorf(idlegrid.EFORBIDDEN,
		"image %s names the registry %s, which is on the node's own machine or network (%s); nodes pull only from public registries, "+
			"so push the image to one, or ask the node's owner to list %s under sandbox.local_registries", ref, reg, addr, reg)
}
