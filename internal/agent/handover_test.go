package agent_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// TestAgent_HandOver: an agent asked to hand over leaves its lease's
// workload running, says no goodbye and reports no end, and keeps the
// lease's receipt state; the next agent takes the workload back and the
// lease runs to its end at its one attempt, its log whole and its
// receipts one chain across both agents that bills the whole run.
func TestAgent_HandOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, srv, rt := testConfig(t), &fakeServer{}, &rtfake.Runtime{}
		pub, _ := nodePub(t, cfg)
		r := startAgent(t, cfg, srv, rt)
		r.assign(srv, "lease_a", job(3600, nil))
		waitFor(t, "lease_a to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
		time.Sleep(10 * time.Minute)
		if err := r.a.HandOver(); err != nil {
			t.Fatal(err)
		}
		if err := r.wait(t); !errors.Is(err, agent.ErrHandedOver) {
			t.Fatalf("Run = %v, want ErrHandedOver", err)
		}
		if n := len(srv.callTimes("Goodbye")); n != 0 {
			t.Errorf("the agent said goodbye %d times on a hand-over, want never: the node stays online", n)
		}
		if got := states(srv.reportsFor("lease_a")); got != "running" {
			t.Errorf("lease_a's reports: %s, want only running", got)
		}
		if _, err := os.Stat(filepath.Join(cfg.DataDir, "receipts", "lease_a.json")); err != nil {
			t.Errorf("the lease's receipt state is not kept for the next agent: %v", err)
		}
		rt.Close() // the old agent's process exits: what it left runs on

		r2 := startAgent(t, cfg, srv, rt.Successor())
		defer r2.stop(t)
		waitFor(t, "lease_a to end", func() bool { return srv.lease("lease_a").State.Terminal() })
		if l := srv.lease("lease_a"); l.State != idlegrid.LeaseSucceeded {
			t.Errorf("lease_a is %s (%s), want succeeded", l.State, l.Reason)
		}
		if secs := checkChain(t, "lease_a", pub, srv.receiptsFor("lease_a")); secs < 3590 || secs > 3610 {
			t.Errorf("the receipts bill %d GPU-seconds, want the whole run's 3600", secs)
		}
		text := logText(srv.logsFor("lease_a"))
		if !strings.Contains(text, "handed the workload over") || !strings.Contains(text, "training complete") {
			t.Errorf("lease_a's log does not show the workload handed over and finished:\n%s", text)
		}
		// Its output goes on across the hand-over: every step once.
		steps := regexp.MustCompile(`step (\d+)/`).FindAllStringSubmatch(text, -1)
		for i, m := range steps {
			if want := strconv.Itoa((i + 1) * rtfake.Steps / rtfake.Ticks); m[1] != want {
				t.Fatalf("step %s is line %d of the steps across the hand-over, want step %s: every step once, in order\n%s", m[1], i+1, want, text)
			}
		}
		if len(steps) != rtfake.Ticks {
			t.Errorf("%d steps in lease_a's log, want %d", len(steps), rtfake.Ticks)
		}
	})
}

// slowStop is a fake runtime whose workloads take a while to act on a
// stop, as one checkpointing a large model does.
type slowStop struct {
	*rtfake.Runtime
	mu    sync.Mutex
	asked map[string]bool
}

const slowStopTakes = 30 * time.Second

func (s *slowStop) Stop(leaseID string, grace time.Duration) error {
	s.mu.Lock()
	s.asked[leaseID] = true
	s.mu.Unlock()
	time.AfterFunc(slowStopTakes, func() { s.Runtime.Stop(leaseID, grace) })
	return nil
}

func (s *slowStop) stopAsked(leaseID string) func() bool {
	return func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.asked[leaseID]
	}
}

// TestAgent_HandOverWaitsForStops: a hand-over lets a workload being
// stopped exit, and reports its end, before it leaves the rest running:
// its notice runs out under this agent rather than begins again under
// the next. A lease placed meanwhile is neither started nor refused: its
// start is the next agent's. So is the start of a lease whose image is
// still being pulled: it is given up, not failed.
func TestAgent_HandOverWaitsForStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, srv := testConfig(t), &fakeServer{}
		rt := &slowStop{Runtime: &rtfake.Runtime{}, asked: map[string]bool{}}
		r := startAgent(t, cfg, srv, rt)
		r.assign(srv, "lease_a", job(3600, nil))
		waitFor(t, "lease_a to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
		pulling := job(3600, map[string]string{"FAKE_PULL_SECONDS": "600"})
		srv.assign(idlegrid.Lease{ID: "lease_p", JobID: "job_p", GPUUUIDs: r.gpus[1:], LimitSeconds: 3600, Tier: idlegrid.TierSilver}, pulling)
		waitFor(t, "lease_p's pull", func() bool {
			hb := srv.heartbeats()
			return len(hb) > 0 && len(hb[len(hb)-1].Starting) == 1
		})
		srv.requestStop("lease_a", "preempted")
		waitFor(t, "lease_a's stop", rt.stopAsked("lease_a"))
		asked := time.Now()
		if err := r.a.HandOver(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		r.assign(srv, "lease_b", job(3600, nil))
		if err := r.wait(t); !errors.Is(err, agent.ErrHandedOver) {
			t.Fatalf("Run = %v, want ErrHandedOver", err)
		}
		if waited := time.Since(asked); waited < slowStopTakes {
			t.Errorf("the hand-over took %v, less than lease_a's stop (%v)", waited, slowStopTakes)
		}
		// Meanwhile the node named the leases left to the next agent as
		// starting, so that the server waits for them.
		hb := srv.heartbeats()
		var named []string
		for _, st := range hb[len(hb)-1].Starting {
			named = append(named, st.LeaseID)
		}
		if !slices.Equal(named, []string{"lease_b", "lease_p"}) {
			t.Errorf("the last heartbeat names %v starting, want lease_b and lease_p", named)
		}
		if l := srv.lease("lease_a"); l.State != idlegrid.LeaseCancelled {
			t.Errorf("lease_a is %s (%s), want cancelled by the first agent before it handed over", l.State, l.Reason)
		}
		for _, id := range []string{"lease_b", "lease_p"} {
			if rs := srv.reportsFor(id); len(rs) != 0 {
				t.Errorf("%s's reports: %s, want none: its start is the next agent's", id, states(rs))
			}
		}
		rt.Runtime.Close()

		r2 := startAgent(t, cfg, srv, rt.Successor())
		defer r2.stop(t)
		for _, id := range []string{"lease_b", "lease_p"} {
			waitFor(t, id+" to run under the next agent", leaseIn(srv, id, idlegrid.LeaseRunning))
		}
	})
}

// TestAgent_HandOverNeedsADetacher: a runtime that cannot leave its
// workloads running refuses the hand-over, and the agent goes on.
func TestAgent_HandOverNeedsADetacher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{}
		r := startAgent(t, testConfig(t), srv, &gpuLedger{Runtime: &rtfake.Runtime{}})
		waitFor(t, "the agent to serve", func() bool { return len(srv.heartbeats()) > 0 })
		if err := r.a.HandOver(); err == nil {
			t.Error("HandOver = nil with a runtime that cannot leave its workloads")
		}
		if err := r.stop(t); err != nil {
			t.Errorf("Run = %v after a refused hand-over and a stop, want nil", err)
		}
	})
}

// TestAgent_HandOverBeforeServing: an agent that cannot publish its offer
// yet (the server is out of reach) hands over at once when asked, rather
// than once the server answers.
func TestAgent_HandOverBeforeServing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{}
		srv.setDown("UpdateOffer")
		r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{})
		time.Sleep(time.Minute)
		if err := r.a.HandOver(); err != nil {
			t.Fatal(err)
		}
		asked := time.Now()
		if err := r.wait(t); !errors.Is(err, agent.ErrHandedOver) {
			t.Fatalf("Run = %v, want ErrHandedOver", err)
		}
		if took := time.Since(asked); took > time.Second {
			t.Errorf("the hand-over took %v while the server was out of reach, want at once", took)
		}
		if n := len(srv.heartbeats()); n != 0 {
			t.Errorf("%d heartbeats from an agent that never served", n)
		}
	})
}
