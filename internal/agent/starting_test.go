package agent_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// TestAgent_NamesLeasesStarting: while a lease's image is pulled, every
// heartbeat names the lease as starting, with how far the pull has come,
// so that the server waits past its start timeout; once the server has ended the lease (it took too
// long), the heartbeat's answer names it, and the pull gives up.
func TestAgent_NamesLeasesStarting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{}
		rt := slowPullRuntime{pullingRuntime{Runtime: &rtfake.Runtime{}, gaveUp: make(chan struct{})}}
		r := startAgent(t, testConfig(t), srv, rt)
		waitFor(t, "the agent to join", func() bool { return len(srv.heartbeats()) > 0 })
		r.assign(srv, "lease_a", job(3600, nil))
		names := func(hb idlegrid.HeartbeatRequest) bool {
			return slices.ContainsFunc(hb.Starting, func(st idlegrid.LeaseStarting) bool { return st.LeaseID == "lease_a" })
		}
		waitFor(t, "a heartbeat naming the lease as starting", func() bool { return slices.ContainsFunc(srv.heartbeats(), names) })
		time.Sleep(10 * time.Minute) // a large image
		hbs := srv.heartbeats()
		want := idlegrid.LeaseStarting{LeaseID: "lease_a", PulledBytes: 3 << 30, ImageBytes: 8 << 30}
		if last := hbs[len(hbs)-1]; !slices.Equal(last.Starting, []idlegrid.LeaseStarting{want}) || len(last.Leases) > 0 {
			t.Fatalf("10 minutes into the pull, the heartbeat names starting %+v and running %+v; want %+v starting, none running", last.Starting, last.Leases, want)
		}
		srv.setState("lease_a", idlegrid.LeaseLost)
		waitFor(t, "the pull to give up", func() bool {
			select {
			case <-rt.pullingRuntime.gaveUp:
				return true
			default:
				return false
			}
		})
		waitFor(t, "a heartbeat no longer naming it", func() bool { hbs := srv.heartbeats(); return !names(hbs[len(hbs)-1]) })
		if got := lastReport(srv, "lease_a"); got.State == idlegrid.LeaseRunning || strings.Contains(got.Message, "could not start") {
			t.Errorf("the lease's last report = %+v, want no start and no failure of the node: the server ended it", got)
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	})
}

// slowPullRuntime is a pullingRuntime that has pulled 3 GiB of an 8 GiB
// image when it begins to wait.
type slowPullRuntime struct{ pullingRuntime }

func (r slowPullRuntime) Start(ctx context.Context, w runtime.Workload, events chan<- runtime.Event) error {
	w.OnPull(runtime.PullProgress{DoneBytes: 3 << 30, TotalBytes: 8 << 30})
	return r.pullingRuntime.Start(ctx, w, events)
}
