package server_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/challenge"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// signedAttestation is the fingerprint of gpus, signed now by nodeID's key.
func signedAttestation(t *testing.T, nodeID string, gpus []idlegrid.GPU) idlegrid.Attestation {
	t.Helper()
	k, ok := nodeKeys.Load(nodeID)
	if !ok {
		t.Fatalf("no key for %s", nodeID)
	}
	a := idlegrid.Attestation{NodeID: nodeID, Fingerprint: idlegrid.FingerprintOf(gpus), SignedAt: time.Now()}
	nodekey.SignAttestation(k.(ed25519.PrivateKey), &a)
	return a
}

// fingerprinted is the test offer's GPUs with the fingerprint fields set.
func fingerprinted(name string) []idlegrid.GPU {
	gpus := testOffer(name).GPUs
	for i := range gpus {
		gpus[i].PCIBusID, gpus[i].PCIDeviceID, gpus[i].PCISubsystemID = "00000000:01:00.0", "268410DE", "889F1043"
		gpus[i].DriverVersion, gpus[i].VBIOSVersion = "550.54.15", "95.02.18.80.87"
	}
	return gpus
}

func mustAttest(t *testing.T, m *testMarket, node context.Context, a idlegrid.Attestation) *idlegrid.AttestResponse {
	t.Helper()
	resp, err := m.srv.Attest(node, idlegrid.AttestRequest{Attestation: a})
	if err != nil {
		t.Fatalf("Attest: %v", err)
	}
	return resp
}

// answer is what a GPU that really is actualModel, with allocMB of memory
// it can allocate, answers to c: the right result, in its model's time.
func answer(t *testing.T, c *idlegrid.Challenge, actualModel string, allocMB int) idlegrid.ChallengeAnswer {
	t.Helper()
	task, err := challenge.TaskOf(c)
	if err != nil {
		t.Fatal(err)
	}
	hashes, _, err := challenge.Run(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	spec, ok := challenge.LookupSpec(actualModel)
	if !ok {
		t.Fatalf("no spec for %s", actualModel)
	}
	return idlegrid.ChallengeAnswer{RowHashes: hashes, Digest: challenge.Digest(hashes),
		ElapsedNanos: int64(spec.Expected(task.Size)), VRAMMB: allocMB}
}

func mustAnswer(t *testing.T, m *testMarket, node context.Context, c *idlegrid.Challenge, ans idlegrid.ChallengeAnswer) *idlegrid.Challenge {
	t.Helper()
	got, err := m.srv.AnswerChallenge(node, c.ID, ans)
	if err != nil {
		t.Fatalf("AnswerChallenge: %v", err)
	}
	return got
}

func challengeFacts(t *testing.T, m *testMarket, nodeID string) (passed, failed int) {
	t.Helper()
	facts, err := m.store.ListReputationFacts(context.Background(), nodeID, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range facts {
		switch f.Kind {
		case "challenge_passed":
			passed++
		case "challenge_failed":
			failed++
		}
	}
	return passed, failed
}

func TestServer_Attest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		gpus := fingerprinted("barn-1")
		resp := mustAttest(t, m, m.node, signedAttestation(t, m.nodeID, gpus))
		if len(resp.Changes) != 0 || len(resp.Challenges) != 2 {
			t.Fatalf("first attestation: %d changes, %d challenges; want none and one per GPU (at join)", len(resp.Changes), len(resp.Challenges))
		}
		for _, c := range resp.Challenges {
			if c.Reason != idlegrid.ChallengeAtJoin || c.Model != "RTX4090" || c.Size != server.DefaultChallengeMaxSize || c.MaxNanos <= c.MinNanos {
				t.Fatalf("challenge = %+v, want an at-join challenge sized for an RTX4090 with a time band", c)
			}
		}

		{ // Again
			again := mustAttest(t, m, m.node, signedAttestation(t, m.nodeID, gpus))
			if len(again.Changes) != 0 || len(again.Challenges) != 0 || again.Hash != resp.Hash {
				t.Fatalf("same fingerprint again = %+v, want nothing new", again)
			}
		}
		{ // TamperedSignature
			a := signedAttestation(t, m.nodeID, gpus)
			a.Fingerprint.GPUs[0].VBIOSVersion = "95.02.18.80.99" // after signing
			_, err := m.srv.Attest(m.node, idlegrid.AttestRequest{Attestation: a})
			if idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), "attestation.signature") {
				t.Fatalf("Attest(tampered) = %v, want EINVALID on attestation.signature", err)
			}
		}
		{ // OtherNodesKey
			a := signedAttestation(t, m.nodeID, gpus)
			other := signedAttestation(t, rivalID(t, m), fingerprinted("barn-2"))
			a.Signature = other.Signature
			if _, err := m.srv.Attest(m.node, idlegrid.AttestRequest{Attestation: a}); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
				t.Fatalf("Attest(signed by another node) = %v, want EINVALID", err)
			}
		}
		{ // ForAnotherNode
			a := signedAttestation(t, rivalID(t, m), fingerprinted("barn-2"))
			if _, err := m.srv.Attest(m.node, idlegrid.AttestRequest{Attestation: a}); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
				t.Fatalf("Attest(another node's) = %v, want EINVALID", err)
			}
		}
		{ // Stale
			a := signedAttestation(t, m.nodeID, gpus)
			time.Sleep(nodekey.MaxSkew + time.Second)
			if _, err := m.srv.Attest(m.node, idlegrid.AttestRequest{Attestation: a}); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
				t.Fatalf("Attest(stale) = %v, want EINVALID", err)
			}
		}
		{ // NotTheOffer
			claims := fingerprinted("barn-1")
			claims[1].Model, claims[1].VRAMMB = "H100-80GB", 81920 // the offer says RTX4090
			_, err := m.srv.Attest(m.node, idlegrid.AttestRequest{Attestation: signedAttestation(t, m.nodeID, claims)})
			if idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), "offered as RTX4090") {
				t.Fatalf("Attest(not the offer) = %v, want EINVALID naming the offered GPU", err)
			}
		}
		{ // NotANode
			if _, err := m.srv.Attest(m.provider, idlegrid.AttestRequest{}); idlegrid.ErrorCode(err) != idlegrid.EUNAUTHORIZED {
				t.Fatalf("Attest(as a provider) = %v, want EUNAUTHORIZED", err)
			}
		}

		{ // VBIOSChanged
			flashed := fingerprinted("barn-1")
			flashed[0].VBIOSVersion = "95.02.3C.40.F1"
			got := mustAttest(t, m, m.node, signedAttestation(t, m.nodeID, flashed))
			if len(got.Changes) != 1 {
				t.Fatalf("changes = %+v, want the VBIOS change", got.Changes)
			}
			ch := got.Changes[0]
			if ch.Kind != idlegrid.ChangeVBIOS || ch.GPUUUID != flashed[0].UUID || ch.Before != "95.02.18.80.87" ||
				ch.After != "95.02.3C.40.F1" || ch.FromHash != resp.Hash || ch.ToHash != got.Hash {
				t.Fatalf("change = %+v, want the VBIOS change with both versions and both fingerprints", ch)
			}
			// The changed GPU's at-join challenge still waits: no second one.
			if len(got.Challenges) != 0 {
				t.Fatalf("challenges = %+v, want none while one waits for the GPU", got.Challenges)
			}
			v, err := m.srv.NodeAttestation(m.provider, m.nodeID)
			if err != nil {
				t.Fatal(err)
			}
			if v.Current.Hash != got.Hash || len(v.History) != 2 || len(v.Changes) != 1 || v.Changes[0].Kind != idlegrid.ChangeVBIOS {
				t.Fatalf("attestation view = %+v, want the new fingerprint current, two in history and the change", v)
			}
			if _, err := m.srv.NodeAttestation(m.renter, m.nodeID); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
				t.Fatalf("NodeAttestation(as a renter) = %v, want EFORBIDDEN", err)
			}
		}
	})
}

// A node whose agent runs challenges with CUDA gets them sized to keep its
// GPU busy about a second (capped so that the answer fits a request);
// others keep the CPU's size. The runner is signed with the fingerprint
// and stored with it, for the challenges issued later.
func TestServer_AttestCUDARunner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		gpus := fingerprinted("barn-1")
		cudaAttestation := func() idlegrid.Attestation {
			a := signedAttestation(t, m.nodeID, gpus)
			a.ChallengeRunner = idlegrid.RunnerCUDA
			k, _ := nodeKeys.Load(m.nodeID)
			nodekey.SignAttestation(k.(ed25519.PrivateKey), &a)
			return a
		}
		{ // UnknownRunner
			a := cudaAttestation()
			a.ChallengeRunner = "opencl"
			_, err := m.srv.Attest(m.node, idlegrid.AttestRequest{Attestation: a})
			if idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), "attestation.challenge_runner") {
				t.Fatalf("Attest(runner opencl) = %v, want EINVALID on attestation.challenge_runner", err)
			}
		}
		{ // RunnerNotSigned
			a := cudaAttestation()
			a.ChallengeRunner = idlegrid.RunnerSimulated // after signing
			if _, err := m.srv.Attest(m.node, idlegrid.AttestRequest{Attestation: a}); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
				t.Fatalf("Attest(runner changed after signing) = %v, want EINVALID", err)
			}
		}
		spec, ok := challenge.LookupSpec(gpus[0].Model)
		want := challenge.SizeFor(spec, ok, gpus[0].VRAMMB, 16384)
		if want <= server.DefaultChallengeMaxSize {
			t.Fatalf("SizeFor(%s) = %d: the test needs a GPU whose CUDA size is above the CPU's", gpus[0].Model, want)
		}
		checkSizes := func(cs []*idlegrid.Challenge, n int) {
			t.Helper()
			if len(cs) != n {
				t.Fatalf("%d challenges, want %d", len(cs), n)
			}
			for _, c := range cs {
				lo, hi := spec.Band(want)
				if c.Size != want || c.MinNanos != int64(lo) || c.MaxNanos != int64(hi) {
					t.Fatalf("challenge size %d, band %d–%d ns; want %d, %d–%d ns", c.Size, c.MinNanos, c.MaxNanos, want, lo, hi)
				}
			}
		}
		resp := mustAttest(t, m, m.node, cudaAttestation())
		checkSizes(resp.Challenges, 2)
		for _, c := range resp.Challenges {
			mustAnswer(t, m, m.node, c, idlegrid.ChallengeAnswer{Unsupported: "not now"})
		}
		cs, err := m.srv.ChallengeNode(m.admin, m.nodeID) // sized from the stored attestation
		if err != nil {
			t.Fatal(err)
		}
		checkSizes(cs, 2)
	})
}

// rivalID is barn-2's node ID.
func rivalID(t *testing.T, m *testMarket) string {
	t.Helper()
	return idlegrid.CallerFromContext(m.rival).NodeID
}

func TestServer_AnswerChallenge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		resp := mustAttest(t, m, m.node, signedAttestation(t, m.nodeID, fingerprinted("barn-1")))
		honest, liar := resp.Challenges[0], resp.Challenges[1]

		{ // NotYours
			_, err := m.srv.AnswerChallenge(m.rival, honest.ID, answer(t, honest, "RTX4090", 24000))
			if idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
				t.Fatalf("AnswerChallenge(another node's) = %v, want ENOTFOUND", err)
			}
		}
		{ // Malformed
			_, err := m.srv.AnswerChallenge(m.node, honest.ID, idlegrid.ChallengeAnswer{Digest: "abc", ElapsedNanos: 1})
			if idlegrid.ErrorCode(err) != idlegrid.EINVALID {
				t.Fatalf("AnswerChallenge(bad digest) = %v, want EINVALID", err)
			}
		}

		pending, err := m.srv.PendingChallenges(m.node)
		if err != nil || len(pending.Challenges) != 2 {
			t.Fatalf("PendingChallenges = %+v, %v; want both", pending, err)
		}

		got := mustAnswer(t, m, m.node, honest, answer(t, honest, "RTX4090", 24000))
		if got.State != idlegrid.ChallengePassed || len(got.Findings) != 3 {
			t.Fatalf("honest answer: %s, findings %q; want passed with three findings", got.State, got.Findings)
		}
		if got.Answer == nil || got.Answer.RowHashes != nil || got.Answer.Digest == "" {
			t.Fatalf("judged answer = %+v, want the digest kept and the row hashes dropped", got.Answer)
		}
		if _, err := m.srv.AnswerChallenge(m.node, honest.ID, answer(t, honest, "RTX4090", 24000)); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			t.Fatalf("a second answer = %v, want ECONFLICT", err)
		}
		if n, _ := m.store.FindNode(context.Background(), m.nodeID); n.Quarantined {
			t.Fatal("an honest node was quarantined")
		}
		if passed, failed := challengeFacts(t, m, m.nodeID); passed != 1 || failed != 0 {
			t.Fatalf("reputation facts: %d passed, %d failed; want 1 and 0", passed, failed)
		}

		// The second GPU claims an RTX 4090 but runs like a T4.
		got = mustAnswer(t, m, m.node, liar, answer(t, liar, "T4", 14899))
		if got.State != idlegrid.ChallengeFailed {
			t.Fatalf("lying answer: %s, want failed", got.State)
		}
		q, err := m.store.FindQuarantine(context.Background(), m.nodeID)
		if err != nil {
			t.Fatalf("the lying node is not quarantined: %v", err)
		}
		for _, want := range []string{liar.ID, "performs like a T4", "allocated 14899 MB of the 24564 MB claimed"} {
			if !strings.Contains(q.Reason, want) {
				t.Errorf("quarantine reason %q does not mention %q", q.Reason, want)
			}
		}
		var evidence idlegrid.Challenge
		if err := json.Unmarshal(q.Evidence, &evidence); err != nil || evidence.ID != liar.ID || evidence.Answer == nil ||
			evidence.Answer.VRAMMB != 14899 || evidence.Answer.Digest == "" || evidence.State != idlegrid.ChallengeFailed {
			t.Fatalf("evidence = %s (%v), want the failed challenge with its answer", q.Evidence, err)
		}
		if passed, failed := challengeFacts(t, m, m.nodeID); passed != 1 || failed != 1 {
			t.Fatalf("reputation facts: %d passed, %d failed; want 1 and 1", passed, failed)
		}
		// Fake hardware is an offence against the bond: an upheld dispute,
		// with the challenge as its evidence.
		ds, err := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{})
		if err != nil || len(ds) != 1 || ds[0].Offence != "fake_hardware" || ds[0].State != idlegrid.DisputeUpheld ||
			ds[0].NodeID != m.nodeID || !strings.Contains(ds[0].Evidence, liar.ID) {
			t.Fatalf("disputes = %+v (%v), want one upheld fake_hardware against %s", ds, err, m.nodeID)
		}
		n, err := m.srv.FindNode(m.provider, m.nodeID)
		if err != nil || !n.Quarantined {
			t.Fatalf("FindNode = %+v, %v; want it shown quarantined", n, err)
		}

		// A quarantined node takes no new leases: the job goes to barn-2,
		// and the next waits while barn-2 is full.
		if _, l := mustStartOn(t, m, m.rival); l.NodeID == m.nodeID {
			t.Fatalf("lease %s went to the quarantined node", l.ID)
		}
		waiting, err := m.srv.SubmitJob(m.renter, testSpec())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if j, _ := m.srv.FindJob(m.renter, waiting.ID); j.State != idlegrid.JobQueued {
			t.Fatalf("job %s is %s, want queued while the only free node is quarantined", j.ID, j.State)
		}

		{ // Lift
			if _, err := m.srv.LiftQuarantine(m.provider, m.nodeID, "mine"); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
				t.Fatalf("LiftQuarantine(as the provider) = %v, want EFORBIDDEN", err)
			}
			qs, err := m.srv.ListQuarantines(m.admin, idlegrid.QuarantineFilter{ActiveOnly: true})
			if err != nil || len(qs) != 1 || qs[0].NodeID != m.nodeID {
				t.Fatalf("ListQuarantines = %+v, %v; want the node's", qs, err)
			}
			lifted, err := m.srv.LiftQuarantine(m.admin, m.nodeID, "vendor replaced the card")
			if err != nil || lifted.Active() || lifted.LiftNote != "vendor replaced the card" {
				t.Fatalf("LiftQuarantine = %+v, %v", lifted, err)
			}
			if _, err := m.srv.LiftQuarantine(m.admin, m.nodeID, ""); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
				t.Fatalf("lifting twice = %v, want ECONFLICT", err)
			}
			m.srv.Kick()
			synctest.Wait()
			if j, _ := m.srv.FindJob(m.renter, waiting.ID); j.State != idlegrid.JobRunning {
				t.Fatalf("job %s is %s after the lift, want placed on the lifted node", j.ID, j.State)
			}
		}
	})
}

// mustStartOn submits a job and checks that it is placed on node.
func mustStartOn(t *testing.T, m *testMarket, node context.Context) (*idlegrid.Job, *idlegrid.Lease) {
	t.Helper()
	j, err := m.srv.SubmitJob(m.renter, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	cmds, err := m.srv.Commands(node, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if c.Kind == idlegrid.CommandStart && c.Lease.JobID == j.ID {
			return j, c.Lease
		}
	}
	t.Fatalf("job %s was not placed on the expected node", j.ID)
	return nil, nil
}

// zeros is a random source that always draws 0: every node is due.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

var _ io.Reader = zeros{}

func TestServer_ChallengePass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store, err := sqlstore.Open(ctx, sqlstoretest.Path(t))
		if err != nil {
			t.Fatal(err)
		}
		policy, err := trustpolicy.Parse([]byte("version: 1\nchallenges: {at_join: false, per_node_per_day: 96}\n"))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.Open(server.Config{Store: store, Logger: testLogger, TrustPolicy: policy,
			ChallengeRandom: zeros{}, ChallengePeriod: 24 * time.Hour, ChallengeTimeout: 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close(); store.Close() })
		m := &testMarket{srv: srv, store: store}
		admin, _, _, err := srv.Bootstrap(ctx, "ops", idlegrid.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		m.admin = as(admin)
		provider, _, _, err := srv.CreateAccount(m.admin, "barn", idlegrid.RoleProvider)
		if err != nil {
			t.Fatal(err)
		}
		m.provider = as(provider)
		nodeID := mustJoin(t, m, "barn-1")
		node := idlegrid.NewContextWithCaller(ctx, &idlegrid.Caller{NodeID: nodeID, AccountID: provider.ID, Role: idlegrid.RoleProvider})
		if err := srv.UpdateOffer(node, idlegrid.OfferRequest{Offer: testOffer("barn-1")}); err != nil {
			t.Fatal(err)
		}
		pending := func() []*idlegrid.Challenge {
			t.Helper()
			p, err := srv.PendingChallenges(node)
			if err != nil {
				t.Fatal(err)
			}
			return p.Challenges
		}

		// Not attested yet: its agent could not answer, so it is not challenged.
		if err := srv.ChallengePass(ctx); err != nil {
			t.Fatal(err)
		}
		if got := pending(); len(got) != 0 {
			t.Fatalf("challenges before any attestation: %+v", got)
		}
		if resp := mustAttest(t, m, node, signedAttestation(t, nodeID, fingerprinted("barn-1"))); len(resp.Challenges) != 0 {
			t.Fatalf("at_join is off, yet %d challenges", len(resp.Challenges))
		}
		time.Sleep(time.Minute)
		if _, err := srv.Heartbeat(node, idlegrid.HeartbeatRequest{}); err != nil { // online: due a challenge
			t.Fatal(err)
		}
		if err := srv.ChallengePass(ctx); err != nil {
			t.Fatal(err)
		}
		got := pending()
		if len(got) != 1 || got[0].Reason != idlegrid.ChallengeAtRandom || got[0].Seed != strings.Repeat("0", 32) {
			t.Fatalf("challenges after a pass = %+v, want one random challenge (seed from the injected source)", got)
		}
		// Unanswered past its deadline, it expires: a failed challenge, no quarantine.
		time.Sleep(5 * time.Minute)
		if err := srv.ChallengePass(ctx); err != nil {
			t.Fatal(err)
		}
		c, err := store.FindChallenge(ctx, got[0].ID)
		if err != nil || c.State != idlegrid.ChallengeExpired {
			t.Fatalf("challenge after its deadline = %+v, %v; want expired", c, err)
		}
		if n, _ := store.FindNode(ctx, nodeID); n.Quarantined {
			t.Fatal("an expired challenge quarantined the node")
		}
		if _, failed := challengeFacts(t, m, nodeID); failed != 1 {
			t.Fatalf("failed challenge facts = %d, want 1 for the expired challenge", failed)
		}
		// An admin asks for challenges on every GPU; the node answers that it cannot run them.
		cs, err := srv.ChallengeNode(m.admin, nodeID)
		if err != nil || len(cs) != 2 || cs[0].Reason != idlegrid.ChallengeByAdmin {
			t.Fatalf("ChallengeNode = %+v, %v", cs, err)
		}
		if _, err := srv.ChallengeNode(m.provider, nodeID); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
			t.Fatalf("ChallengeNode(as the provider) = %v, want EFORBIDDEN", err)
		}
		un, err := srv.AnswerChallenge(node, cs[0].ID, idlegrid.ChallengeAnswer{Unsupported: "no GPU kernel"})
		if err != nil || un.State != idlegrid.ChallengeUnsupported {
			t.Fatalf("unsupported answer = %+v, %v", un, err)
		}
		if passed, failed := challengeFacts(t, m, nodeID); passed != 0 || failed != 1 {
			t.Fatalf("facts after an unsupported answer: %d passed, %d failed; want no new fact", passed, failed)
		}
		if !strings.Contains(un.Findings[0], "no GPU kernel") {
			t.Fatalf("findings = %q", un.Findings)
		}
		// A quarantined node is drawn but not challenged: it runs nothing.
		if _, err := srv.QuarantineNode(m.admin, nodeID, "under review"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // a pass draws with the chance of the time since the last
		if _, err := srv.Heartbeat(node, idlegrid.HeartbeatRequest{}); err != nil {
			t.Fatal(err)
		}
		before := len(pending())
		if err := srv.ChallengePass(ctx); err != nil {
			t.Fatal(err)
		}
		if got := pending(); len(got) != before {
			t.Fatalf("a pass challenged a quarantined node: %d pending, want %d", len(got), before)
		}
	})
}

// flip is a random source that draws 0 (every node due) or, flipped, all
// ones but the first byte of each read, which counts (no node due, and
// the rows a challenge's answer is checked by still differ).
type flip struct {
	mu    sync.Mutex
	ones  bool
	count byte
}

func (f *flip) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := byte(0)
	if f.ones {
		b = 0xff
	}
	for i := range p {
		p[i] = b
	}
	if f.ones && len(p) > 0 {
		f.count++
		p[0] = f.count
	}
	return len(p), nil
}

func (f *flip) set(ones bool) { f.mu.Lock(); f.ones = ones; f.mu.Unlock() }

// A random challenge is not issued to a GPU that runs a lease, which the
// agent would answer unsupported: it goes to an idle GPU, and a node whose
// every GPU is busy is owed its challenge until one is idle.
func TestServer_ChallengePass_busyGPUs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		random := &flip{}
		m := mustMarketOn(t, mustPolicy("version: 1\ngold: {min_level: 0}\nchallenges: {at_join: false, per_node_per_day: 96}\n"),
			func(s idlegrid.Store) idlegrid.Store { return s },
			func(c *server.Config) { c.ChallengeRandom, c.ChallengePeriod = random, 24*time.Hour })
		ctx := context.Background()
		mustAttest(t, m, m.node, signedAttestation(t, m.nodeID, fingerprinted("barn-1")))
		_, l := mustStart(t, m) // both of barn-1's GPUs
		pending := func() []*idlegrid.Challenge {
			t.Helper()
			p, err := m.srv.PendingChallenges(m.node)
			if err != nil {
				t.Fatal(err)
			}
			return p.Challenges
		}
		m.advance(t, time.Minute)
		if err := m.srv.ChallengePass(ctx); err != nil {
			t.Fatal(err)
		}
		if got := pending(); len(got) != 0 {
			t.Fatalf("a pass challenged GPU %s of barn-1 while its lease holds %v", got[0].GPUUUID, l.GPUUUIDs)
		}
		// Drawn no more, barn-1 is still owed its challenge: the pass after
		// its lease ends issues it.
		random.set(true)
		m.advance(t, time.Minute)
		if err := m.srv.ChallengePass(ctx); err != nil {
			t.Fatal(err)
		}
		if got := pending(); len(got) != 0 {
			t.Fatalf("a pass challenged barn-1 while its lease runs: %+v", got)
		}
		if err := m.srv.ReportLease(m.node, l.ID, succeeded); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		m.advance(t, time.Minute)
		if err := m.srv.ChallengePass(ctx); err != nil {
			t.Fatal(err)
		}
		got := pending()
		if len(got) != 1 || got[0].Reason != idlegrid.ChallengeAtRandom {
			t.Fatalf("challenges once barn-1 is idle = %+v, want the random one it was owed", got)
		}
		// Owed once: the next pass, with no draw, issues nothing more.
		m.advance(t, time.Minute)
		if err := m.srv.ChallengePass(ctx); err != nil {
			t.Fatal(err)
		}
		if got := pending(); len(got) != 1 {
			t.Fatalf("%d challenges after another pass, want still 1", len(got))
		}
	})
}

// A node that has owed its random challenge for the policy's max_owed
// takes no new leases until the challenge is issued and answered: when its
// lease ends, a job waiting for it is not placed there while the next pass
// challenges the GPU that freed up and the challenge runs, and then it is.
// With max_owed 0 the job takes the GPUs at once, and the node still owes
// its challenge.
func TestServer_ChallengePass_owedTooLong(t *testing.T) {
	for _, maxOwed := range []string{"1h", "0"} {
		t.Run("max_owed="+maxOwed, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testOwedTooLong(t, maxOwed != "0", maxOwed) })
		})
	}
}

func testOwedTooLong(t *testing.T, closes bool, maxOwed string) {
	random := &flip{}
	m := mustMarketOn(t, mustPolicy("version: 4\ngold: {min_level: 0}\nchallenges: {at_join: false, per_node_per_day: 96, max_owed: "+maxOwed+"}\n"),
		func(s idlegrid.Store) idlegrid.Store { return s },
		func(c *server.Config) { c.ChallengeRandom, c.ChallengePeriod = random, 24*time.Hour })
	ctx := context.Background()
	mustAttest(t, m, m.node, signedAttestation(t, m.nodeID, fingerprinted("barn-1")))
	_, l := mustStart(t, m) // both of barn-1's GPUs, for an hour
	pass := func() {
		t.Helper()
		if err := m.srv.ChallengePass(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
	}
	m.advance(t, time.Minute)
	pass() // drawn while busy: owed
	random.set(true)
	spec := testSpec()
	spec.MaxPriceMicrosPerGPUHour = 450_000 // below barn-2's ask: only barn-1 will do
	next, err := m.srv.SubmitJob(m.renter, spec)
	if err != nil {
		t.Fatal(err)
	}
	m.advance(t, time.Hour)
	pass() // owed an hour
	v, err := m.srv.NodeAttestation(m.provider, m.nodeID)
	if err != nil {
		t.Fatal(err)
	}
	if o := v.ChallengeOwed; o == nil || o.NoNewLeases != closes || m.srv.Now().Sub(o.Since) < time.Hour {
		t.Fatalf("the hardware view's owed challenge = %+v, want one owed over an hour, taking no new leases: %t", o, closes)
	}
	if err := m.srv.ReportLease(m.node, l.ID, succeeded); err != nil {
		t.Fatal(err)
	}
	m.advance(t, 10*time.Second)
	if got := mustFindJob(t, m, next.ID); closes != (got.State == idlegrid.JobQueued) {
		t.Fatalf("the waiting job is %s (%s) once barn-1's lease ended, before its challenge is issued; want it placed: %t",
			got.State, got.Reason, !closes)
	}
	pass() // a GPU is idle, or was a moment: the challenge is issued
	if !closes {
		// The next job took both GPUs again as they freed up: the
		// challenge is still owed.
		if got := mustFindJob(t, m, next.ID); got.State == idlegrid.JobQueued {
			t.Fatalf("the waiting job is still queued (%s) after barn-1's lease ended", got.Reason)
		}
		if v, err := m.srv.NodeAttestation(m.provider, m.nodeID); err != nil || v.ChallengeOwed == nil || v.ChallengeOwed.ChallengeID != "" {
			t.Fatalf("the hardware view's owed challenge after the pass = %+v (%v), want it still owed", v.ChallengeOwed, err)
		}
		return
	}
	p, err := m.srv.PendingChallenges(m.node)
	if err != nil || len(p.Challenges) != 1 || p.Challenges[0].Reason != idlegrid.ChallengeAtRandom {
		t.Fatalf("challenges once barn-1 is idle = %+v (%v), want the random one it owed", p, err)
	}
	c := p.Challenges[0]
	// While it runs, barn-1 still takes no new lease: the GPU it runs on is
	// not rented under it.
	m.advance(t, 10*time.Second)
	pass()
	if got := mustFindJob(t, m, next.ID); got.State != idlegrid.JobQueued {
		t.Fatalf("the waiting job is %s while barn-1's challenge runs, want queued", got.State)
	}
	if v, err := m.srv.NodeAttestation(m.provider, m.nodeID); err != nil || v.ChallengeOwed == nil || v.ChallengeOwed.ChallengeID != c.ID || !v.ChallengeOwed.NoNewLeases {
		t.Fatalf("the hardware view's owed challenge while it runs = %+v (%v), want %s, taking no new leases", v.ChallengeOwed, err, c.ID)
	}
	mustAnswer(t, m, m.node, c, answer(t, c, "RTX4090", 24000))
	pass() // answered: barn-1 is back
	m.advance(t, 10*time.Second)
	if got := mustFindJob(t, m, next.ID); got.State == idlegrid.JobQueued {
		t.Fatalf("the waiting job is still queued (%s) after barn-1's challenge was answered", got.Reason)
	}
	if v, err := m.srv.NodeAttestation(m.provider, m.nodeID); err != nil || v.ChallengeOwed != nil {
		t.Fatalf("the hardware view's owed challenge once answered = %+v (%v), want none", v.ChallengeOwed, err)
	}
}

// A node whose every GPU fails its challenge is one offence: the first
// failure quarantines it and is convicted; the others are recorded as
// failed challenges, and the node stays in the quarantine it is in, its
// bond slashed once.
func TestServer_AnswerChallenge_oneConviction(t *testing.T) {
	for _, underReview := range []bool{false, true} {
		t.Run(map[bool]string{false: "quarantined by the failure", true: "quarantined by an operator first"}[underReview], func(t *testing.T) {
			testOneConviction(t, underReview)
		})
	}
}

// testOneConviction: with underReview, an operator quarantined the node
// for something else before its GPUs failed: the first failure is still
// convicted, once.
func testOneConviction(t *testing.T, underReview bool) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		mustBond(t, m, 1000)
		if underReview {
			if _, err := m.srv.QuarantineNode(m.admin, m.nodeID, "under review"); err != nil {
				t.Fatal(err)
			}
		}
		resp := mustAttest(t, m, m.node, signedAttestation(t, m.nodeID, fingerprinted("barn-1")))
		if len(resp.Challenges) != 2 {
			t.Fatalf("%d challenges, want one for each of two GPUs", len(resp.Challenges))
		}
		for _, c := range resp.Challenges {
			if got := mustAnswer(t, m, m.node, c, answer(t, c, "T4", 14899)); got.State != idlegrid.ChallengeFailed {
				t.Fatalf("lying answer: %s, want failed", got.State)
			}
		}
		synctest.Wait()
		ds, err := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{})
		if err != nil || len(ds) != 1 || ds[0].Offence != "fake_hardware" {
			t.Fatalf("disputes = %+v (%v), want one fake_hardware conviction", ds, err)
		}
		want := resp.Challenges[0].ID
		if underReview {
			want = "under review"
		}
		q, err := m.store.FindQuarantine(context.Background(), m.nodeID)
		if err != nil || !strings.Contains(q.Reason, want) {
			t.Fatalf("quarantine %+v (%v), want the one it was put in first (%s)", q, err, want)
		}
		if _, failed := challengeFacts(t, m, m.nodeID); failed != 2 {
			t.Errorf("%d failed challenges in the node's reputation, want both", failed)
		}
	})
}
