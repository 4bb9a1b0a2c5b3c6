package agent_test

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/gpu"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// TestAgent_StopsLeaseTheServerEnded: a lease the server ended while its
// agent ran it (it declared the node lost during an outage, say) sends no
// stop command, as the server keeps none for ended leases; the heartbeat's
// answer names it, and the agent stops its workload at once. The receipts
// the server then refuses are logged as unpaid, not as a fault.
func TestAgent_StopsLeaseTheServerEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, srv := testConfig(t), &fakeServer{}
		var logs bytes.Buffer // written by the agent's goroutines, read once Run has returned
		r := startAgentLogging(t, cfg, srv, &rtfake.Runtime{}, func(d gpu.Detector) gpu.Detector { return d }, io.MultiWriter(testOutput(t), &logs))
		waitFor(t, "the agent to join", func() bool { return len(srv.heartbeats()) > 0 })
		r.assign(srv, "lease_x", job(3600, nil))
		waitFor(t, "the lease to run", leaseIn(srv, "lease_x", idlegrid.LeaseRunning))
		srv.setState("lease_x", idlegrid.LeaseLost)
		ended := time.Now()
		carries := func(hb idlegrid.HeartbeatRequest) bool {
			return slices.ContainsFunc(hb.Leases, func(p idlegrid.LeaseProgress) bool { return p.LeaseID == "lease_x" })
		}
		waitFor(t, "a heartbeat with the lease", func() bool { return slices.ContainsFunc(srv.heartbeats(), carries) })
		waitFor(t, "a heartbeat without it", func() bool { hbs := srv.heartbeats(); return !carries(hbs[len(hbs)-1]) })
		if took := time.Since(ended); took > time.Minute { // its run had an hour to go
			t.Errorf("the workload ran %s after the server ended its lease, want it stopped at the next heartbeat", took)
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "the server had ended the lease before these usage receipts reached it; they are not paid") ||
			strings.Contains(logs.String(), "server refused usage receipts") {
			t.Errorf("the agent's log does not tell the receipts of the ended lease as unpaid, or warns of them:\n%s", logs.String())
		}
	})
}

// TestAgent_StopsLeaseTheServerRefused: a lease whose running report the
// server refuses (it has ended it) is stopped at once, as one the
// heartbeat names ended: its GPU may already be another lease's, so even
// a bronze lease gets no notice.
func TestAgent_StopsLeaseTheServerRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRig(t, testConfig(t), nil)
		r.srv.fail("ReportLease", idlegrid.Errorf(idlegrid.ECONFLICT, "lease lease_b already lost"))
		r.lease("lease_b", bronze(3600), 120, 0)
		waitFor(t, "the stop", func() bool { _, ok := r.rt.stopped("lease_b"); return ok })
		if g, _ := r.rt.stopped("lease_b"); g != agent.StopGrace {
			t.Errorf("stopped with grace %v, want %v: the server has ended the lease", g, agent.StopGrace)
		}
		r.stop(t)
	})
}
