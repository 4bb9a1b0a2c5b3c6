package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// nodeReputation is a node's first standing, as of at(d).
func nodeReputation(n *idlegrid.Node, score float64, level int, d time.Duration) *idlegrid.Reputation {
	return &idlegrid.Reputation{
		Subject: idlegrid.SubjectNode, SubjectID: n.ID, ProviderID: n.ProviderID,
		Counts: map[string]idlegrid.ReputationTally{
			"leases": {Good: 3, Bad: 0.5}, "uptime": {Good: 40.25, Bad: 1.75}, "notices": {}, "receipts": {Good: 10}, "challenges": {},
		},
		CountsAt: at(d), Score: score, Level: level, LevelName: "established", GPUSecondsServed: 7200,
		UptimeThrough: at(d - time.Hour), UpdatedAt: at(d),
	}
}

func fact(n *idlegrid.Node, key, kind string, d time.Duration) idlegrid.ReputationFact {
	return idlegrid.ReputationFact{Key: key, NodeID: n.ID, Kind: kind, At: at(d), Count: 1, Source: "lea_x"}
}

func testReputation(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n1, n2 := mustNode(t, db, p.ID, 1), mustNode(t, db, p.ID, 1)

	first := nodeReputation(n1, 0.93, 1, time.Hour)
	first.HardwareNote = "hardware could not be checked: 3 challenges in a row answered unsupported on GPU g0"
	window := idlegrid.ReputationFact{Key: "window:" + n1.ID + ":1", NodeID: n1.ID, Kind: "window", At: at(time.Hour),
		Count: 1, PromisedSeconds: 3600, OnlineSeconds: 3000}
	promotion := &idlegrid.LevelChange{ID: id("lvl"), Subject: idlegrid.SubjectNode, SubjectID: n1.ID, From: 0, To: 1,
		FromName: "newcomer", ToName: "established", Reasons: []string{"level 1 (established): score 0.930 ≥ 0.850"}, At: at(time.Hour)}
	mustOK(t, db.SaveReputation(ctx, &idlegrid.ReputationUpdate{Reputation: first,
		Facts: []idlegrid.ReputationFact{fact(n1, "lease:a", "lease_completed", 30*time.Minute), window}, Change: promotion}))
	if first.Version != 1 {
		t.Fatalf("version after the first save = %d, want 1", first.Version)
	}
	got, err := db.FindReputation(ctx, idlegrid.SubjectNode, n1.ID)
	mustOK(t, err)
	if diff := cmp.Diff(first, got); diff != "" {
		t.Errorf("reputation (-want +got):\n%s", diff)
	}
	node, err := db.FindNode(ctx, n1.ID)
	mustOK(t, err)
	if node.Reliability != 0.93 || node.Level != 1 {
		t.Errorf("node record reliability %v level %d, want the saved 0.93 and 1", node.Reliability, node.Level)
	}

	next := nodeReputation(n1, 0.8, 0, 2*time.Hour)
	next.Counts = map[string]idlegrid.ReputationTally{"leases": {Good: 2.9, Bad: 1.5}}
	next.HardwareNote = "challenge chl_1 on GPU g0 passed at the simulated size"
	next.Version = 1
	demotion := &idlegrid.LevelChange{ID: id("lvl"), Subject: idlegrid.SubjectNode, SubjectID: n1.ID, From: 1, To: 0,
		FromName: "established", ToName: "newcomer", Reasons: []string{"level 1 (established) needs a score of 0.850, has 0.800"}, At: at(2 * time.Hour)}
	mustOK(t, db.SaveReputation(ctx, &idlegrid.ReputationUpdate{Reputation: next,
		Facts: []idlegrid.ReputationFact{fact(n1, "lease:b", "lease_failed", 2*time.Hour)}, Change: demotion}))
	got, err = db.FindReputation(ctx, idlegrid.SubjectNode, n1.ID)
	mustOK(t, err)
	if diff := cmp.Diff(next, got); diff != "" {
		t.Errorf("replaced reputation (-want +got):\n%s", diff)
	}
	mustOK(t, db.SaveReputation(ctx, &idlegrid.ReputationUpdate{Reputation: nodeReputation(n2, 0.9, 1, time.Hour)}))
	prov := &idlegrid.Reputation{Subject: idlegrid.SubjectProvider, SubjectID: p.ID, ProviderID: p.ID,
		Counts: map[string]idlegrid.ReputationTally{}, CountsAt: at(time.Hour), Score: 0.85, Level: 1, LevelName: "established", UpdatedAt: at(time.Hour)}
	mustOK(t, db.SaveReputation(ctx, &idlegrid.ReputationUpdate{Reputation: prov}))

	t.Run("ListReputations", func(t *testing.T) {
		other := mustAccount(t, db, idlegrid.RoleProvider)
		for _, tt := range []struct {
			name string
			f    idlegrid.ReputationFilter
			want []string
		}{
			{"nodes of a provider", idlegrid.ReputationFilter{Subject: idlegrid.SubjectNode, ProviderID: p.ID}, sortedIDs(n1.ID, n2.ID)},
			{"providers", idlegrid.ReputationFilter{Subject: idlegrid.SubjectProvider}, []string{p.ID}},
			{"none", idlegrid.ReputationFilter{ProviderID: other.ID}, nil},
			{"nodes whose hardware is in doubt", idlegrid.ReputationFilter{Subject: idlegrid.SubjectNode, ProviderID: p.ID, HardwareDoubted: true}, []string{n1.ID}},
			{"the first of a provider's", idlegrid.ReputationFilter{ProviderID: p.ID, Limit: 1}, sortedIDs(n1.ID, n2.ID)[:1]},
		} {
			t.Run(tt.name, func(t *testing.T) {
				rs, err := db.ListReputations(ctx, tt.f)
				mustOK(t, err)
				var ids []string
				for _, r := range rs {
					ids = append(ids, r.SubjectID)
					if r.Subject == idlegrid.SubjectNode && r.SubjectID == n1.ID && !cmp.Equal(r, next) {
						t.Errorf("listed %s differs from the saved: %s", r.SubjectID, cmp.Diff(next, r))
					}
					found, err := db.FindReputation(ctx, r.Subject, r.SubjectID)
					mustOK(t, err)
					if !cmp.Equal(r, found) {
						t.Errorf("listed %s differs from the one found: %s", r.SubjectID, cmp.Diff(found, r))
					}
				}
				if !cmp.Equal(ids, tt.want) {
					t.Errorf("ids = %v, want %v", ids, tt.want)
				}
			})
		}
	})
	t.Run("ListReputations/negative limit", func(t *testing.T) {
		_, err := db.ListReputations(ctx, idlegrid.ReputationFilter{Limit: -1})
		if idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Fatalf("err = %v, want EINVALID", err)
		}
	})
	t.Run("ListReputationFacts", func(t *testing.T) {
		fs, err := db.ListReputationFacts(ctx, n1.ID, 2)
		mustOK(t, err)
		var keys []string
		for _, f := range fs {
			keys = append(keys, f.Key)
		}
		if want := []string{"lease:b", window.Key}; !cmp.Equal(keys, want) {
			t.Fatalf("facts newest first = %v, want %v", keys, want)
		}
		if !cmp.Equal(fs[1], &window) {
			t.Errorf("window fact (-want +got):\n%s", cmp.Diff(&window, fs[1]))
		}
	})
	t.Run("ListLevelChanges", func(t *testing.T) {
		cs, err := db.ListLevelChanges(ctx, idlegrid.SubjectNode, n1.ID, 0)
		mustOK(t, err)
		if diff := cmp.Diff([]*idlegrid.LevelChange{demotion, promotion}, cs); diff != "" {
			t.Errorf("level changes newest first (-want +got):\n%s", diff)
		}
		cs, err = db.ListLevelChanges(ctx, idlegrid.SubjectProvider, n1.ID, 0)
		mustOK(t, err)
		if len(cs) != 0 {
			t.Errorf("a node's changes listed as a provider's: %v", cs)
		}
	})
}

func sortedIDs(a, b string) []string {
	if b < a {
		return []string{b, a}
	}
	return []string{a, b}
}

func testReputationConflicts(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 1)
	saved := nodeReputation(n, 0.9, 1, time.Hour)
	mustOK(t, db.SaveReputation(ctx, &idlegrid.ReputationUpdate{Reputation: saved,
		Facts: []idlegrid.ReputationFact{fact(n, "lease:a", "lease_completed", time.Hour)}}))

	for _, tt := range []struct {
		name string
		u    func() *idlegrid.ReputationUpdate
		code string
	}{
		{"first save twice", func() *idlegrid.ReputationUpdate {
			return &idlegrid.ReputationUpdate{Reputation: nodeReputation(n, 0.5, 0, 2*time.Hour)}
		}, idlegrid.ECONFLICT},
		{"stale version", func() *idlegrid.ReputationUpdate {
			r := nodeReputation(n, 0.5, 0, 2*time.Hour)
			r.Version = 7
			return &idlegrid.ReputationUpdate{Reputation: r}
		}, idlegrid.ECONFLICT},
		{"fact counted before", func() *idlegrid.ReputationUpdate {
			r := nodeReputation(n, 0.5, 0, 2*time.Hour)
			r.Version = 1
			return &idlegrid.ReputationUpdate{Reputation: r, Facts: []idlegrid.ReputationFact{fact(n, "lease:a", "lease_failed", 2*time.Hour)}}
		}, idlegrid.ECONFLICT},
		{"unknown node", func() *idlegrid.ReputationUpdate {
			r := nodeReputation(n, 0.5, 0, 2*time.Hour)
			r.SubjectID = "node_missing"
			return &idlegrid.ReputationUpdate{Reputation: r}
		}, idlegrid.ENOTFOUND},
		{"unknown provider", func() *idlegrid.ReputationUpdate {
			return &idlegrid.ReputationUpdate{Reputation: &idlegrid.Reputation{Subject: idlegrid.SubjectProvider, SubjectID: "acct_missing",
				ProviderID: "acct_missing", Score: 0.9, CountsAt: t0, UpdatedAt: t0}}
		}, idlegrid.ENOTFOUND},
		{"no reputation", func() *idlegrid.ReputationUpdate { return &idlegrid.ReputationUpdate{} }, idlegrid.EINVALID},
		{"unknown subject", func() *idlegrid.ReputationUpdate {
			r := nodeReputation(n, 0.5, 0, 2*time.Hour)
			r.Subject = "renter"
			return &idlegrid.ReputationUpdate{Reputation: r}
		}, idlegrid.EINVALID},
		{"score out of range", func() *idlegrid.ReputationUpdate {
			r := nodeReputation(n, 0, 0, 2*time.Hour)
			r.Version = 1
			return &idlegrid.ReputationUpdate{Reputation: r}
		}, idlegrid.EINVALID},
		{"negative count", func() *idlegrid.ReputationUpdate {
			r := nodeReputation(n, 0.5, 0, 2*time.Hour)
			r.Version, r.Counts["leases"] = 1, idlegrid.ReputationTally{Bad: -1}
			return &idlegrid.ReputationUpdate{Reputation: r}
		}, idlegrid.EINVALID},
		{"fact of another node", func() *idlegrid.ReputationUpdate {
			r := nodeReputation(n, 0.5, 0, 2*time.Hour)
			r.Version = 1
			f := fact(n, "lease:z", "lease_failed", 2*time.Hour)
			f.NodeID = "node_other"
			return &idlegrid.ReputationUpdate{Reputation: r, Facts: []idlegrid.ReputationFact{f}}
		}, idlegrid.EINVALID},
		{"change to another level than saved", func() *idlegrid.ReputationUpdate {
			r := nodeReputation(n, 0.5, 0, 2*time.Hour)
			r.Version = 1
			return &idlegrid.ReputationUpdate{Reputation: r, Change: &idlegrid.LevelChange{ID: id("lvl"), Subject: idlegrid.SubjectNode,
				SubjectID: n.ID, From: 1, To: 2, At: at(2 * time.Hour)}}
		}, idlegrid.EINVALID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantCode(t, db.SaveReputation(ctx, tt.u()), tt.code)
			got, err := db.FindReputation(ctx, idlegrid.SubjectNode, n.ID)
			mustOK(t, err)
			if diff := cmp.Diff(saved, got); diff != "" {
				t.Errorf("a refused save changed the reputation (-want +got):\n%s", diff)
			}
			fs, err := db.ListReputationFacts(ctx, n.ID, 0)
			mustOK(t, err)
			if len(fs) != 1 || fs[0].Kind != "lease_completed" {
				t.Errorf("facts after a refused save = %+v, want the one saved", fs)
			}
			if node, err := db.FindNode(ctx, n.ID); err != nil || node.Reliability != 0.9 || node.Level != 1 {
				t.Errorf("node record %v, %v after a refused save, want reliability 0.9 level 1", node, err)
			}
		})
	}
	_, err := db.FindReputation(ctx, idlegrid.SubjectProvider, p.ID)
	wantCode(t, err, idlegrid.ENOTFOUND)
}

// testReputationTogether: a node's standing and its provider's are saved
// in one transaction, both or neither.
func testReputationTogether(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 1)
	provider := func(score float64, version int64) *idlegrid.Reputation {
		return &idlegrid.Reputation{Subject: idlegrid.SubjectProvider, SubjectID: p.ID, ProviderID: p.ID,
			Counts: map[string]idlegrid.ReputationTally{"leases": {Good: 1}}, CountsAt: at(time.Hour), Score: score,
			Level: 1, LevelName: "established", UpdatedAt: at(time.Hour), Version: version}
	}
	node, prov := nodeReputation(n, 0.9, 1, time.Hour), provider(0.9, 0)
	mustOK(t, db.SaveReputation(ctx, &idlegrid.ReputationUpdate{Reputation: node,
		Facts: []idlegrid.ReputationFact{fact(n, "lease:a", "lease_completed", time.Hour)}}, &idlegrid.ReputationUpdate{Reputation: prov}))
	if node.Version != 1 || prov.Version != 1 {
		t.Fatalf("versions after saving both = %d and %d, want 1 and 1", node.Version, prov.Version)
	}
	// saved checks that node and prov are what the store holds.
	saved := func(when string) {
		t.Helper()
		for _, want := range []*idlegrid.Reputation{node, prov} {
			got, err := db.FindReputation(ctx, want.Subject, want.SubjectID)
			mustOK(t, err)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s standing %s (-want +got):\n%s", want.Subject, when, diff)
			}
		}
	}
	saved("saved")

	next := nodeReputation(n, 0.5, 0, 2*time.Hour)
	next.Version = 1
	stale := provider(0.5, 7)
	err := db.SaveReputation(ctx, &idlegrid.ReputationUpdate{Reputation: next,
		Facts: []idlegrid.ReputationFact{fact(n, "lease:b", "lease_failed", 2*time.Hour)}}, &idlegrid.ReputationUpdate{Reputation: stale})
	wantCode(t, err, idlegrid.ECONFLICT)
	if next.Version != 1 || stale.Version != 7 {
		t.Errorf("versions after a refused save = %d and %d, want them unchanged (1 and 7)", next.Version, stale.Version)
	}
	saved("after a refused pair")
	if fs, err := db.ListReputationFacts(ctx, n.ID, 0); err != nil || len(fs) != 1 {
		t.Errorf("facts after a refused pair = %d, %v; want the first save's one", len(fs), err)
	}
	if rec, err := db.FindNode(ctx, n.ID); err != nil || rec.Reliability != 0.9 {
		t.Errorf("node record %v, %v after a refused pair, want reliability 0.9", rec, err)
	}
	wantCode(t, db.SaveReputation(ctx), idlegrid.EINVALID)
}

// testReputationNodeRecord: once a node has a reputation, ending its leases
// still counts them on its record but leaves its reliability, the score the
// engine ranks it by, to the reputation.
func testReputationNodeRecord(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)
	plain, rated := mustNode(t, db, p.ID, 1), mustNode(t, db, p.ID, 1)
	mustOK(t, db.SaveReputation(ctx, &idlegrid.ReputationUpdate{Reputation: nodeReputation(rated, 0.95, 2, time.Hour)}))
	for _, n := range []*idlegrid.Node{plain, rated} {
		j := mustJob(t, db, r.ID, 1, 1)
		l := lease(j, n, 0)
		mustPlace(t, db, placement(j, 0, l))
		start(t, db, l)
		mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
			To: idlegrid.LeaseLost, Reason: "silent", Fault: idlegrid.FaultProvider, At: at(10 * time.Minute)}, settle(l, 0))
	}
	for _, tt := range []struct {
		n     *idlegrid.Node
		rel   float64
		level int
	}{
		{plain, idlegrid.ReliabilityOf(0, 1), 0},
		{rated, 0.95, 2},
	} {
		got, err := db.FindNode(ctx, tt.n.ID)
		mustOK(t, err)
		if got.LeasesFailed != 1 || got.Reliability != tt.rel || got.Level != tt.level {
			t.Errorf("node record failed %d reliability %v level %d, want 1, %v, %d", got.LeasesFailed, got.Reliability, got.Level, tt.rel, tt.level)
		}
	}
}
