package agent_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/runtime"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// startsRecorder is a fake runtime that keeps the workloads it starts.
type startsRecorder struct {
	*rtfake.Runtime
	mu     sync.Mutex
	starts []runtime.Workload
}

func (r *startsRecorder) Start(ctx context.Context, w runtime.Workload, events chan<- runtime.Event) error {
	r.mu.Lock()
	r.starts = append(r.starts, w)
	r.mu.Unlock()
	return r.Runtime.Start(ctx, w, events)
}

// TestAgent_Sandbox: the node's sandbox settings reach every workload it
// starts; a capability that is no name is refused, naming the field.
func TestAgent_Sandbox(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, srv := testConfig(t), &fakeServer{}
		cfg.Sandbox.NoNetwork, cfg.Sandbox.Capabilities = true, []string{"SYS_PTRACE"}
		rt := &startsRecorder{Runtime: &rtfake.Runtime{}}
		r := startAgent(t, cfg, srv, rt)
		r.assign(srv, "lease_s", job(60, nil))
		waitFor(t, "the lease to run", leaseIn(srv, "lease_s", idlegrid.LeaseRunning))
		rt.mu.Lock()
		got := rt.starts
		rt.mu.Unlock()
		if len(got) != 1 || !got[0].NoNetwork || !slices.Equal(got[0].Capabilities, []string{"SYS_PTRACE"}) {
			t.Errorf("started %+v, want one workload with no network and SYS_PTRACE", got)
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	})
	c := mustParse(t, minimal+"sandbox: {no_network: true, capabilities: [cap_sys_ptrace, NET_ADMIN]}\n")
	if !c.Sandbox.NoNetwork || len(c.Sandbox.Capabilities) != 2 {
		t.Errorf("sandbox = %+v", c.Sandbox)
	}
	for _, c := range []string{"SYS PTRACE", "all"} {
		_, err := agent.ParseConfig([]byte(minimal + "sandbox: {capabilities: [" + c + "]}\n"))
		if e, ok := err.(*idlegrid.Error); !ok || e.Field != "sandbox.capabilities[0]" {
			t.Errorf("capability %q: %v, want an error naming sandbox.capabilities[0]", c, err)
		}
	}
	c = mustParse(t, minimal+"sandbox: {local_registries: [\"192.168.1.10:5000\", registry.lan]}\n")
	if !slices.Equal(c.Sandbox.LocalRegistries, []string{"192.168.1.10:5000", "registry.lan"}) {
		t.Errorf("local registries = %q", c.Sandbox.LocalRegistries)
	}
	if c := mustParse(t, minimal+"sandbox: {max_disk_gb: 500}\n"); c.Sandbox.MaxDiskGB != 500 {
		t.Errorf("max_disk_gb = %d, want 500", c.Sandbox.MaxDiskGB)
	}
	if _, err := agent.ParseConfig([]byte(minimal + "sandbox: {max_disk_gb: -1}\n")); !strings.Contains(fmt.Sprint(err), "sandbox.max_disk_gb") {
		t.Errorf("max_disk_gb -1: %v, want an error naming sandbox.max_disk_gb", err)
	}
	for _, r := range []string{"https://registry.lan", "registry.lan/acme", "Registry.LAN", `""`} {
		_, err := agent.ParseConfig([]byte(minimal + "sandbox: {local_registries: [" + r + "]}\n"))
		if e, ok := err.(*idlegrid.Error); !ok || e.Field != "sandbox.local_registries[0]" {
			t.Errorf("local registry %s: %v, want an error naming sandbox.local_registries[0]", r, err)
		}
	}
}
