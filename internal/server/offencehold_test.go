package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// levelsHeld is levelsByScore with a two-hour offence hold, short enough
// for a test to see it end.
var levelsHeld = mustPolicy(`version: 3
challenges: {allow_simulated_runners: true, per_node_per_day: 0}
levels:
  offence_hold: 2h
  rules:
    - {level: 1, name: established, min_score: 0.85, min_gpu_hours: 0, verified_hardware: true}
    - {level: 2, name: trusted,     min_score: 0.92, min_gpu_hours: 0, verified_hardware: true}
    - {level: 3, name: elite,       min_score: 0.97, min_gpu_hours: 0, verified_hardware: true}
`)

// mustTrusted is a market under levelsHeld whose barn-1, the only node
// that takes the tests' jobs, passed its challenges and completed three
// leases: 14/15 = 0.933, level 2, gold work.
func mustTrusted(t *testing.T) *testMarket {
	t.Helper()
	m := mustMarketWith(t, levelsHeld)
	makeTrusted(t, m)
	return m
}

// makeTrusted makes m's barn-1, the only node that takes its jobs,
// trusted: verified hardware and three leases served.
func makeTrusted(t *testing.T, m *testMarket) {
	t.Helper()
	onlyOnNode(t, m)
	mustVerify(t, m, m.node, m.nodeID, "barn-1")
	for range 3 {
		runOnNode(t, m, succeeded)
	}
}

// An upheld offence holds every node of its provider, and the provider, at
// level 0 for the policy's offence hold whatever their record: a trusted
// node takes no gold work at once, and its level returns when the hold
// ends, at the reaper's next look.
func TestServer_OffenceHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustTrusted(t)
		providerID := callerID(m.provider)
		if n := mustNode(t, m); n.Level != 2 {
			t.Fatalf("before the offence barn-1 is level %d, want 2", n.Level)
		}
		d, err := m.srv.OpenDispute(m.admin, idlegrid.Dispute{Offence: "mismatched_result", ProviderID: providerID,
			NodeID: m.nodeID, Evidence: "the renter's re-run differs"})
		if err != nil {
			t.Fatal(err)
		}
		if n := mustNode(t, m); n.Level != 2 {
			t.Fatalf("with the dispute only open barn-1 is level %d, want 2: an open charge holds nothing", n.Level)
		}
		if _, err := m.srv.ResolveDispute(m.admin, d.ID, idlegrid.DisputeUpheld, "two re-runs agree with each other"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the restander, off the request

		// Held at once: the node, its view and its provider; its
		// follow-up, done, is gone.
		wantNoFollowUps(t, m)
		if n := mustNode(t, m); n.Level != 0 {
			t.Fatalf("after the offence barn-1 is level %d (reliability %.4f), want 0", n.Level, n.Reliability)
		}
		v := mustNodeReputation(t, m, m.admin)
		reasons := strings.Join(v.Detail.LevelReasons, "; ")
		if v.Level != 0 || !strings.Contains(reasons, "held at level 0: dispute "+d.ID+" (mismatched_result) of provider "+providerID+" upheld on") {
			t.Errorf("node view: level %d, reasons %q; want 0, held by dispute %s", v.Level, reasons, d.ID)
		}
		if c := v.Detail.LevelChanges[0]; c.ToName != "newcomer" || !strings.Contains(strings.Join(c.Reasons, "; "), d.ID) {
			t.Errorf("the newest level change %+v, want the demotion naming the dispute", c)
		}
		for _, b := range v.Badges {
			if b == "gold" {
				t.Errorf("badges %v show gold on a held node", v.Badges)
			}
		}
		wantNotices(t, m, m.provider, "dispute "+d.ID+" (mismatched_result) was upheld",
			"Every node of yours holds level 0 (newcomer) until "+time.Now().Add(2*time.Hour).UTC().Format(time.RFC3339)+
				", whatever its record, and takes no gold work meanwhile (the trust policy's offence hold)")
		pv, err := m.srv.ProviderReputation(m.admin, providerID)
		if err != nil || pv.Level != 0 || !strings.Contains(strings.Join(pv.Detail.LevelReasons, "; "), "held at level 0") {
			t.Errorf("provider view: %+v (%v), want level 0, held", pv, err)
		}
		gold := mustGoldWait(t, m, "on a held node")

		// A lease's end within the hold keeps it: each save reads it.
		if _, err := m.srv.CancelJob(m.renter, gold.ID); err != nil {
			t.Fatal(err)
		}
		runOnNode(t, m, succeeded)
		if n := mustNode(t, m); n.Level != 0 {
			t.Fatalf("a lease's end within the hold left barn-1 at level %d, want 0", n.Level)
		}

		// The hold ends two hours after the upholding; the reaper's next
		// look at the node (within ten minutes) promotes it again.
		m.advance(t, 2*time.Hour+11*time.Minute)
		if n := mustNode(t, m); n.Level != 2 {
			t.Fatalf("after the hold barn-1 is level %d (reliability %.4f), want 2 again", n.Level, n.Reliability)
		}
		v = mustNodeReputation(t, m, m.admin)
		if c := v.Detail.LevelChanges[0]; c.FromName != "newcomer" || c.ToName != "trusted" {
			t.Errorf("the newest level change %+v, want the promotion back to trusted", c)
		}
	})
}

// An offence upheld while its nodes were not restood (the server stopped
// between the two) holds them from the reaper's next look at each.
func TestServer_OffenceHold_reaperFindsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustTrusted(t)
		now := time.Now()
		d := &idlegrid.Dispute{ID: idlegrid.NewID("dispute"), Offence: "forged_receipt", State: idlegrid.DisputeUpheld,
			ProviderID: callerID(m.provider), NodeID: m.nodeID, Evidence: "a receipt its key did not sign",
			Resolution: "proven", ResolvedBy: "market", ResolvedAt: &now, CreatedAt: now}
		if err := m.store.OpenDispute(context.Background(), d, nil, nil); err != nil {
			t.Fatal(err)
		}
		if n := mustNode(t, m); n.Level != 2 {
			t.Fatalf("barn-1 is level %d before the reaper looked, want 2", n.Level)
		}
		m.advance(t, 11*time.Minute)
		if n := mustNode(t, m); n.Level != 0 {
			t.Fatalf("after the reaper's look barn-1 is level %d, want 0: held by %s", n.Level, d.ID)
		}
	})
}

// An upheld dispute stores the offence hold's restand as a follow-up in
// its own transaction: when the server stopped before restanding, the
// reaper does it once due, for a node the reaper's looks pass over (lost
// before, with no heartbeat or uptime to look at).
func TestServer_OffenceHold_followUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustTrusted(t)
		ctx := context.Background()
		if err := m.store.SetNodeState(ctx, m.nodeID, idlegrid.NodeLost, time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // the reaper saves its uptime, gone offline, and looks at it no more
		synctest.Wait()
		now := time.Now()
		d := &idlegrid.Dispute{ID: idlegrid.NewID("dispute"), Offence: "forged_receipt", State: idlegrid.DisputeUpheld,
			ProviderID: callerID(m.provider), NodeID: m.nodeID, Evidence: "a receipt its key did not sign",
			Resolution: "proven", ResolvedBy: "market", ResolvedAt: &now, CreatedAt: now}
		f := &idlegrid.FollowUp{ID: "hold:" + d.ID, Kind: "provider_held", Body: "{}", DueAt: now.Add(2 * time.Minute), CreatedAt: now}
		if err := m.store.OpenDispute(ctx, d, nil, f); err != nil { // and the coordinator stopped here
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := mustNode(t, m); n.Level != 2 {
			t.Fatalf("before its follow-up was due lost barn-1 is level %d, want 2", n.Level)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if n := mustNode(t, m); n.Level != 0 || n.State != idlegrid.NodeLost {
			t.Fatalf("after the follow-up barn-1 is %s at level %d, want lost at 0: held by %s", n.State, n.Level, d.ID)
		}
		wantNoFollowUps(t, m)
	})
}

// A job's least trust level (min_trust_level) keeps it off nodes below
// it, in any tier: a silver job at level 2 runs on trusted barn-1, one at
// level 3 waits naming the level, and once barn-1's provider is held for
// an offence even level 1 keeps silver work off it. A level above the
// trust policy's highest is refused at submission.
func TestServer_MinTrustLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustTrusted(t)
		submitAt := func(level int) *idlegrid.Job {
			t.Helper()
			spec := rtxSpec(idlegrid.TierSilver)
			spec.MinTrustLevel = level
			j, err := m.srv.SubmitJob(m.renter, spec)
			if err != nil {
				t.Fatal(err)
			}
			m.advance(t, 10*time.Second)
			j, err = m.srv.FindJob(m.renter, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j
		}
		wantWaits := func(j *idlegrid.Job, when string) {
			t.Helper()
			if j.State != idlegrid.JobQueued || !strings.Contains(j.Reason, "1 trust level") {
				t.Errorf("a silver job at level %d %s: %s (%s), want queued, barn-1 below its trust level", j.MinTrustLevel, when, j.State, j.Reason)
			}
			if _, err := m.srv.CancelJob(m.renter, j.ID); err != nil {
				t.Fatal(err)
			}
		}
		if j := submitAt(2); j.State == idlegrid.JobQueued {
			t.Errorf("a silver job at level 2 waits (%s), want it on trusted barn-1", j.Reason)
		} else if _, err := m.srv.CancelJob(m.renter, j.ID); err != nil {
			t.Fatal(err)
		}
		wantWaits(submitAt(3), "on a level 2 node")

		spec := rtxSpec(idlegrid.TierSilver)
		spec.MinTrustLevel = 4
		_, err := m.srv.SubmitJob(m.renter, spec)
		if e := (*idlegrid.Error)(nil); !errors.As(err, &e) || e.Field != "job.min_trust_level" || !strings.Contains(e.Message, "highest level is 3 (elite)") {
			t.Errorf("a job at level 4 under a policy of three: %v, want refused naming job.min_trust_level", err)
		}

		d, err := m.srv.OpenDispute(m.admin, idlegrid.Dispute{Offence: "mismatched_result", ProviderID: callerID(m.provider),
			NodeID: m.nodeID, Evidence: "the renter's re-run differs"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.srv.ResolveDispute(m.admin, d.ID, idlegrid.DisputeUpheld, "two re-runs agree with each other"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()              // the restander, off the request
		m.advance(t, 10*time.Minute) // past the cancelled leases' ends
		wantWaits(submitAt(1), "on a held node")
	})
}
