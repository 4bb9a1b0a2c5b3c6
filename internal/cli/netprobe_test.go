package cli

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestListeningPorts: the ports of sockets listening on every address, in
// both of the kernel's tables; not those on one address, nor connections.
func TestListeningPorts(t *testing.T) {
	root := t.TempDir()
	header := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	tables := map[string]string{
		"tcp": header +
			"   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n" + // *:22 listening
			"   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1\n" + // 127.0.0.1:8080
			"   2: 00000000:1F92 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 3 1\n", // a connection
		"tcp6": header +
			"   0: 00000000000000000000000000000000:1F91 00000000000000000000000000000000:0000 0A 0 0 0 0 0 4 1\n" + // [::]:8081
			"   1: 00000000000000000000000001000000:1F93 00000000000000000000000000000000:0000 0A 0 0 0 0 0 5 1\n" + // [::1]:8083
			"   2: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 0 0 0 0 0 6 1\n", // [::]:22 again
	}
	if err := os.MkdirAll(filepath.Join(root, "proc/net"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, table := range tables {
		if err := os.WriteFile(filepath.Join(root, "proc/net", name), []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := listeningPorts(root), []int{22, 8081}; !slices.Equal(got, want) {
		t.Errorf("listeningPorts = %v, want %v", got, want)
	}
}

// TestProbeNet: the addresses that took a connection, in the order given.
func TestProbeNet(t *testing.T) {
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	got := probeNet(context.Background(), []string{closedAddr, open.Addr().String()})
	if !slices.Equal(got.Reached, []string{open.Addr().String()}) {
		t.Errorf("reached %q, want only %s", got.Reached, open.Addr())
	}
}

// TestAgentCheck_WorkloadNetwork: the check warns of a service of this
// machine listening on every address, which a workload reaches through its
// network's gateway, and says how to close it; with no network for
// workloads it has nothing to say.
func TestAgentCheck_WorkloadNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a probe image and runs it in a container; skipped with -short")
	}
	mustDocker(t)
	l, err := net.Listen("tcp", ":0") // every address, as a careless service would
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ":" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	path, _ := mustCheckConfig(t, "http://127.0.0.1:1", "fake_gpus: 1xT4\nruntime: docker\n")
	lines := checkedLines(t, run(t, nil, "agent", "--check", "--config", path).out)
	want(t, lines, "workload network", checkWarn, port+" (this machine)", "iptables -I INPUT -i ", "sandbox.no_network: true")

	path, _ = mustCheckConfig(t, "http://127.0.0.1:1", "fake_gpus: 1xT4\nruntime: docker\nsandbox: {no_network: true}\n")
	lines = checkedLines(t, run(t, nil, "agent", "--check", "--config", path).out)
	want(t, lines, "workload network", checkOK, "workloads have no network")
}
