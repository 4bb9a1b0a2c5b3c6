package server_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// goldForAll lets newcomers run gold jobs, for the tests that are not about
// trust levels.
var goldForAll = mustPolicy("version: 1\ngold: {min_level: 0}\n")

// levelsByScore is the default policy with levels that need no GPU-hours,
// so that a few leases move a node between them: a newcomer (0.900) holds
// level 1, level 2 needs 0.920 and is kept down to 0.900. The tests answer
// challenges on the CPU, at the simulated size, which it lets count.
var levelsByScore = mustPolicy(`version: 2
challenges: {allow_simulated_runners: true}
levels:
  rules:
    - {level: 1, name: established, min_score: 0.85, min_gpu_hours: 0, verified_hardware: true}
    - {level: 2, name: trusted,     min_score: 0.92, min_gpu_hours: 0, verified_hardware: true}
    - {level: 3, name: elite,       min_score: 0.97, min_gpu_hours: 0, verified_hardware: true}
`)

func mustPolicy(yaml string) *trustpolicy.Policy {
	p, err := trustpolicy.Parse([]byte(yaml))
	if err != nil {
		panic(err)
	}
	return p
}

// onlyOnNode makes barn-1 the only node that can take the tests' jobs:
// barn-2 offers another GPU model.
func onlyOnNode(t *testing.T, m *testMarket) {
	t.Helper()
	rival := testOffer("barn-2")
	for i := range rival.GPUs {
		rival.GPUs[i].Model = "A100-80GB"
	}
	if err := m.srv.UpdateOffer(m.rival, idlegrid.OfferRequest{Offer: rival}); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
}

func rtxSpec(tier idlegrid.Tier) idlegrid.JobSpec {
	spec := testSpec()
	spec.Tier, spec.GPUModels = tier, []string{"RTX4090"}
	return spec
}

// pendingStarts returns the leases barn-1 has been told to start.
func pendingStarts(t *testing.T, m *testMarket) []*idlegrid.Lease {
	t.Helper()
	cmds, err := m.srv.Commands(m.node, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []*idlegrid.Lease
	for _, c := range cmds {
		if c.Kind == idlegrid.CommandStart {
			out = append(out, c.Lease)
		}
	}
	return out
}

// runOnNode runs the lease barn-1 was told to start, submitting a silver
// job when none waits, for a minute, and ends it as end says.
func runOnNode(t *testing.T, m *testMarket, end idlegrid.LeaseReport) *idlegrid.Lease {
	t.Helper()
	starts := pendingStarts(t, m)
	if len(starts) == 0 {
		if _, err := m.srv.SubmitJob(m.renter, rtxSpec(idlegrid.TierSilver)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		starts = pendingStarts(t, m)
	}
	if len(starts) != 1 {
		t.Fatalf("barn-1 has %d leases to start, want 1", len(starts))
	}
	l := starts[0]
	if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
		t.Fatal(err)
	}
	m.advance(t, time.Minute)
	if err := m.srv.ReportLease(m.node, l.ID, end); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return l
}

var (
	succeeded     = idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: new(int)}
	providerFault = idlegrid.LeaseReport{State: idlegrid.LeaseFailed, Fault: idlegrid.FaultProvider, Message: "GPU fell off the bus"}
	workloadFault = idlegrid.LeaseReport{State: idlegrid.LeaseFailed, ExitCode: exitCode(1)}
)

func exitCode(c int) *int { return &c }

func mustNodeReputation(t *testing.T, m *testMarket, as context.Context) *idlegrid.ReputationView {
	t.Helper()
	v, err := m.srv.NodeReputation(as, m.nodeID)
	if err != nil {
		t.Fatalf("NodeReputation: %v", err)
	}
	return v
}

func mustNode(t *testing.T, m *testMarket) *idlegrid.Node {
	t.Helper()
	n, err := m.store.FindNode(context.Background(), m.nodeID)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// mustGoldWait submits a gold job and fails t unless, 10 s on, it waits
// at the reliability bar (where says when); it returns the job.
func mustGoldWait(t *testing.T, m *testMarket, where string) *idlegrid.Job {
	t.Helper()
	gold, err := m.srv.SubmitJob(m.renter, rtxSpec(idlegrid.TierGold))
	if err != nil {
		t.Fatal(err)
	}
	m.advance(t, 10*time.Second)
	if got, _ := m.srv.FindJob(m.renter, gold.ID); got.State != idlegrid.JobQueued || !strings.Contains(got.Reason, "reliability bar") {
		t.Fatalf("gold job %s = %s (%s), want queued at the reliability bar", where, got.State, got.Reason)
	}
	return gold
}

func near(got, want float64) bool { return math.Abs(got-want) < 1e-4 }

func TestServer_Reputation_score(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, levelsByScore)
		onlyOnNode(t, m)
		if got := mustNodeReputation(t, m, m.provider).Score; !near(got, 0.9) {
			t.Fatalf("newcomer score = %.4f, want the prior 0.9000", got)
		}
		// Two failures the node caused: (0 + 9) / (0 + 9 + 2 + 1).
		runOnNode(t, m, providerFault)
		runOnNode(t, m, providerFault)
		v := mustNodeReputation(t, m, m.provider)
		if !near(v.Score, 9.0/12) {
			t.Fatalf("after two provider faults score = %.4f, want %.4f (%s)", v.Score, 9.0/12, v.Detail.Formula)
		}
		if got := mustNode(t, m).Reliability; !near(got, 9.0/12) {
			t.Errorf("the engine ranks barn-1 by %.4f, want its score %.4f", got, 9.0/12)
		}
		// A workload failure is the renter's: no fact about the node.
		runOnNode(t, m, workloadFault)
		// Three completions: (3 + 9) / (3 + 9 + 2 + 1).
		for range 3 {
			runOnNode(t, m, succeeded)
		}
		v = mustNodeReputation(t, m, m.provider)
		if !near(v.Score, 12.0/15) {
			t.Fatalf("after three completions score = %.4f, want %.4f (%s)", v.Score, 12.0/15, v.Detail.Formula)
		}
		if got := mustNode(t, m).Reliability; !near(got, 12.0/15) {
			t.Errorf("the engine ranks barn-1 by %.4f, want its score %.4f", got, 12.0/15)
		}
		leases := v.Detail.Dimensions[0]
		if leases.Dimension != "leases" || !near(leases.Good, 3) || !near(leases.Bad, 2) {
			t.Errorf("lease evidence = %+v, want 3 good and 2 bad", leases)
		}
		var kinds []string
		for _, f := range v.Detail.Facts {
			kinds = append(kinds, f.Kind)
		}
		if got, want := strings.Join(kinds, ","), "lease_completed,lease_completed,lease_completed,lease_failed,lease_failed"; got != want {
			t.Errorf("facts newest first = %s, want %s", got, want)
		}

		// The provider's score pools its nodes' evidence under one prior.
		pv, err := m.srv.ProviderReputation(m.provider, v.ProviderID)
		if err != nil {
			t.Fatal(err)
		}
		if !near(pv.Score, 12.0/15) {
			t.Errorf("provider score = %.4f, want %.4f", pv.Score, 12.0/15)
		}
		// The saved standing, kept by adding each node's facts, agrees.
		saved, err := m.store.FindReputation(context.Background(), idlegrid.SubjectProvider, v.ProviderID)
		if err != nil {
			t.Fatal(err)
		}
		if !near(saved.Score, 12.0/15) || !near(saved.Counts["leases"].Good, 3) || !near(saved.Counts["leases"].Bad, 2) {
			t.Errorf("saved provider standing = %.4f with %+v, want %.4f from 3 good and 2 bad leases", saved.Score, saved.Counts, 12.0/15)
		}
		// A renter sees the standing but not the evidence.
		rv := mustNodeReputation(t, m, m.renter)
		if rv.Detail != nil || !near(rv.Score, 12.0/15) || rv.LevelName == "" {
			t.Errorf("renter's view = %+v, want score and level without detail", rv)
		}
	})
}

func TestServer_Reputation_goldNeedsLevel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, levelsByScore)
		onlyOnNode(t, m)
		// The levels need verified hardware: barn-1 passes its challenges,
		// two good facts: (2 + 9) / (2 + 9 + 1) = 0.917, level 1.
		mustVerify(t, m, m.node, m.nodeID, "barn-1")
		// A verified newcomer (0.917, level 1) may not run gold under a policy that asks level 2.
		gold := mustGoldWait(t, m, "on a newcomer")
		if _, err := m.srv.CancelJob(m.renter, gold.ID); err != nil {
			t.Fatal(err)
		}
		// Three completions: 14/15 = 0.933, level 2.
		for range 3 {
			runOnNode(t, m, succeeded)
		}
		if n := mustNode(t, m); n.Level != 2 {
			t.Fatalf("after three completions barn-1 is level %d (reliability %.4f), want 2", n.Level, n.Reliability)
		}
		if _, err := m.srv.SubmitJob(m.renter, rtxSpec(idlegrid.TierGold)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if starts := pendingStarts(t, m); len(starts) != 1 || starts[0].Tier != idlegrid.TierGold {
			t.Fatalf("level-2 barn-1 was told to start %+v, want the gold lease", starts)
		}
		runOnNode(t, m, succeeded) // 15/16 = 0.938
		// One failure: 15/17 = 0.882, below level 2's 0.92 less its margin.
		runOnNode(t, m, providerFault)
		runOnNode(t, m, succeeded) // the requeued job: 16/18 = 0.889
		if n := mustNode(t, m); n.Level != 1 {
			t.Fatalf("after a provider fault barn-1 is level %d (reliability %.4f), want 1", n.Level, n.Reliability)
		}
		mustGoldWait(t, m, "after the demotion")
		if starts := pendingStarts(t, m); len(starts) != 0 {
			t.Fatalf("demoted barn-1 was told to start %+v", starts)
		}

		// Every change of level is recorded with its reasons, newest first.
		v := mustNodeReputation(t, m, m.admin)
		var got []string
		for _, c := range v.Detail.LevelChanges {
			got = append(got, c.FromName+">"+c.ToName)
			if len(c.Reasons) == 0 || c.At.IsZero() {
				t.Errorf("change %+v lacks reasons or a time", c)
			}
		}
		if want := "trusted>established,established>trusted,newcomer>established"; strings.Join(got, ",") != want {
			t.Fatalf("level changes = %s, want %s", strings.Join(got, ","), want)
		}
		demotion := v.Detail.LevelChanges[0]
		if !strings.Contains(strings.Join(demotion.Reasons, "; "), "level 2 (trusted) needs a score of 0.920") {
			t.Errorf("demotion reasons = %q, want the score level 2 needs", demotion.Reasons)
		}
	})
}

func TestServer_Reputation_defaultPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, nil)
		pv, err := m.srv.TrustPolicyView(m.renter)
		if err != nil {
			t.Fatal(err)
		}
		if pv.Version != trustpolicy.Version || pv.GoldMinLevel != 2 || len(pv.Levels) != 3 || len(pv.SHA256) != 64 {
			t.Fatalf("policy view = %+v, want the default: version %d, gold at level 2", pv, trustpolicy.Version)
		}
		if pv.OffenceHoldHours != 720 || pv.ComplaintWindowHours != 720 {
			t.Errorf("policy view: offence hold %gh, complaint window %gh; want the defaults, 720h each", pv.OffenceHoldHours, pv.ComplaintWindowHours)
		}
		v := mustNodeReputation(t, m, m.provider)
		if v.Level != 0 || v.LevelName != "newcomer" || v.PolicySHA256 != pv.SHA256 {
			t.Errorf("newcomer view = %+v, want level 0 under the policy in force", v)
		}
		if got := strings.Join(v.Detail.LevelReasons, "; "); !strings.Contains(got, "level 1 (established) needs 10 GPU-hours served, has 0") {
			t.Errorf("level reasons = %q, want the GPU-hours level 1 needs", got)
		}
		if len(v.Detail.Advice) == 0 {
			t.Errorf("no advice for a newcomer")
		}
		if _, err := m.srv.NodeReputation(context.Background(), m.nodeID); idlegrid.ErrorCode(err) != idlegrid.EUNAUTHORIZED {
			t.Errorf("anonymous NodeReputation = %v, want unauthorized", err)
		}
		if _, err := m.srv.NodeReputation(m.renter, "nod_missing"); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("NodeReputation of an unknown node = %v, want not found", err)
		}
		if _, err := m.srv.ProviderReputation(m.renter, m.renterID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("ProviderReputation of a renter = %v, want not found", err)
		}
	})
}

// heartbeatOnly lets d of bubble time pass while only the given nodes
// heartbeat.
func heartbeatOnly(t *testing.T, m *testMarket, d time.Duration, nodes ...context.Context) {
	t.Helper()
	for step := 5 * time.Second; d > 0; d -= step {
		for _, n := range nodes {
			if _, err := m.srv.Heartbeat(n, idlegrid.HeartbeatRequest{}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(min(step, d))
	}
	synctest.Wait()
}

func TestServer_Reputation_uptime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, nil)
		start := time.Now()
		offer := testOffer("barn-1")
		offer.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{
			{Start: start.Add(10 * time.Minute), End: start.Add(30 * time.Minute)},
			{Start: start.Add(40 * time.Minute), End: start.Add(60 * time.Minute)},
		}}
		if err := m.srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: offer}); err != nil {
			t.Fatal(err)
		}
		// Online through the first window: 0.05 good per hour.
		m.advance(t, 30*time.Minute+30*time.Second)
		v := mustNodeReputation(t, m, m.provider)
		if len(v.Detail.Facts) != 1 || v.Detail.Facts[0].OnlineSeconds != 1200 || v.Score <= 0.9 {
			t.Fatalf("after a window fully online: score %.4f, facts %+v; want one window of 1200 s online, above the prior", v.Score, v.Detail.Facts)
		}
		// Silent for the second half of the second window; a heartbeat
		// shows the node heard for one interval (10 s) after it.
		m.advance(t, 20*time.Minute)
		heartbeatOnly(t, m, 11*time.Minute, m.rival)
		v = mustNodeReputation(t, m, m.provider)
		if len(v.Detail.Facts) != 2 {
			t.Fatalf("facts = %+v, want both windows measured", v.Detail.Facts)
		}
		half := v.Detail.Facts[0]
		if half.Kind != "window" || half.PromisedSeconds != 1200 || half.OnlineSeconds < 600 || half.OnlineSeconds > 660 {
			t.Errorf("second window = %+v, want 1200 s promised and about 600 online", half)
		}
		// G = 0.05 per hour online, B = 0.25 per hour offline.
		on, promised := float64(1200+half.OnlineSeconds)/3600, 2400.0/3600
		want := (9 + 0.05*on) / (9 + 0.05*on + 1 + 0.25*(promised-on))
		if math.Abs(v.Score-want) > 1e-3 || v.Score >= 0.9 {
			t.Errorf("score = %.4f, want about %.4f, below the prior (%s)", v.Score, want, v.Detail.Formula)
		}
		if got := mustNode(t, m).Reliability; math.Abs(got-want) > 1e-3 {
			t.Errorf("the engine ranks barn-1 by %.4f, want about %.4f", got, want)
		}
	})
}

// A node whose agent says goodbye inside a promised window is measured as
// a silent one is: the goodbye takes it off the market, not out of its
// promise.
func TestServer_Reputation_uptimeAfterGoodbye(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, nil)
		start := time.Now()
		offer := testOffer("barn-1")
		offer.Schedule = oneWindow(start.Add(10*time.Minute), start.Add(30*time.Minute))
		if err := m.srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: offer}); err != nil {
			t.Fatal(err)
		}
		m.advance(t, 20*time.Minute)
		if err := m.srv.Goodbye(m.node); err != nil {
			t.Fatal(err)
		}
		heartbeatOnly(t, m, 11*time.Minute, m.rival)
		if s := mustNodeState(t, m, m.nodeID); s != idlegrid.NodeOffline {
			t.Fatalf("barn-1 is %s, want offline", s)
		}
		v := mustNodeReputation(t, m, m.provider)
		if fs := v.Detail.Facts; len(fs) != 1 || fs[0].PromisedSeconds != 1200 || fs[0].OnlineSeconds < 600 || fs[0].OnlineSeconds > 660 {
			t.Fatalf("facts = %+v, want the window measured: 1200 s promised, about 600 online before the goodbye", fs)
		}
	})
}

// A pass looks at a node only when one of its promised windows ends or its
// standing may have decayed; an offer that changes its windows has the
// next pass look at it.
func TestServer_Reputation_uptimeLooksWhenDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, nil)
		m.advance(t, 6*time.Minute) // every node has had its first look
		next, ok := m.srv.NextUptimeLook(m.nodeID)
		if now := time.Now(); !ok || !next.After(now) || next.After(now.Add(10*time.Minute)) {
			t.Fatalf("next look at barn-1 %s from now (watched %v), want within 10 minutes", next.Sub(now), ok)
		}
		start := time.Now()
		offer := testOffer("barn-1")
		offer.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{
			{Start: start.Add(time.Minute), End: start.Add(2 * time.Minute)},
		}}
		if err := m.srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: offer}); err != nil {
			t.Fatal(err)
		}
		if next, _ := m.srv.NextUptimeLook(m.nodeID); next.After(start) {
			t.Fatalf("after its offer changed, barn-1's next look is %s from now, want at the next pass", next.Sub(start))
		}
		m.advance(t, 10*time.Second)
		if next, _ := m.srv.NextUptimeLook(m.nodeID); !next.Equal(start.Add(2 * time.Minute)) {
			t.Fatalf("next look at barn-1 %s from the change, want when its new window ends (2m0s)", next.Sub(start))
		}
		m.advance(t, 2*time.Minute+10*time.Second)
		// Newest first: the new window, and the hours offered always before
		// the change, measured up to it (measureBeforeSchedule).
		v := mustNodeReputation(t, m, m.provider)
		if fs := v.Detail.Facts; len(fs) != 2 || fs[0].PromisedSeconds != 60 || fs[0].OnlineSeconds != 60 ||
			!fs[1].At.Equal(start) || fs[1].OnlineSeconds != fs[1].PromisedSeconds {
			t.Fatalf("facts = %+v, want the new window measured (60 s promised, 60 s online), and before it the old schedule's hours up to the change, online", fs)
		}
	})
}

// oneWindow is a schedule of one window, from start to end.
func oneWindow(start, end time.Time) idlegrid.Schedule {
	return idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{{Start: start, End: end}}}
}

// A schedule change never reaches back. A node that misses part of a
// promised window and then drops the window from its offer is measured for
// what it missed up to the change, under the schedule then in force.
func TestServer_Reputation_uptimeScheduleDropsAMissedWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, nil)
		start := time.Now()
		offer := testOffer("barn-1")
		offer.Schedule = oneWindow(start.Add(10*time.Minute), start.Add(60*time.Minute))
		if err := m.srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: offer}); err != nil {
			t.Fatal(err)
		}
		m.advance(t, 10*time.Minute)
		heartbeatOnly(t, m, 30*time.Minute, m.rival) // barn-1 misses 10:00-40:00 of its window
		offer.Schedule = oneWindow(start.Add(5*time.Hour), start.Add(6*time.Hour))
		if err := m.srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: offer}); err != nil {
			t.Fatal(err)
		}
		m.advance(t, 30*time.Second)
		v := mustNodeReputation(t, m, m.provider)
		var windows []*idlegrid.ReputationFact
		for _, f := range v.Detail.Facts {
			if f.Kind == "window" {
				windows = append(windows, f)
			}
		}
		if len(windows) != 1 || windows[0].PromisedSeconds != 1800 || windows[0].OnlineSeconds > 60 {
			t.Fatalf("window facts = %+v, want the 30 minutes of the dropped window up to the change, missed", windows)
		}
		if v.Score >= 0.9 {
			t.Errorf("score %.4f, want below the prior for the missed half hour", v.Score)
		}
	})
}

// Nor does a schedule change promise hours that were not promised: an
// owner's window that began before it was set counts from when it was set.
func TestServer_Reputation_uptimeScheduleAddsAPastWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketWith(t, nil)
		start := time.Now()
		offer := testOffer("barn-1")
		offer.Schedule = oneWindow(start.Add(5*time.Hour), start.Add(6*time.Hour))
		if err := m.srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: offer}); err != nil {
			t.Fatal(err)
		}
		heartbeatOnly(t, m, 40*time.Minute, m.rival) // barn-1 away, and not promised
		set := oneWindow(start, start.Add(50*time.Minute))
		if _, err := m.srv.SetNodeSchedule(m.provider, m.nodeID, &set); err != nil {
			t.Fatal(err)
		}
		m.advance(t, 11*time.Minute) // back for the rest of the window
		v := mustNodeReputation(t, m, m.provider)
		var windows []*idlegrid.ReputationFact
		for _, f := range v.Detail.Facts {
			if f.Kind == "window" {
				windows = append(windows, f)
			}
		}
		if len(windows) != 1 || windows[0].PromisedSeconds != 600 || windows[0].OnlineSeconds < 590 {
			t.Fatalf("window facts = %+v, want the 10 minutes of the window after it was set, online", windows)
		}
		if v.Score <= 0.9 {
			t.Errorf("score %.4f, want above the prior", v.Score)
		}
	})
}

// A node's standing and its provider's, which pools it, are saved in one
// call, so that one store transaction holds both (Store.SaveReputation):
// no crash between two saves can leave the provider without the node's
// facts.
func TestServer_Reputation_savedWithItsProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		saves := &reputationSaves{}
		m := mustMoneyMarketOn(t, func(s idlegrid.Store) idlegrid.Store { saves.Store = s; return saves })
		mustRun(t, m, testSpec(), time.Hour) // the first standings of both
		mustRun(t, m, testSpec(), time.Hour)
		saves.mu.Lock()
		defer saves.mu.Unlock()
		if len(saves.calls) < 2 {
			t.Fatalf("%d saves after two leases ended, want at least 2", len(saves.calls))
		}
		for i, call := range saves.calls {
			if len(call) != 2 || call[0].Subject != idlegrid.SubjectNode || call[1].Subject != idlegrid.SubjectProvider ||
				call[1].SubjectID != call[0].ProviderID {
				t.Errorf("save %d holds %v, want a node's standing and its provider's", i, call)
			}
		}
	})
}

// reputationSaves is a store that records each SaveReputation's standings.
type reputationSaves struct {
	idlegrid.Store
	mu    sync.Mutex
	calls [][]idlegrid.Reputation
}

func (s *reputationSaves) SaveReputation(ctx context.Context, us ...*idlegrid.ReputationUpdate) error {
	var call []idlegrid.Reputation
	for _, u := range us {
		call = append(call, *u.Reputation)
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	return s.Store.SaveReputation(ctx, us...)
}

// TestServer_NodeReputation_quarantined: a quarantined node shows no gold
// badge, whatever the policy's gold bar, and its advice ends flagged by
// its quarantine.
func TestServer_NodeReputation_quarantined(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t) // gold from level 0
		v, err := m.srv.NodeReputation(m.admin, m.nodeID)
		if err != nil || !slices.Contains(v.Badges, "gold") {
			t.Fatalf("before the quarantine: badges %v (%v), want gold", v.Badges, err)
		}
		if _, err := m.srv.QuarantineNode(m.admin, m.nodeID, "under review"); err != nil {
			t.Fatal(err)
		}
		v, err = m.srv.NodeReputation(m.admin, m.nodeID)
		if err != nil || slices.Contains(v.Badges, "gold") {
			t.Errorf("in quarantine: badges %v (%v), want no gold", v.Badges, err)
		}
		if advice := v.Detail.Advice; len(advice) == 0 || !strings.Contains(advice[len(advice)-1].Text, "in quarantine since") ||
			!strings.Contains(advice[len(advice)-1].Text, "flagged") {
			t.Errorf("in quarantine: advice %+v, want it to end flagged by the quarantine", advice)
		}
	})
}
