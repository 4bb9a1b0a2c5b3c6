package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// testMarket is a coordinator with an admin, a renter with money, a provider
// and one joined node, all inside a synctest bubble.
type testMarket struct {
	srv      *server.Server
	store    idlegrid.Store
	admin    context.Context
	renter   context.Context
	renterID string
	provider context.Context
	node     context.Context
	nodeID   string
	rival    context.Context // a second node, asking more: the runner-up that sets the price
}

func as(a *idlegrid.Account) context.Context {
	return idlegrid.NewContextWithCaller(context.Background(), &idlegrid.Caller{AccountID: a.ID, Role: a.Role})
}

func mustMarket(t *testing.T) *testMarket { return mustMarketWith(t, goldForAll) }

// mustMarketWith is mustMarket under a trust policy, its configuration
// changed by tune.
func mustMarketWith(t *testing.T, policy *trustpolicy.Policy, tune ...func(*server.Config)) *testMarket {
	return mustMarketOn(t, policy, func(s idlegrid.Store) idlegrid.Store { return s }, tune...)
}

// hourly is a tune for a test that sleeps hours of the bubble's clock with
// no node able to take what waits: the scheduler's periodic pass, and the
// reaper's (which runs each heartbeat interval), come a minute apart, not
// two and ten seconds (every pass reads the database, and under the race
// detector 43,200 scheduler passes and 8,640 reaper passes a day were most
// of such a test's time). A submission or a freed GPU still wakes the
// scheduler at once; a node that stops its heartbeats is lost six times
// later than by default.
func hourly(c *server.Config) { c.SchedulePeriod, c.HeartbeatInterval = time.Minute, time.Minute }

// mustMarketOn is mustMarketWith with the server on wrap's store, which
// wraps the database, and its configuration changed by tune.
func mustMarketOn(t *testing.T, policy *trustpolicy.Policy, wrap func(idlegrid.Store) idlegrid.Store, tune ...func(*server.Config)) *testMarket {
	t.Helper()
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, sqlstoretest.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	store := wrap(db)
	cfg := server.Config{Store: store, HeartbeatInterval: 10 * time.Second, FeeBasisPoints: 1000, Logger: testLogger, TrustPolicy: policy}
	for _, f := range tune {
		f(&cfg)
	}
	srv, err := server.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(); db.Close() })

	m := &testMarket{srv: srv, store: store}
	admin, _, _, err := srv.Bootstrap(ctx, "ops", idlegrid.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	m.admin = as(admin)
	renter, _, _, err := srv.CreateAccount(m.admin, "acme", idlegrid.RoleRenter)
	if err != nil {
		t.Fatal(err)
	}
	m.renter, m.renterID = as(renter), renter.ID
	if _, err := srv.TopUp(m.admin, renter.ID, 100*idlegrid.MicrosPerUnit, "first"); err != nil {
		t.Fatal(err)
	}
	provider, _, _, err := srv.CreateAccount(m.admin, "gpu-barn", idlegrid.RoleProvider)
	if err != nil {
		t.Fatal(err)
	}
	m.provider = as(provider)
	m.nodeID = mustJoin(t, m, "barn-1")
	m.node = idlegrid.NewContextWithCaller(ctx, &idlegrid.Caller{NodeID: m.nodeID, AccountID: provider.ID, Role: idlegrid.RoleProvider})
	if err := srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: testOffer("barn-1")}); err != nil {
		t.Fatal(err)
	}
	rivalID := mustJoin(t, m, "barn-2")
	m.rival = idlegrid.NewContextWithCaller(ctx, &idlegrid.Caller{NodeID: rivalID, AccountID: provider.ID, Role: idlegrid.RoleProvider})
	rival := testOffer("barn-2")
	rival.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] = 500_000
	if err := srv.UpdateOffer(m.rival, idlegrid.OfferRequest{Offer: rival}); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustJoin(t *testing.T, m *testMarket, name string) string {
	t.Helper()
	_, secret, err := m.srv.CreateJoinToken(m.provider, "rack", 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.srv.Join(context.Background(), idlegrid.JoinRequest{
		Token: secret, PublicKey: nodekey.PublicString(pub), Offer: testOffer(name),
	})
	if err != nil {
		t.Fatal(err)
	}
	nodeKeys.Store(resp.NodeID, priv) // to sign the node's receipts
	return resp.NodeID
}

func testOffer(name string) idlegrid.Offer {
	return idlegrid.Offer{
		Name: name, Region: "eu-west", Residency: "EU", CPUCores: 32, RAMMB: 256000,
		GPUs: []idlegrid.GPU{
			{UUID: "GPU-" + name + "-0", Model: "RTX4090", VRAMMB: 24564},
			{UUID: "GPU-" + name + "-1", Model: "RTX4090", VRAMMB: 24564},
		},
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways},
		Ask: idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{
			idlegrid.TierGold: 500_000, idlegrid.TierSilver: 400_000, idlegrid.TierBronze: 300_000,
		}},
	}
}

func testSpec() idlegrid.JobSpec {
	return idlegrid.JobSpec{
		Kind: idlegrid.KindTraining, Image: "example/trainer:1", GPUs: 2, Tier: idlegrid.TierSilver,
		MaxPriceMicrosPerGPUHour: 1_000_000, DurationSeconds: 3600,
	}
}

// advance lets d of bubble time pass while the node keeps heartbeating.
func (m *testMarket) advance(t *testing.T, d time.Duration) {
	t.Helper()
	for step := 5 * time.Second; d > 0; d -= step {
		for _, n := range []context.Context{m.node, m.rival} {
			if _, err := m.srv.Heartbeat(n, idlegrid.HeartbeatRequest{}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(min(step, d))
	}
	synctest.Wait()
}

func mustLedgerBalanced(t *testing.T, s idlegrid.Store) {
	t.Helper()
	sum, err := s.LedgerSum(context.Background())
	if err != nil {
		t.Fatal(err)
	} else if sum != 0 {
		t.Fatalf("ledger sums to %d, want 0", sum)
	}
}

// mustStart submits a job, lets the scheduler place it and has the node start it.
func mustStart(t *testing.T, m *testMarket) (*idlegrid.Job, *idlegrid.Lease) {
	t.Helper()
	j, err := m.srv.SubmitJob(m.renter, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	cmds, err := m.srv.Commands(m.node, 0)
	if err != nil {
		t.Fatal(err)
	} else if len(cmds) != 1 || cmds[0].Kind != idlegrid.CommandStart || cmds[0].Lease.JobID != j.ID {
		t.Fatalf("commands = %+v, want one start for %s", cmds, j.ID)
	}
	if err := m.srv.ReportLease(m.node, cmds[0].Lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
		t.Fatal(err)
	}
	mustLedgerBalanced(t, m.store)
	return j, cmds[0].Lease
}

func TestServer_JobLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		j, l := mustStart(t, m)
		// Second-score: barn-1 (ask 0.40) wins and is paid where its score
		// ties barn-2's (ask 0.50, same reliability).
		if got, want := l.PriceMicrosPerGPUHour, idlegrid.Micros(500_000); got != want {
			t.Fatalf("price = %d, want the runner-up's 500000 (%s)", got, l.PriceNote)
		}
		// The lease says how: the engine keeps the numbers, and the note is
		// written from them as the lease is made.
		if note := l.PriceNote; !strings.HasPrefix(note, "second score: this node scores $0.4") || !strings.HasSuffix(note, "$0.500000/GPU-h") {
			t.Fatalf("price note = %q, want the second-score arithmetic ending at $0.500000/GPU-h", note)
		}
		if got, want := l.HoldMicros, idlegrid.Micros(1_000_000); got != want {
			t.Fatalf("hold = %d, want %d (2 GPUs for an hour)", got, want)
		}

		m.advance(t, 90*time.Second) // the workload runs for 90 s of bubble time
		// The node signs receipts for all of it.
		mustSendReceipts(t, m, l.ID, 60, 30)
		code := 0
		if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &code}); err != nil {
			t.Fatal(err)
		}
		got, err := m.srv.FindJob(m.renter, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantCharge := idlegrid.CostOf(500_000, 2*90) // 25,000 micros
		if got.State != idlegrid.JobSucceeded || got.ChargedMicros != wantCharge {
			t.Fatalf("job = %s charged %d, want succeeded charged %d", got.State, got.ChargedMicros, wantCharge)
		}
		b, err := m.srv.Balance(m.renter, "")
		if err != nil {
			t.Fatal(err)
		}
		if want := 100*idlegrid.MicrosPerUnit - wantCharge; b.Available != want || b.Held != 0 {
			t.Fatalf("renter balance = %d held %d, want %d held 0", b.Available, b.Held, want)
		}
		pb, err := m.srv.Balance(m.provider, "")
		if err != nil {
			t.Fatal(err)
		}
		if want := wantCharge - wantCharge/10; pb.Pending != want {
			t.Fatalf("provider earned %d pending, want %d (charge less the 10%% fee)", pb.Pending, want)
		}
		mustLedgerBalanced(t, m.store)

		// A second report of the same end moves no more money.
		err = m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &code})
		if idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			t.Fatalf("repeated report: err = %v, want conflict", err)
		}
		_, events, err := m.srv.FindLease(m.renter, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		var path []idlegrid.LeaseState
		for _, e := range events {
			path = append(path, e.To)
		}
		if want := []idlegrid.LeaseState{idlegrid.LeaseAssigned, idlegrid.LeaseRunning, idlegrid.LeaseSucceeded}; !slices.Equal(path, want) {
			t.Fatalf("lease went through %v, want %v", path, want)
		}
	})
}

func TestServer_NodeLostRequeuesAndRefunds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		j, l := mustStart(t, m)
		for range 9 { // barn-1 misses three heartbeats; barn-2 keeps beating
			if _, err := m.srv.Heartbeat(m.rival, idlegrid.HeartbeatRequest{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Second)
		}
		synctest.Wait()

		lease, _, err := m.srv.FindLease(m.renter, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if lease.State != idlegrid.LeaseLost || lease.Fault != idlegrid.FaultProvider || lease.ChargedMicros != 0 {
			t.Fatalf("lease = %s fault %q charged %d, want lost by the provider, charged nothing",
				lease.State, lease.Fault, lease.ChargedMicros)
		}
		got, err := m.srv.FindJob(m.renter, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != idlegrid.JobRunning || got.Attempts != 2 || got.ChargedMicros != 0 {
			t.Fatalf("job = %s attempt %d charged %d (%s), want requeued and placed again on barn-2",
				got.State, got.Attempts, got.ChargedMicros, got.Reason)
		}
		b, err := m.srv.Balance(m.renter, "")
		if err != nil {
			t.Fatal(err)
		}
		// The lost lease's hold came back in full; only the new lease's hold is
		// in escrow (barn-2 alone: no runner-up, so the price is the cap).
		if b.Available+b.Held != 100*idlegrid.MicrosPerUnit || b.Held != 2*idlegrid.MicrosPerUnit {
			t.Fatalf("renter balance = %d held %d, want a full refund and one new hold of 2000000", b.Available, b.Held)
		}
		n, err := m.srv.FindNode(m.provider, m.nodeID)
		if err != nil {
			t.Fatal(err)
		}
		if n.State != idlegrid.NodeLost || n.LeasesFailed != 1 {
			t.Fatalf("node = %s failed %d, want lost with one failure on record", n.State, n.LeasesFailed)
		}
		mustLedgerBalanced(t, m.store)
	})
}

func TestServer_CancelJob(t *testing.T) {
	t.Run("Queued", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarket(t)
			spec := testSpec()
			spec.MaxPriceMicrosPerGPUHour = 1 // below every ask: stays queued
			j, err := m.srv.SubmitJob(m.renter, spec)
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if got, _ := m.srv.FindJob(m.renter, j.ID); got.State != idlegrid.JobQueued || got.Reason == idlegrid.MatcherPendingReason {
				t.Fatalf("job = %s (%q), want queued with the engine's reason", got.State, got.Reason)
			}
			got, err := m.srv.CancelJob(m.renter, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != idlegrid.JobCancelled {
				t.Fatalf("state = %s, want cancelled", got.State)
			}
		})
	})
	t.Run("Running", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarket(t)
			j, l := mustStart(t, m)
			m.advance(t, 60*time.Second)
			if _, err := m.srv.CancelJob(m.renter, j.ID); err != nil {
				t.Fatal(err)
			}
			cmds, err := m.srv.Commands(m.node, 0)
			if err != nil {
				t.Fatal(err)
			} else if len(cmds) != 1 || cmds[0].Kind != idlegrid.CommandStop {
				t.Fatalf("commands = %+v, want one stop", cmds)
			}
			if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled}); err != nil {
				t.Fatal(err)
			}
			got, err := m.srv.FindJob(m.renter, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if want := idlegrid.CostOf(500_000, 2*60); got.State != idlegrid.JobCancelled || got.ChargedMicros != want {
				t.Fatalf("job = %s charged %d, want cancelled charged %d for what ran", got.State, got.ChargedMicros, want)
			}
			mustLedgerBalanced(t, m.store)
		})
	})
}

// A job with a deadline waits only while its whole run still fits before
// the deadline; then it is cancelled, saying why. One whose run could not
// fit even now is refused at once.
func TestServer_Deadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		spec := testSpec()
		spec.MaxPriceMicrosPerGPUHour = 1 // below every ask: stays queued
		deadline := time.Now().Add(time.Hour + 10*time.Minute)
		spec.Deadline = &deadline

		tight := spec
		tight.DurationSeconds = 2 * 3600
		var e *idlegrid.Error
		if _, err := m.srv.SubmitJob(m.renter, tight); !asError(err, &e) || e.Field != "job.deadline" {
			t.Fatalf("a 2 h job due in 70 min: %v, want an error naming job.deadline", err)
		}

		j, err := m.srv.SubmitJob(m.renter, spec)
		if err != nil {
			t.Fatal(err)
		}
		m.advance(t, 9*time.Minute)
		if got, _ := m.srv.FindJob(m.renter, j.ID); got.State != idlegrid.JobQueued {
			t.Fatalf("9 min in, with 61 min to its deadline: %s (%q), want still queued", got.State, got.Reason)
		}
		m.advance(t, 2*time.Minute+5*time.Second)
		got, err := m.srv.FindJob(m.renter, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != idlegrid.JobCancelled || !strings.Contains(got.Reason, "deadline") || got.EndedAt == nil {
			t.Fatalf("past its last start: %s (%q), want cancelled for its deadline", got.State, got.Reason)
		}
		mustLedgerBalanced(t, m.store)
	})
}

func TestServer_WaitsForFunds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		poor, _, _, err := m.srv.CreateAccount(m.admin, "poor", idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		j, err := m.srv.SubmitJob(as(poor), testSpec())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got, _ := m.srv.FindJob(as(poor), j.ID)
		if got.State != idlegrid.JobQueued || got.Reason == idlegrid.MatcherPendingReason {
			t.Fatalf("job = %s (%q), want queued waiting for funds", got.State, got.Reason)
		}
		if _, err := m.srv.TopUp(m.admin, poor.ID, idlegrid.MicrosPerUnit, "k1"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got, _ := m.srv.FindJob(as(poor), j.ID); got.State != idlegrid.JobRunning {
			t.Fatalf("after top-up job = %s (%q), want running", got.State, got.Reason)
		}
		mustLedgerBalanced(t, m.store)
	})
}

// TestServer_Nodes_public: anyone may see what the market shows of a node,
// so that a renter can see where its work ran and what it could rent; its
// owner and admins see the whole record. A renter's list is the market's
// offers: online nodes not in quarantine.
func TestServer_Nodes_public(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		offer := testOffer("barn-1")
		offer.Labels = map[string]string{"rack": "basement"}
		offer.GPUs[0].PCIBusID, offer.GPUs[0].VBIOSVersion = "00000000:18:00.0", "95.02.3C.40.E1"
		if err := m.srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: offer}); err != nil {
			t.Fatal(err)
		}
		rival, _, _, err := m.srv.CreateAccount(m.admin, "rival-gpus", idlegrid.RoleProvider)
		if err != nil {
			t.Fatal(err)
		}
		for _, who := range []struct {
			name   string
			ctx    context.Context
			public bool
		}{{"Owner", m.provider, false}, {"Admin", m.admin, false}, {"Renter", m.renter, true}, {"OtherProvider", as(rival), true}} {
			n, err := m.srv.FindNode(who.ctx, m.nodeID)
			if err != nil {
				t.Fatalf("%s: FindNode: %v", who.name, err)
			}
			if n.Name != "barn-1" || n.Region != "eu-west" || len(n.GPUs) != 2 || n.GPUs[0].Model != "RTX4090" || n.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] != 400_000 {
				t.Errorf("%s: node = %+v, want its offer as the market sees it", who.name, n)
			}
			if hidden := n.Labels == nil && n.GPUs[0].PCIBusID == "" && n.GPUs[0].VBIOSVersion == ""; hidden != who.public {
				t.Errorf("%s: labels %v, PCI bus %q, VBIOS %q; want them hidden: %v", who.name, n.Labels, n.GPUs[0].PCIBusID, n.GPUs[0].VBIOSVersion, who.public)
			}
		}

		nodes, _, err := m.srv.ListNodes(m.renter, idlegrid.NodeFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 2 || nodes[0].Labels != nil || nodes[1].Labels != nil {
			t.Fatalf("a renter's list = %d nodes (%+v), want both online nodes, public", len(nodes), nodes)
		}
		first := nodes[0].ID // both joined at one instant: the order is by ID
		if nodes, _, err = m.srv.ListNodes(m.renter, idlegrid.NodeFilter{Limit: 1}); err != nil || len(nodes) != 1 || nodes[0].ID != first {
			t.Fatalf("a renter's list of one = %+v, %v; want the first of the whole list, %s", nodes, err, first)
		}
		// A search: both nodes are RTX4090s in eu-west.
		if nodes, _, err = m.srv.ListNodes(m.renter, idlegrid.NodeFilter{GPUModels: []string{"RTX4090"}, Regions: []string{"eu-west"}}); err != nil || len(nodes) != 2 {
			t.Fatalf("a renter's RTX4090s in eu-west = %+v, %v; want both", nodes, err)
		}
		if nodes, _, err = m.srv.ListNodes(m.renter, idlegrid.NodeFilter{Regions: []string{"us-east"}}); err != nil || len(nodes) != 0 {
			t.Fatalf("a renter's nodes in us-east = %+v, %v; want none", nodes, err)
		}
		// The GPUs a job could take now: all of each node's, then none
		// where a 2-GPU lease runs; none of a node in quarantine.
		all, _, err := m.srv.ListNodes(m.admin, idlegrid.NodeFilter{})
		if err != nil {
			t.Fatal(err)
		}
		freeOf := func() map[string]int {
			t.Helper()
			synctest.Wait() // the scheduler has taken in what changed
			free, err := m.srv.FreeGPUs(m.renter, all)
			if err != nil {
				t.Fatal(err)
			}
			return free
		}
		if free := freeOf(); len(free) != 2 || free[all[0].ID] != 2 || free[all[1].ID] != 2 {
			t.Fatalf("free GPUs = %v, want 2 of each node", free)
		}
		_, lease := mustStart(t, m)
		if free := freeOf(); free[lease.NodeID] != 0 || len(free) != 2 || (free[all[0].ID]+free[all[1].ID]) != 2 {
			t.Fatalf("free GPUs with a 2-GPU lease on %s = %v, want none there and 2 on the other", lease.NodeID, free)
		}
		// A search for free GPUs finds the other node alone, and for more
		// than it has, or in another region, none.
		for _, tc := range []struct {
			ctx  context.Context
			f    idlegrid.NodeFilter
			want int
		}{
			{m.renter, idlegrid.NodeFilter{MinFreeGPUs: 1}, 1},
			{m.renter, idlegrid.NodeFilter{MinFreeGPUs: 2, GPUModels: []string{"RTX4090"}, Tier: idlegrid.TierSilver}, 1},
			{m.renter, idlegrid.NodeFilter{MinFreeGPUs: 3}, 0},
			{m.renter, idlegrid.NodeFilter{MinFreeGPUs: 1, Regions: []string{"us-east"}}, 0},
			{m.admin, idlegrid.NodeFilter{MinFreeGPUs: 2}, 1},
			{m.provider, idlegrid.NodeFilter{MinFreeGPUs: 2}, 1},
		} {
			nodes, free, err := m.srv.ListNodes(tc.ctx, tc.f)
			if err != nil || len(nodes) != tc.want || (tc.want == 1 && nodes[0].ID == lease.NodeID) {
				t.Errorf("nodes by %+v = %v, %v; want %d, not %s", tc.f, nodeIDsOf(nodes), err, tc.want, lease.NodeID)
			}
			// With their free GPUs, as the search counted them: each
			// listed node's, and no other's.
			if len(free) != tc.want {
				t.Errorf("nodes and free GPUs by %+v = %v, %v, %v; want %d of each", tc.f, nodeIDsOf(nodes), free, err, tc.want)
			}
			for _, n := range nodes {
				if got, in := free[n.ID]; !in || got < tc.f.MinFreeGPUs || got != 2 {
					t.Errorf("free GPUs of %s by %+v = %d (listed %v), want 2", n.ID, tc.f, got, in)
				}
			}
		}
		if nodes, free, err := m.srv.ListNodes(m.renter, idlegrid.NodeFilter{}); err != nil || len(nodes) != 2 || len(free) != 2 || free[lease.NodeID] != 0 {
			t.Errorf("every node with its free GPUs = %v, %v, %v; want both, none free on %s", nodeIDsOf(nodes), free, err, lease.NodeID)
		}
		if _, err := m.srv.QuarantineNode(m.admin, m.nodeID, "under review"); err != nil {
			t.Fatal(err)
		}
		if free, in := freeOf()[m.nodeID]; in {
			t.Errorf("free GPUs of barn-1 in quarantine = %d, want it left out", free)
		}
		if nodes, _, err = m.srv.ListNodes(m.renter, idlegrid.NodeFilter{}); err != nil || len(nodes) != 1 || nodes[0].ID == m.nodeID {
			t.Fatalf("a renter's list with barn-1 quarantined = %+v, %v; want barn-2 alone", nodes, err)
		}
		if nodes, _, err = m.srv.ListNodes(as(rival), idlegrid.NodeFilter{}); err != nil || len(nodes) != 0 {
			t.Fatalf("a provider's list = %+v, %v; want its own nodes: none", nodes, err)
		}
	})
}

func TestServer_Authorization(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		j, _ := mustStart(t, m)
		other, _, _, err := m.srv.CreateAccount(m.admin, "rival", idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		otherProvider, _, _, err := m.srv.CreateAccount(m.admin, "rival-gpus", idlegrid.RoleProvider)
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			call func() error
			want string
		}{
			{"RenterSeesOtherJob", func() error { _, err := m.srv.FindJob(as(other), j.ID); return err }, idlegrid.ENOTFOUND},
			{"RenterCancelsOtherJob", func() error { _, err := m.srv.CancelJob(as(other), j.ID); return err }, idlegrid.ENOTFOUND},
			{"NoSuchNode", func() error { _, err := m.srv.FindNode(as(otherProvider), "node_nope"); return err }, idlegrid.ENOTFOUND},
			{"RenterTopsUp", func() error { _, err := m.srv.TopUp(m.renter, m.renterID, 1, "x"); return err }, idlegrid.EFORBIDDEN},
			{"ProviderSubmitsJob", func() error { _, err := m.srv.SubmitJob(m.provider, testSpec()); return err }, idlegrid.EFORBIDDEN},
			{"RenterMakesJoinToken", func() error { _, _, err := m.srv.CreateJoinToken(m.renter, "x", 1, time.Hour); return err }, idlegrid.EFORBIDDEN},
			{"RenterReadsOtherBalance", func() error { _, err := m.srv.Balance(as(other), m.renterID); return err }, idlegrid.ENOTFOUND},
			{"NodeUsesAccountAPI", func() error { _, err := m.srv.ListJobs(m.node, idlegrid.JobFilter{}); return err }, idlegrid.EFORBIDDEN},
			{"AnonymousListsJobs", func() error { _, err := m.srv.ListJobs(context.Background(), idlegrid.JobFilter{}); return err }, idlegrid.EUNAUTHORIZED},
			{"AccountUsesAgentAPI", func() error { _, err := m.srv.Commands(m.provider, 0); return err }, idlegrid.EUNAUTHORIZED},
		}
		for _, tt := range tests { // t.Run is not allowed inside a bubble
			if got := idlegrid.ErrorCode(tt.call()); got != tt.want {
				t.Errorf("%s: code = %q, want %q", tt.name, got, tt.want)
			}
		}
		jobs, err := m.srv.ListJobs(as(other), idlegrid.JobFilter{})
		if err != nil || len(jobs) != 0 {
			t.Fatalf("other renter lists %d jobs (err %v), want none", len(jobs), err)
		}
	})
}

func TestServer_PreemptsBronzeWithNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		bronze := testSpec()
		bronze.Tier, bronze.MaxPriceMicrosPerGPUHour = idlegrid.TierBronze, 600_000
		bronze.CheckpointEverySeconds = 600 // it can resume
		// Due 5 minutes after a whole run from now: once preempted, the
		// job can finish by then only with the run its checkpoint holds.
		due := m.srv.Now().Add(time.Duration(bronze.DurationSeconds)*time.Second + 5*time.Minute)
		bronze.Deadline = &due
		for range 2 { // fill both nodes
			if _, err := m.srv.SubmitJob(m.renter, bronze); err != nil {
				t.Fatal(err)
			}
		}
		// A pass that raced the second node's offer may have to retry on
		// the scheduler's next tick; let one go by.
		m.advance(t, 5*time.Second)
		for _, n := range []context.Context{m.node, m.rival} {
			cmds, err := m.srv.Commands(n, 0)
			if err != nil || len(cmds) != 1 {
				t.Fatalf("commands = %+v (%v), want one start per node", cmds, err)
			}
			if err := m.srv.ReportLease(n, cmds[0].Lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
				t.Fatal(err)
			}
		}
		m.advance(t, 10*time.Minute) // past the minimum runtime

		g := mustSubmitGold(t, m)

		var victim *idlegrid.Lease
		var victimNode context.Context
		for _, n := range []context.Context{m.node, m.rival} {
			cmds, err := m.srv.Commands(n, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cmds {
				if c.Kind == idlegrid.CommandStop {
					victim, victimNode = c.Lease, n
				}
			}
		}
		if victim == nil {
			got, _ := m.srv.FindJob(m.renter, g.ID)
			t.Fatalf("no bronze lease was given notice; gold job is %s (%s)", got.State, got.Reason)
		}
		if victim.NoticeSeconds != 120 || victim.NoticeAt == nil {
			t.Fatalf("victim notice = %ds at %v, want 120s given now", victim.NoticeSeconds, victim.NoticeAt)
		}
		m.advance(t, 30*time.Second) // the workload checkpoints within its notice
		if err := m.srv.ReportLease(victimNode, victim.ID, idlegrid.LeaseReport{
			State: idlegrid.LeaseCancelled, CheckpointRef: "docker-volume:ckpt-1",
		}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()

		ended, _, err := m.srv.FindLease(m.renter, victim.ID)
		if err != nil {
			t.Fatal(err)
		}
		if ended.State != idlegrid.LeasePreempted || ended.ChargedMicros == 0 {
			t.Fatalf("victim = %s charged %d, want preempted and charged for what ran", ended.State, ended.ChargedMicros)
		}
		requeued, err := m.srv.FindJob(m.renter, ended.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if requeued.State != idlegrid.JobQueued || requeued.CheckpointRef != "docker-volume:ckpt-1" {
			t.Fatalf("bronze job = %s from %q, want queued again from its checkpoint", requeued.State, requeued.CheckpointRef)
		}
		if ran := int64(ended.EndedAt.Sub(*ended.StartedAt) / time.Second); requeued.ResumeSeconds != ran || requeued.CheckpointNodeID != ended.NodeID {
			t.Errorf("the requeued job resumes with %d s of its run done on %q, want %d, what its lease ran to the checkpoint, on %s",
				requeued.ResumeSeconds, requeued.CheckpointNodeID, ran, ended.NodeID)
		}
		m.advance(t, 5*time.Second)
		if got, _ := m.srv.FindJob(m.renter, requeued.ID); got.State != idlegrid.JobQueued {
			t.Errorf("the requeued job, whose run left fits before its deadline: %s (%s), want queued", got.State, got.Reason)
		}
		if got, _ := m.srv.FindJob(m.renter, g.ID); got.State != idlegrid.JobRunning {
			t.Fatalf("gold job = %s (%s), want running on the freed GPUs", got.State, got.Reason)
		}

		// With both nodes free again, the requeued job goes back to the node
		// that keeps its checkpoint, though that node now asks more.
		dearer := testOffer(map[string]string{m.nodeID: "barn-1"}[ended.NodeID])
		if dearer.Name == "" {
			dearer = testOffer("barn-2")
			dearer.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] = 500_000
		}
		dearer.Ask.FloorMicrosPerGPUHour[idlegrid.TierBronze] = 350_000
		if err := m.srv.UpdateOffer(victimNode, idlegrid.OfferRequest{Offer: dearer}); err != nil {
			t.Fatal(err)
		}
		// A spend limit the renter has reached holds the job back until
		// both nodes are free, whichever frees first.
		none := idlegrid.Micros(1)
		if _, err := m.srv.SetAccountLimit(m.admin, m.renterID, &none); err != nil {
			t.Fatal(err)
		}
		jobs, err := m.srv.ListJobs(m.renter, idlegrid.JobFilter{States: []idlegrid.JobState{idlegrid.JobRunning}})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if _, err := m.srv.CancelJob(m.renter, j.ID); err != nil {
				t.Fatal(err)
			}
		}
		reportOn(t, m, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled}, func(c idlegrid.Command) bool { return c.Kind == idlegrid.CommandStop })
		m.advance(t, 5*time.Second)
		if _, err := m.srv.SetAccountLimit(m.admin, m.renterID, nil); err != nil {
			t.Fatal(err)
		}
		m.advance(t, 5*time.Second)
		back, err := m.srv.ListLeases(m.renter, idlegrid.LeaseFilter{JobID: requeued.ID, States: []idlegrid.LeaseState{idlegrid.LeaseAssigned}})
		if err != nil || len(back) != 1 || back[0].NodeID != ended.NodeID {
			t.Errorf("the requeued job's new lease: %+v, %v; want one on %s, which keeps its checkpoint", back, err, ended.NodeID)
		}
		mustLedgerBalanced(t, m.store)
	})
}

// A checkpoint an agent reports in its heartbeat reaches the engine, so a
// gold job preempts the bronze lease that would lose the least work: the
// one that saved its work a minute ago, on whichever node it runs.
func TestServer_PreemptsTheLeaseThatCheckpointed(t *testing.T) {
	for _, which := range []int{0, 1} {
		t.Run(fmt.Sprint("node", which), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := mustMarket(t)
				bronze := testSpec()
				bronze.Tier, bronze.MaxPriceMicrosPerGPUHour, bronze.CheckpointEverySeconds = idlegrid.TierBronze, 600_000, 60
				for range 2 { // fill both nodes
					if _, err := m.srv.SubmitJob(m.renter, bronze); err != nil {
						t.Fatal(err)
					}
				}
				m.advance(t, 5*time.Second)
				nodes := []context.Context{m.node, m.rival}
				var leases []string
				for _, n := range nodes {
					cmds, err := m.srv.Commands(n, 0)
					if err != nil || len(cmds) != 1 {
						t.Fatalf("commands = %+v (%v), want one start per node", cmds, err)
					}
					leases = append(leases, cmds[0].Lease.ID)
					if err := m.srv.ReportLease(n, cmds[0].Lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
						t.Fatal(err)
					}
				}
				m.advance(t, 10*time.Minute) // past the minimum runtime
				m.srv.Resync()               // so that no rebuild from the store comes before the gold job's pass
				synctest.Wait()
				saved := m.srv.Now().Add(-time.Minute)
				if _, err := m.srv.Heartbeat(nodes[which], idlegrid.HeartbeatRequest{Leases: []idlegrid.LeaseProgress{
					{LeaseID: leases[which], Progress: 0.3, CheckpointAt: &saved},
				}}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()

				mustSubmitGold(t, m)
				cmds, err := m.srv.Commands(nodes[which], 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(cmds) != 1 || cmds[0].Kind != idlegrid.CommandStop || cmds[0].Lease.ID != leases[which] {
					t.Fatalf("commands to the node whose lease checkpointed = %+v, want a stop of %s", cmds, leases[which])
				}
			})
		})
	}
}

// mustSubmitGold submits a gold job of testSpec and lets the scheduler's
// pass run.
func mustSubmitGold(t *testing.T, m *testMarket) *idlegrid.Job {
	t.Helper()
	gold := testSpec()
	gold.Tier = idlegrid.TierGold
	j, err := m.srv.SubmitJob(m.renter, gold)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return j
}

// runningLease submits a job, and returns the node it started on and its
// lease, reported running.
func (m *testMarket) runningLease(t *testing.T) (context.Context, *idlegrid.Lease) {
	t.Helper()
	if _, err := m.srv.SubmitJob(m.renter, testSpec()); err != nil {
		t.Fatal(err)
	}
	m.advance(t, 5*time.Second)
	for _, n := range []context.Context{m.node, m.rival} {
		if cmds, err := m.srv.Commands(n, 0); err == nil && len(cmds) == 1 {
			if err := m.srv.ReportLease(n, cmds[0].Lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
				t.Fatal(err)
			}
			return n, cmds[0].Lease
		}
	}
	t.Fatal("the job was not started on either node")
	return nil, nil
}

// A node whose clock is far off reports a checkpoint the store refuses:
// the heartbeat still counts, with the lease's progress, and the
// checkpoint is left out.
func TestServer_HeartbeatWithAFarOffCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		node, lease := m.runningLease(t)
		ahead := m.srv.Now().Add(time.Hour)
		if _, err := m.srv.Heartbeat(node, idlegrid.HeartbeatRequest{Leases: []idlegrid.LeaseProgress{
			{LeaseID: lease.ID, Progress: 0.4, CheckpointAt: &ahead},
		}}); err != nil {
			t.Fatalf("heartbeat with a checkpoint an hour ahead: %v", err)
		}
		got, _, err := m.srv.FindLease(m.renter, lease.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Progress != 0.4 || got.CheckpointAt != nil {
			t.Fatalf("lease progress %v, checkpoint %v; want 0.4 and none", got.Progress, got.CheckpointAt)
		}
		// A progress past the end, a workload's rounding, is kept at the
		// end; the heartbeat still counts.
		if _, err := m.srv.Heartbeat(node, idlegrid.HeartbeatRequest{Leases: []idlegrid.LeaseProgress{{LeaseID: lease.ID, Progress: 1.02}}}); err != nil {
			t.Fatalf("heartbeat with a progress of 1.02: %v", err)
		}
		if got, _, err := m.srv.FindLease(m.renter, lease.ID); err != nil || got.Progress != 1 {
			t.Errorf("lease progress %v (%v), want 1", got.Progress, err)
		}
	})
}

// A node whose clock is an hour ahead reports a checkpoint by its time
// and its age: the server places it by the age, in its own clock, so the
// checkpoint counts though its time alone would be refused. A bad age is
// left out like a far-off time, and the heartbeat still counts.
func TestServer_HeartbeatWithACheckpointAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		node, lease := m.runningLease(t)
		m.advance(t, 3*time.Minute)
		beat := func(progress, age float64) *idlegrid.Lease {
			t.Helper()
			nodeTime := m.srv.Now().Add(time.Hour).Add(-time.Duration(age * float64(time.Second)))
			if _, err := m.srv.Heartbeat(node, idlegrid.HeartbeatRequest{Leases: []idlegrid.LeaseProgress{
				{LeaseID: lease.ID, Progress: progress, CheckpointAt: &nodeTime, CheckpointAgeSeconds: &age},
			}}); err != nil {
				t.Fatalf("heartbeat with a checkpoint %vs old: %v", age, err)
			}
			got, _, err := m.srv.FindLease(m.renter, lease.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		got := beat(0.4, 90)
		if want := m.srv.Now().Add(-90 * time.Second); got.CheckpointAt == nil || !got.CheckpointAt.Equal(want) {
			t.Fatalf("checkpoint %v, want %v: the server's now less the age", got.CheckpointAt, want)
		}
		saved := *got.CheckpointAt
		for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
			got = beat(0.5, bad)
			if got.Progress != 0.5 || got.CheckpointAt == nil || !got.CheckpointAt.Equal(saved) {
				t.Fatalf("after an age of %v: progress %v, checkpoint %v; want 0.5 and still %v", bad, got.Progress, got.CheckpointAt, saved)
			}
		}
	})
}

// A question to the engine whose caller gives up while the scheduler runs
// it still returns only after it has run: its caller reads what it wrote
// (a data race under -race before, when the dashboard's request was cut).
func TestServer_askCancelledWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		ctx, cancel := context.WithCancel(context.Background())
		started, release := make(chan struct{}), make(chan struct{})
		answered := 0
		returned := make(chan error, 1)
		go func() {
			returned <- m.srv.Ask(ctx, func(*market.Engine) { close(started); <-release; answered = 1 })
		}()
		<-started
		cancel()
		synctest.Wait()
		select {
		case err := <-returned:
			t.Fatalf("ask returned (%v) while its question still ran", err)
		default:
		}
		close(release)
		if err := <-returned; err != nil || answered != 1 {
			t.Fatalf("ask = %v, answered %d; want nil after the answer", err, answered)
		}
	})
}

// The market view's clearing prices survive the scheduler's rebuilds of
// its engine from the store (every few minutes, and after a refused
// placement).
func TestServer_marketSurvivesResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		j, err := m.srv.SubmitJob(m.renter, testSpec())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got, err := m.srv.FindJob(m.renter, j.ID); err != nil || got.State != idlegrid.JobRunning {
			t.Fatalf("job %s: %v, %v; want it running", j.ID, got, err)
		}
		if got := len(marketPrices(t, m.srv, m.renter)); got != 1 {
			t.Fatalf("%d clearing prices after one placement, want 1", got)
		}
		m.srv.Resync()
		synctest.Wait()
		if got := len(marketPrices(t, m.srv, m.renter)); got != 1 {
			t.Fatalf("%d clearing prices after the engine was rebuilt, want the 1 from before", got)
		}
	})
}

// A server started on a store that holds leases shows their clearing
// prices in the market view: the history is not only in memory.
func TestServer_marketSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		j, err := m.srv.SubmitJob(m.renter, testSpec())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		before := marketPrices(t, m.srv, m.renter)
		if len(before) != 1 || before[0].JobID != j.ID {
			t.Fatalf("clearing prices after one placement: %+v, want one for %s", before, j.ID)
		}
		m.srv.Close()
		restarted, err := server.Open(server.Config{Store: m.store, HeartbeatInterval: 10 * time.Second, FeeBasisPoints: 1000, Logger: testLogger, TrustPolicy: goldForAll})
		if err != nil {
			t.Fatal(err)
		}
		defer restarted.Close()
		synctest.Wait()
		after := marketPrices(t, restarted, m.renter)
		if len(after) != 1 || !after[0].At.Equal(before[0].At) {
			t.Fatalf("clearing prices after a restart: %+v, want %+v", after, before)
		}
		after[0].At = before[0].At // the store keeps the time, not its monotonic reading
		if after[0] != before[0] {
			t.Errorf("clearing price after a restart %+v, want %+v", after[0], before[0])
		}
	})
}

// marketPrices returns the clearing prices of every cell of srv's market.
func marketPrices(t *testing.T, srv *server.Server, caller context.Context) []market.PricePoint {
	t.Helper()
	stats, err := srv.Market(caller)
	if err != nil {
		t.Fatal(err)
	}
	var out []market.PricePoint
	for _, s := range stats {
		out = append(out, s.Prices...)
	}
	return out
}

func TestServer_ExplainAndMarket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		spec := testSpec()
		spec.MaxPriceMicrosPerGPUHour = 100_000 // below both asks
		j, err := m.srv.SubmitJob(m.renter, spec)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		x, err := m.srv.Explain(m.renter, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if x.Rejections[market.ReasonPrice] != 2 {
			t.Fatalf("rejections = %v, want both nodes rejected for %q", x.Rejections, market.ReasonPrice)
		}
		stats, err := m.srv.Market(m.renter)
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) == 0 {
			t.Fatal("market view is empty, want the RTX4090 supply in eu-west")
		}
		if _, err := m.srv.Explain(m.provider, j.ID); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
			t.Fatalf("provider explains a renter's job: err = %v, want forbidden", err)
		}
	})
}

// queueLog is a QueueReporter that keeps what it is told, in the
// heartbeat's goroutine.
type queueLog struct {
	reports [][]idlegrid.ModelQueue
	valid   []time.Duration
}

func (q *queueLog) NoteQueues(nodeID string, queues []idlegrid.ModelQueue, validFor time.Duration) {
	q.reports = append(q.reports, queues)
	q.valid = append(q.valid, validFor)
}

// A heartbeat's model queues reach the gateway, valid until the heartbeat
// after next is due; bad ones are left out and the heartbeat still counts.
func TestServer_HeartbeatModelQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		node, _ := m.runningLease(t)
		var got queueLog
		m.srv.ReportQueuesTo(&got)
		good := []idlegrid.ModelQueue{{Model: "llama", Queued: 3}, {Model: "qwen", Queued: 0}}
		for _, qs := range [][]idlegrid.ModelQueue{
			good,
			{{Model: "llama", Queued: -1}},
			{{Model: "llama", Queued: 1}, {Model: "llama", Queued: 2}},
			{{Queued: 1}},
			nil,
		} {
			if _, err := m.srv.Heartbeat(node, idlegrid.HeartbeatRequest{ModelQueues: qs}); err != nil {
				t.Fatalf("heartbeat with model queues %+v: %v", qs, err)
			}
		}
		if len(got.reports) != 1 || !reflect.DeepEqual(got.reports[0], good) {
			t.Fatalf("the gateway was told %+v, want only %+v", got.reports, good)
		}
		if want := 2 * 10 * time.Second; got.valid[0] != want { // the default heartbeat interval, twice
			t.Errorf("valid for %s, want %s", got.valid[0], want)
		}
		m.srv.ReportQueuesTo(nil)
		if _, err := m.srv.Heartbeat(node, idlegrid.HeartbeatRequest{ModelQueues: good}); err != nil || len(got.reports) != 1 {
			t.Fatalf("after ReportQueuesTo(nil): err %v, %d reports; want none more", err, len(got.reports))
		}
	})
}

// nodeIDsOf is the IDs of nodes, in order.
func nodeIDsOf(nodes []*idlegrid.Node) []string {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	return ids
}
