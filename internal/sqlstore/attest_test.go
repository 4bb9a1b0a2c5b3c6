package sqlstore_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

func testAttestations(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 2)

	_, err := db.LatestAttestation(ctx, n.ID)
	wantCode(t, err, idlegrid.ENOTFOUND)

	first := attestationOf(n, t0, n.GPUs...)
	mustOK(t, db.SaveAttestation(ctx, first, "", nil))
	got, err := db.LatestAttestation(ctx, n.ID)
	mustOK(t, err)
	if diff := cmp.Diff(first, got); diff != "" {
		t.Fatalf("LatestAttestation (-want +got):\n%s", diff)
	}

	t.Run("StaleComparison", func(t *testing.T) {
		wantCode(t, db.SaveAttestation(ctx, attestationOf(n, at(time.Second), n.GPUs[0]), "", nil), idlegrid.ECONFLICT)
	})

	flashed := n.GPUs[0]
	flashed.VBIOSVersion = "96.00.99.00.01"
	second := attestationOf(n, at(time.Hour), flashed, n.GPUs[1])
	changes := idlegrid.DiffFingerprints(first.Fingerprint, second.Fingerprint)
	for i := range changes {
		changes[i].ID, changes[i].NodeID, changes[i].At = id("hwc"), n.ID, at(time.Hour)
		changes[i].FromHash, changes[i].ToHash = first.Hash, second.Hash
	}
	mustOK(t, db.SaveAttestation(ctx, second, first.Hash, changes))
	// Back to the first fingerprint: it is current again, listed once.
	// Signed again by an agent that runs challenges with CUDA: the runner
	// is stored with the new signature.
	third := attestationOf(n, at(2*time.Hour), n.GPUs...)
	third.ChallengeRunner = idlegrid.RunnerCUDA
	mustOK(t, db.SaveAttestation(ctx, third, second.Hash, nil))
	if got, err := db.LatestAttestation(ctx, n.ID); err != nil || got.ChallengeRunner != idlegrid.RunnerCUDA || got.Signature != third.Signature {
		t.Fatalf("LatestAttestation = %+v, %v, want the third signature with runner cuda", got, err)
	}

	hist, err := db.ListAttestations(ctx, n.ID, 0)
	mustOK(t, err)
	if len(hist) != 2 || hist[0].Hash != first.Hash || !hist[0].ReceivedAt.Equal(at(2*time.Hour)) || hist[1].Hash != second.Hash {
		t.Fatalf("ListAttestations = %+v, want the first fingerprint (received again at +2h) then the second", hist)
	}
	gotChanges, err := db.ListHardwareChanges(ctx, n.ID, 0)
	mustOK(t, err)
	if len(gotChanges) != 1 || gotChanges[0].Kind != idlegrid.ChangeVBIOS || gotChanges[0].After != "96.00.99.00.01" ||
		gotChanges[0].FromHash != first.Hash || !gotChanges[0].At.Equal(at(time.Hour)) {
		t.Fatalf("ListHardwareChanges = %+v, want the VBIOS change with its evidence", gotChanges)
	}
	wantCode(t, db.SaveAttestation(ctx, attestationOf(&idlegrid.Node{ID: "node_missing"}, t0, n.GPUs[0]), "", nil), idlegrid.ENOTFOUND)

	// Each attestation saved is in the audit log, for the node and its
	// provider; the refused ones are not.
	for _, subject := range []string{n.ID, p.ID} {
		logged := auditKinds(t, db, subject, audit.KindAttestation)
		if len(logged) != 3 || !strings.Contains(string(logged[1].Payload), `"changes":[`) {
			t.Fatalf("%s's attestation entries = %d, want 3, the second with its change", subject, len(logged))
		}
	}
}

// auditKinds returns the audit entries of kind that name subject.
func auditKinds(t *testing.T, db *sqlstore.DB, subject string, kind audit.Kind) []*idlegrid.AuditEntry {
	t.Helper()
	all, err := db.ListAuditEntries(context.Background(), idlegrid.AuditFilter{Subject: subject, Limit: 1000})
	mustOK(t, err)
	var out []*idlegrid.AuditEntry
	for _, e := range all {
		if e.Kind == string(kind) {
			out = append(out, e)
		}
	}
	return out
}

func attestationOf(n *idlegrid.Node, signed time.Time, gpus ...idlegrid.GPU) *idlegrid.Attestation {
	a := &idlegrid.Attestation{NodeID: n.ID, Fingerprint: idlegrid.FingerprintOf(gpus), SignedAt: signed,
		Signature: "sig-" + signed.String(), ReceivedAt: signed}
	a.Hash = a.Fingerprint.Hash()
	return a
}

func testChallenges(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 1)
	issue := func(issued time.Time) *idlegrid.Challenge {
		c := &idlegrid.Challenge{ID: id("chl"), NodeID: n.ID, GPUUUID: n.GPUs[0].UUID, Model: "H100-80GB", VRAMMB: 81920,
			Seed: "00112233445566778899aabbccddeeff", Size: 256, Reason: idlegrid.ChallengeAtJoin, State: idlegrid.ChallengeIssued,
			MinNanos: 10, MaxNanos: 40, IssuedAt: issued, Deadline: issued.Add(10 * time.Minute)}
		mustOK(t, db.CreateChallenge(ctx, c))
		return c
	}
	passed, failed := issue(t0), issue(at(time.Minute))
	got, err := db.FindChallenge(ctx, passed.ID)
	mustOK(t, err)
	if diff := cmp.Diff(passed, got); diff != "" {
		t.Fatalf("FindChallenge (-want +got):\n%s", diff)
	}

	passed.State, passed.ResolvedAt = idlegrid.ChallengePassed, ptr(at(30*time.Second))
	passed.Answer = &idlegrid.ChallengeAnswer{RowHashes: []byte("not kept"), Digest: "abc", ElapsedNanos: 20, VRAMMB: 80000}
	passed.Findings = []string{"digest: 8 rows checked, all match"}
	mustResolve(t, db, passed, nil, false)
	got, err = db.FindChallenge(ctx, passed.ID)
	mustOK(t, err)
	want := *passed
	want.Answer = &idlegrid.ChallengeAnswer{Digest: "abc", ElapsedNanos: 20, VRAMMB: 80000}
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Fatalf("resolved challenge (-want +got):\n%s", diff)
	}
	t.Run("OnlyOnce", func(t *testing.T) {
		again := *passed
		again.State = idlegrid.ChallengeFailed
		wantCode(t, second(db.ResolveChallenge(ctx, &again, nil, nil)), idlegrid.ECONFLICT)
		missing := again
		missing.ID = "chl_missing"
		wantCode(t, second(db.ResolveChallenge(ctx, &missing, nil, nil)), idlegrid.ENOTFOUND)
	})

	open, err := db.ListChallenges(ctx, idlegrid.ChallengeFilter{NodeID: n.ID, States: []idlegrid.ChallengeState{idlegrid.ChallengeIssued}})
	mustOK(t, err)
	if len(open) != 1 || open[0].ID != failed.ID {
		t.Fatalf("issued challenges = %+v, want only %s", open, failed.ID)
	}

	// A failure quarantines the node in the same transaction.
	failed.State, failed.ResolvedAt = idlegrid.ChallengeFailed, ptr(at(2*time.Minute))
	failed.Answer = &idlegrid.ChallengeAnswer{Digest: "def", ElapsedNanos: 160, VRAMMB: 15000}
	failed.Findings = []string{"time: 160 ns is outside 10–40 ns for a H100-80GB"}
	evidence, err := json.Marshal(failed)
	mustOK(t, err)
	q := &idlegrid.Quarantine{ID: id("qua"), NodeID: n.ID, Reason: "failed hardware challenge", Evidence: evidence, Since: at(2 * time.Minute)}
	// With the conviction's follow-up, stored with it or not at all.
	f := &idlegrid.FollowUp{ID: "challenge:" + failed.ID, Kind: "challenge_failed", Body: "{}", DueAt: at(4 * time.Minute), CreatedAt: at(2 * time.Minute)}
	wantCode(t, second(db.ResolveChallenge(ctx, failed, q, &idlegrid.FollowUp{ID: "challenge:x"})), idlegrid.EINVALID)
	quarantined, err := db.ResolveChallenge(ctx, failed, q, f)
	mustOK(t, err)
	if !quarantined {
		t.Error("a failed challenge with a quarantine did not quarantine the node")
	}
	due, err := db.DueFollowUps(ctx, at(time.Hour), 10)
	mustOK(t, err)
	if len(due) != 1 || due[0].ID != f.ID || due[0].Kind != f.Kind {
		t.Errorf("follow-ups due = %+v, want the challenge's", due)
	}
	all, err := db.ListChallenges(ctx, idlegrid.ChallengeFilter{NodeID: n.ID})
	mustOK(t, err)
	if len(all) != 2 || all[0].ID != failed.ID || all[0].State != idlegrid.ChallengeFailed {
		t.Fatalf("ListChallenges = %+v, want the failed one first", all)
	}
	node, err := db.FindNode(ctx, n.ID)
	mustOK(t, err)
	if !node.Quarantined {
		t.Fatal("node is not quarantined after a failed challenge with a quarantine")
	}
	gotQ, err := db.FindQuarantine(ctx, n.ID)
	mustOK(t, err)
	if gotQ.ProviderID != p.ID || gotQ.Reason != q.Reason || string(gotQ.Evidence) != string(evidence) || !gotQ.Active() {
		t.Fatalf("FindQuarantine = %+v, want the quarantine with its evidence", gotQ)
	}

	// Each outcome is in the audit log, for the challenge, node and
	// provider, the failure with its quarantine; the refused ones are not.
	logged := auditKinds(t, db, p.ID, audit.KindChallenge)
	if len(logged) != 2 || !strings.Contains(string(logged[1].Payload), `"quarantine":{`) || strings.Contains(string(logged[0].Payload), "row_hashes") {
		t.Fatalf("challenge entries = %d, want the pass then the failure with its quarantine, and no row hashes", len(logged))
	}
	if got := auditKinds(t, db, failed.ID, audit.KindChallenge); len(got) != 1 {
		t.Fatalf("%s has %d challenge entries, want 1", failed.ID, len(got))
	}

	// An answer sized for a real GPU (16,384 row hashes) resolves: its
	// hashes are not logged, the digest stands for them.
	big := issue(at(3 * time.Minute))
	big.State, big.ResolvedAt = idlegrid.ChallengePassed, ptr(at(4*time.Minute))
	big.Answer = &idlegrid.ChallengeAnswer{RowHashes: make([]byte, 32*16384), Digest: "0123", ElapsedNanos: 30, VRAMMB: 80000}
	mustResolve(t, db, big, nil, false)

	// A node in quarantine that fails another challenge: the failure is
	// recorded, and the quarantine it is in stands.
	again := issue(at(5 * time.Minute))
	again.State, again.ResolvedAt, again.Findings = idlegrid.ChallengeFailed, ptr(at(6*time.Minute)), []string{"digest differs"}
	mustResolve(t, db, again, &idlegrid.Quarantine{ID: id("qua"), NodeID: n.ID, Reason: "failed again", Since: at(6 * time.Minute)}, false)
	if got, err := db.FindChallenge(ctx, again.ID); err != nil || got.State != idlegrid.ChallengeFailed {
		t.Errorf("the second failure: %+v (%v), want it failed", got, err)
	}
	if got, err := db.FindQuarantine(ctx, n.ID); err != nil || got.ID != q.ID {
		t.Errorf("the node's quarantine after a second failure: %+v (%v), want the first, %s", got, err, q.ID)
	}
}

func testQuarantine(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	other := mustAccount(t, db, idlegrid.RoleProvider)
	n, m := mustNode(t, db, p.ID, 1), mustNode(t, db, other.ID, 1)

	_, err := db.FindQuarantine(ctx, n.ID)
	wantCode(t, err, idlegrid.ENOTFOUND)
	_, err = db.LiftQuarantine(ctx, n.ID, "acct_admin", "", t0)
	wantCode(t, err, idlegrid.ECONFLICT)

	first := &idlegrid.Quarantine{ID: id("qua"), NodeID: n.ID, Reason: "VBIOS changed", Evidence: json.RawMessage(`{"kind":"vbios_changed"}`), Since: t0}
	mustOK(t, db.QuarantineNode(ctx, first))
	wantCode(t, db.QuarantineNode(ctx, &idlegrid.Quarantine{ID: id("qua"), NodeID: n.ID, Reason: "again", Since: at(time.Second)}), idlegrid.ECONFLICT)
	wantCode(t, db.QuarantineNode(ctx, &idlegrid.Quarantine{ID: id("qua"), NodeID: "node_missing", Reason: "x", Since: t0}), idlegrid.ENOTFOUND)
	mustOK(t, db.QuarantineNode(ctx, &idlegrid.Quarantine{ID: id("qua"), NodeID: m.ID, Reason: "other", Since: at(time.Minute)}))

	nodes, err := db.ListNodes(ctx, idlegrid.NodeFilter{ProviderID: p.ID})
	mustOK(t, err)
	if len(nodes) != 1 || !nodes[0].Quarantined {
		t.Fatalf("ListNodes = %+v, want the node marked quarantined", nodes)
	}

	lifted, err := db.LiftQuarantine(ctx, n.ID, "acct_admin", "reflashed by the vendor", at(time.Hour))
	mustOK(t, err)
	if lifted.Active() || lifted.LiftedBy != "acct_admin" || lifted.LiftNote != "reflashed by the vendor" {
		t.Fatalf("LiftQuarantine = %+v, want lifted by the admin with the note", lifted)
	}
	node, err := db.FindNode(ctx, n.ID)
	mustOK(t, err)
	if node.Quarantined {
		t.Fatal("node still quarantined after the lift")
	}
	// Lifted, it can be quarantined again.
	mustOK(t, db.QuarantineNode(ctx, &idlegrid.Quarantine{ID: id("qua"), NodeID: n.ID, Reason: "again", Since: at(2 * time.Hour)}))

	// Each quarantine and lift is in the audit log, for the quarantine,
	// its node and its provider; the refused ones are not.
	logged := auditKinds(t, db, n.ID, audit.KindQuarantine)
	if len(logged) != 3 || !strings.Contains(string(logged[1].Payload), `"lift_note":"reflashed by the vendor"`) {
		t.Errorf("quarantine entries of the node = %d, want the quarantine, its lift, and the next", len(logged))
	}
	if got := auditKinds(t, db, p.ID, audit.KindQuarantine); len(got) != 3 {
		t.Errorf("quarantine entries of the provider = %d, want 3", len(got))
	}
	if got := auditKinds(t, db, first.ID, audit.KindQuarantine); len(got) != 2 {
		t.Errorf("entries of the first quarantine = %d, want it and its lift", len(got))
	}

	for _, tt := range []struct {
		name string
		f    idlegrid.QuarantineFilter
		want []string // reasons, newest first
	}{
		{"Node", idlegrid.QuarantineFilter{NodeID: n.ID}, []string{"again", "VBIOS changed"}},
		{"Provider", idlegrid.QuarantineFilter{ProviderID: other.ID}, []string{"other"}},
		{"ActiveOnly", idlegrid.QuarantineFilter{ActiveOnly: true}, []string{"again", "other"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			qs, err := db.ListQuarantines(ctx, tt.f)
			mustOK(t, err)
			var got []string
			for _, q := range qs {
				got = append(got, q.Reason)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("ListQuarantines(%+v) (-want +got):\n%s", tt.f, diff)
			}
		})
	}
}

// mustResolve resolves c with q and checks whether q was put in force.
func mustResolve(t *testing.T, db *sqlstore.DB, c *idlegrid.Challenge, q *idlegrid.Quarantine, quarantines bool) {
	t.Helper()
	quarantined, err := db.ResolveChallenge(context.Background(), c, q, nil)
	mustOK(t, err)
	if quarantined != quarantines {
		t.Errorf("resolving %s quarantined the node: %v, want %v", c.ID, quarantined, quarantines)
	}
}

// second is a call's error, its other result dropped.
func second[T any](_ T, err error) error { return err }
