package cli

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/runtime/docker"
)

// netProbe is what 'idlegrid agent net-probe' could reach of the
// addresses it was given. 'idlegrid agent --check' runs it on the
// workloads' network, as a workload, to show the owner what of the
// machine and its network a renter's container can reach.
type netProbe struct {
	Reached []string `json:"reached"` // host:port, in the order given
}

var netProbeHelp = help{
	usage: "idlegrid agent net-probe HOST:PORT...",
	about: `Try a TCP connection to each address, for a second at most, and print as
JSON those that answered. 'idlegrid agent --check' runs it in a container on
the workloads' network, as a renter's workload would run, to show which of
the machine's own services and the cloud's metadata address a workload can
reach. It takes no flags.`,
	examples: "idlegrid agent net-probe 169.254.169.254:80 172.18.0.1:22",
}

// metadataAddress is the cloud metadata service's, where a cloud VM's
// credentials are to be had by whoever can connect.
const metadataAddress = "169.254.169.254:80"

// probeDial is how long net-probe waits for each connection.
const probeDial = time.Second

// maxProbedPorts caps the machine's listening ports the check tries.
const maxProbedPorts = 64

// probeNet tries every address at once and returns those that answered.
func probeNet(ctx context.Context, addrs []string) netProbe {
	reached := make([]bool, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() {
			d := net.Dialer{Timeout: probeDial}
			if c, err := d.DialContext(ctx, "tcp", a); err == nil {
				c.Close()
				reached[i] = true
			}
		})
	}
	wg.Wait()
	p := netProbe{Reached: []string{}}
	for i, a := range addrs {
		if reached[i] {
			p.Reached = append(p.Reached, a)
		}
	}
	return p
}

// runNetProbe runs the probe in the image ref on the network networkID,
// in a sandbox like a workload's, and returns what it reached.
func runNetProbe(ctx context.Context, cli *client.Client, ref, networkID string, addrs []string) (netProbe, error) {
	var p netProbe
	cfg := &container.Config{Image: ref, Cmd: addrs}
	err := runProbe(ctx, cli, cfg, &container.HostConfig{NetworkMode: container.NetworkMode(networkID)}, &p)
	return p, err
}

// listeningPorts are the TCP ports this machine's services listen on at
// every address (0.0.0.0 or ::), which a workload reaches through its
// network's gateway, from the kernel's tables under root/proc/net.
func listeningPorts(root string) []int {
	seen := map[int]bool{}
	for _, f := range []string{"tcp", "tcp6"} {
		for _, port := range wildcardListeners(filepath.Join(root, "proc/net", f)) {
			seen[port] = true
		}
	}
	return slices.Sorted(func(yield func(int) bool) {
		for p := range seen {
			if !yield(p) {
				return
			}
		}
	})
}

// wildcardListeners reads one of /proc/net/tcp{,6}: lines whose local
// address is all zeros, port in hex, and whose state is 0A (LISTEN).
func wildcardListeners(path string) []int {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var ports []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[3] != "0A" {
			continue
		}
		addr, portHex, ok := strings.Cut(fields[1], ":")
		if b, err := hex.DecodeString(addr); !ok || err != nil || strings.Trim(string(b), "\x00") != "" {
			continue
		}
		if port, err := strconv.ParseUint(portHex, 16, 16); err == nil {
			ports = append(ports, int(port))
		}
	}
	return ports
}

// checkWorkloadNetwork runs the network probe on the workloads' network
// against the cloud metadata address and this machine's services that
// listen on every address, and warns of those a workload reaches.
func (c *agentCheck) checkWorkloadNetwork(ctx context.Context) {
	const name = "workload network"
	switch {
	case c.cfg == nil:
		c.add(name, checkWarn, "skipped: the config is not valid", "")
		return
	case c.cfg.RuntimeName() == agent.RuntimeFake:
		c.add(name, checkOK, "not needed: the fake runtime runs no containers", "")
		return
	case c.cfg.Sandbox.NoNetwork:
		c.add(name, checkOK, "workloads have no network (sandbox.no_network)", "")
		return
	case c.engine == nil:
		c.add(name, checkWarn, "skipped: no Docker engine", "")
		return
	}
	bridge, gateway, networkID, err := c.workloadBridge(ctx)
	if err != nil {
		c.add(name, checkFail, err.Error(), "")
		return
	}
	ports := listeningPorts(probeRoot)
	addrs := []string{metadataAddress}
	for _, port := range ports[:min(len(ports), maxProbedPorts)] {
		addrs = append(addrs, net.JoinHostPort(gateway, strconv.Itoa(port)))
	}
	ref, err := selfImage(ctx, c.engine, "idlegrid/net-probe", "agent", "net-probe")
	if err != nil {
		c.add(name, checkFail, "cannot make the probe image: "+err.Error(), "")
		return
	}
	p, err := runNetProbe(ctx, c.engine, ref, networkID, addrs)
	if err != nil {
		c.add(name, checkFail, err.Error(), "")
		return
	}
	c.reportReached(name, bridge, len(ports), p.Reached)
}

// reportReached adds the check's line: what a workload reached of the
// metadata address and the machine's listening ports, and how to close it.
func (c *agentCheck) reportReached(name, bridge string, ports int, reached []string) {
	if len(reached) == 0 {
		c.add(name, checkOK, fmt.Sprintf("a workload reaches neither the cloud metadata address (%s) nor this machine's %d services listening on every address", metadataAddress, ports), "")
		return
	}
	var what []string
	for _, a := range reached {
		if a == metadataAddress {
			what = append(what, a+" (cloud metadata: a cloud VM's credentials)")
		} else {
			what = append(what, a+" (this machine)")
		}
	}
	c.add(name, checkWarn, "a workload reaches "+strings.Join(what, ", "),
		fmt.Sprintf("bind this machine's services to 127.0.0.1, or firewall the workloads' bridge %s: iptables -I INPUT -i %s -p tcp -m conntrack --ctstate NEW -j DROP; "+
			"iptables -I DOCKER-USER -i %s -d 169.254.169.254 -j DROP; or set sandbox.no_network: true", bridge, bridge, bridge))
}

// workloadBridge makes sure the workloads' network exists, as an agent's
// runtime would, and returns its bridge interface, its gateway (IPv4
// where it has one) and its ID.
func (c *agentCheck) workloadBridge(ctx context.Context) (bridge, gateway, id string, err error) {
	rt, err := docker.New(ctx, docker.Options{Client: c.engine, NodeID: "agent-check"})
	if err != nil {
		return "", "", "", err
	}
	defer rt.Close()
	n, err := c.engine.NetworkInspect(ctx, rt.Network(), network.InspectOptions{})
	if err != nil {
		return "", "", "", fmt.Errorf("inspect the workloads' network %s: %w", docker.WorkloadNetwork, err)
	}
	for _, cfg := range n.IPAM.Config {
		if ip := net.ParseIP(cfg.Gateway); ip != nil && (gateway == "" || ip.To4() != nil) {
			gateway = cfg.Gateway
		}
	}
	if gateway == "" {
		return "", "", "", fmt.Errorf("the workloads' network %s has no gateway address", docker.WorkloadNetwork)
	}
	bridge = n.Options["com.docker.network.bridge.name"]
	if bridge == "" {
		bridge = "br-" + n.ID[:12]
	}
	return bridge, gateway, n.ID, nil
}
