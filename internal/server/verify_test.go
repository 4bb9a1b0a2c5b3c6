package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
)

// verifyAll re-runs every verifiable lease.
var verifyAll = mustPolicy("version: 1\ngold: {min_level: 0}\nverification: {sample_fraction: 1, newcomer_sample_fraction: 1}\n")

// mustProviderNode makes a provider with one node like the market's, and
// returns the provider's ID and the node's caller.
func mustProviderNode(t *testing.T, m *testMarket, name string) (string, context.Context) {
	t.Helper()
	acct, _, _, err := m.srv.CreateAccount(m.admin, name, idlegrid.RoleProvider)
	if err != nil {
		t.Fatal(err)
	}
	_, node := mustJoinUnder(t, m, acct.ID, name)
	if _, err := m.srv.PostBond(m.admin, acct.ID, 100*idlegrid.MicrosPerUnit, "bond-"+name); err != nil {
		t.Fatal(err)
	}
	return acct.ID, node
}

// mustRunDigest finds the node told to start a lease of job, and has it
// run the lease to success, printing digest.
func mustRunDigest(t *testing.T, m *testMarket, nodes []context.Context, jobID, digest string) *idlegrid.Lease {
	t.Helper()
	c, n := mustStartCommandOn(t, m, nodes, jobID)
	if err := m.srv.ReportLease(n, c.Lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
		t.Fatal(err)
	}
	exit := 0
	if err := m.srv.ReportLease(n, c.Lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &exit, OutputDigest: digest}); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return c.Lease
}

// mustStartCommand is the command that tells one of nodes to start a
// lease of job.
func mustStartCommand(t *testing.T, m *testMarket, nodes []context.Context, jobID string) idlegrid.Command {
	t.Helper()
	c, _ := mustStartCommandOn(t, m, nodes, jobID)
	return c
}

// mustStartCommandOn is mustStartCommand, with the node told.
func mustStartCommandOn(t *testing.T, m *testMarket, nodes []context.Context, jobID string) (idlegrid.Command, context.Context) {
	t.Helper()
	synctest.Wait()
	for _, n := range nodes {
		cmds, err := m.srv.Commands(n, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			if c.Kind == idlegrid.CommandStart && c.Lease.JobID == jobID {
				return c, n
			}
		}
	}
	t.Fatalf("no node was told to start %s", jobID)
	return idlegrid.Command{}, nil
}

func mustVerification(t *testing.T, m *testMarket) *idlegrid.Verification {
	t.Helper()
	vs, err := m.srv.ListVerifications(m.admin, idlegrid.VerificationFilter{})
	if err != nil {
		t.Fatal(err)
	} else if len(vs) != 1 {
		t.Fatalf("%d verifications, want 1", len(vs))
	}
	return vs[0]
}

func TestServer_Verification(t *testing.T) {
	verifiable := testSpec()
	verifiable.Verifiable = true
	t.Run("a matching re-run", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarketWith(t, verifyAll)
			_, other := mustProviderNode(t, m, "elsewhere")
			nodes := []context.Context{m.node, m.rival, other}
			j, err := m.srv.SubmitJob(m.renter, verifiable)
			if err != nil {
				t.Fatal(err)
			}
			first := mustRunDigest(t, m, nodes, j.ID, "sha256:good")
			v := mustVerification(t, m)
			if v.State != idlegrid.VerificationRerunning || v.Original.LeaseID != first.ID {
				t.Fatalf("verification %+v, want a re-run of %s", v, first.ID)
			}
			rerun, err := m.store.FindJob(context.Background(), v.Rerun.JobID)
			if err != nil {
				t.Fatal(err)
			} else if rerun.Tier != idlegrid.TierBronze || rerun.VerifiesLeaseID != first.ID || len(rerun.AvoidProviders) != 1 || rerun.AvoidProviders[0] != first.ProviderID {
				t.Fatalf("re-run job %+v, want bronze, avoiding %s", rerun.JobSpec, first.ProviderID)
			}
			// The node given the re-run cannot tell it from the original.
			if c := mustStartCommand(t, m, nodes, rerun.ID); c.Job.VerifiesLeaseID != "" || len(c.Job.AvoidProviders) != 0 || !c.Job.Verifiable {
				t.Errorf("the re-run's node is told verifies_lease_id %q, avoid_providers %v, verifiable %v; want neither, and verifiable",
					c.Job.VerifiesLeaseID, c.Job.AvoidProviders, c.Job.Verifiable)
			}
			// Nor can the original's provider learn which job checks it.
			owner := idlegrid.NewContextWithCaller(context.Background(), &idlegrid.Caller{AccountID: first.ProviderID, Role: idlegrid.RoleProvider})
			if vs, err := m.srv.ListVerifications(owner, idlegrid.VerificationFilter{}); err != nil || len(vs) != 1 || vs[0].Rerun.JobID != "" {
				t.Errorf("the original's provider sees %+v (%v): want its verification, without the re-run's job", vs, err)
			}
			second := mustRunDigest(t, m, nodes, rerun.ID, "sha256:good")
			if second.ProviderID == first.ProviderID {
				t.Fatalf("the re-run ran on the same provider %s", first.ProviderID)
			}
			if v = mustVerification(t, m); v.State != idlegrid.VerificationMatched {
				t.Errorf("verification %+v, want matched", v)
			}
			if ds, _ := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{}); len(ds) != 0 {
				t.Errorf("disputes %+v, want none", ds)
			}
			// A renter may not forge a re-run.
			forged := verifiable
			forged.VerifiesLeaseID = first.ID
			if _, err := m.srv.SubmitJob(m.renter, forged); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
				t.Errorf("submitting a re-run: %v, want EINVALID", err)
			}
		})
	})
	t.Run("a success without a digest is the node's failure", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarketWith(t, verifyAll)
			nodes := []context.Context{m.node, m.rival}
			j, err := m.srv.SubmitJob(m.renter, verifiable)
			if err != nil {
				t.Fatal(err)
			}
			l := mustFindLease(t, m, mustRunDigest(t, m, nodes, j.ID, "").ID)
			if l.State != idlegrid.LeaseFailed || l.Fault != idlegrid.FaultProvider || !strings.Contains(l.Reason, "without the digest") {
				t.Errorf("lease %s %s (fault %q): %s; want failed by the provider, saying the digest is missing", l.ID, l.State, l.Fault, l.Reason)
			}
			if got, _ := m.store.FindJob(context.Background(), j.ID); got.State.Terminal() {
				t.Errorf("job %s, want requeued", got.State)
			}
			if vs, _ := m.srv.ListVerifications(m.admin, idlegrid.VerificationFilter{}); len(vs) != 0 {
				t.Errorf("verifications %+v, want none", vs)
			}
			plain, err := m.srv.SubmitJob(m.renter, testSpec())
			if err != nil {
				t.Fatal(err)
			}
			if l := mustFindLease(t, m, mustRunDigest(t, m, nodes, plain.ID, "").ID); l.State != idlegrid.LeaseSucceeded {
				t.Errorf("a job not marked verifiable: lease %s, want succeeded without a digest", l.State)
			}
		})
	})
	t.Run("a tie-break convicts the odd one out", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarketWith(t, verifyAll)
			mustBond(t, m, 100)
			_, second := mustProviderNode(t, m, "second")
			_, third := mustProviderNode(t, m, "third")
			nodes := []context.Context{m.node, m.rival, second, third}
			j, err := m.srv.SubmitJob(m.renter, verifiable)
			if err != nil {
				t.Fatal(err)
			}
			mustRunDigest(t, m, nodes, j.ID, "sha256:right")
			v := mustVerification(t, m)
			liar := mustRunDigest(t, m, nodes, v.Rerun.JobID, "sha256:wrong")
			v = mustVerification(t, m)
			if v.State != idlegrid.VerificationTiebreaking || v.Tiebreak == nil {
				t.Fatalf("verification %+v, want a tie-break", v)
			}
			tb := mustRunDigest(t, m, nodes, v.Tiebreak.JobID, "sha256:right")
			if tb.ProviderID == liar.ProviderID || tb.ProviderID == v.Original.ProviderID {
				t.Fatalf("the tie-break ran on provider %s, one of the two it decides between", tb.ProviderID)
			}
			if tbJob, err := m.store.FindJob(context.Background(), v.Tiebreak.JobID); err != nil {
				t.Fatal(err)
			} else if want := []string{v.Original.ProviderID, liar.ProviderID}; !slices.Equal(tbJob.AvoidProviders, want) {
				t.Errorf("the tie-break avoids %v, want %v, each once", tbJob.AvoidProviders, want)
			}
			v = mustVerification(t, m)
			if v.State != idlegrid.VerificationConvicted || v.DisputeID == "" {
				t.Fatalf("verification %+v, want the re-run's provider convicted", v)
			}
			d, err := m.srv.FindDispute(m.admin, v.DisputeID)
			if err != nil {
				t.Fatal(err)
			} else if d.Offence != "mismatched_result" || d.ProviderID != liar.ProviderID || d.LeaseID != liar.ID || d.PenaltyMicros == 0 {
				t.Errorf("dispute %+v, want mismatched_result against %s with a penalty", d, liar.ProviderID)
			}
			// Its detail, the verification as it convicted, is a JSON object, not a string of JSON.
			if b, err := json.Marshal(d); err != nil || !strings.Contains(string(b), `"detail":{"id":"`+v.ID+`"`) {
				t.Errorf("the dispute as JSON %s (%v): want its detail the verification %s, as an object", b, err, v.ID)
			}
			if ts, err := m.store.ListTransfers(context.Background(), idlegrid.TransferFilter{ID: d.TransferID, Limit: 1}); err != nil || len(ts) != 1 || ts[0].LeaseID != liar.ID {
				t.Errorf("the penalty's transfer %+v (%v): want it to name lease %s", ts, err, liar.ID)
			}
			// The made-up result is a failed lease in the liar node's
			// reputation, in place of the completion its lease first
			// counted, and the conviction flags it whatever its score.
			rep, err := m.srv.NodeReputation(m.admin, liar.NodeID)
			if err != nil {
				t.Fatal(err)
			}
			ended, err := m.store.FindLease(context.Background(), liar.ID)
			if err != nil || ended.EndedAt == nil {
				t.Fatalf("the liar's lease: %+v, %v; want it ended", ended, err)
			}
			if !slices.ContainsFunc(rep.Detail.Facts, func(f *idlegrid.ReputationFact) bool {
				return f.Kind == "lease_disproved" && f.Source == liar.ID && f.Key == "verification:"+v.ID && f.At.Equal(*ended.EndedAt)
			}) {
				t.Errorf("the liar node's facts %+v: want its lease %s disproved by the verification, at its end", rep.Detail.Facts, liar.ID)
			}
			for _, d := range rep.Detail.Dimensions {
				if d.Dimension == "leases" && (d.Good > 1e-9 || d.Bad < 0.99) {
					t.Errorf("the liar node's leases count %g good and %g bad: want its one lease failed and nothing completed", d.Good, d.Bad)
				}
			}
			// The market's own conviction is told to the liar, with its hold.
			liarOwner := idlegrid.NewContextWithCaller(context.Background(), &idlegrid.Caller{AccountID: liar.ProviderID, Role: idlegrid.RoleProvider})
			wantNotices(t, m, liarOwner, "dispute "+d.ID+" (mismatched_result on lease "+liar.ID+") was upheld: ",
				"Every node of yours holds level 0 (newcomer) until")
			if advice := rep.Detail.Advice; len(advice) == 0 || !strings.Contains(advice[len(advice)-1].Text, "dispute "+d.ID+" upheld (mismatched_result") {
				t.Errorf("the liar node's advice %+v: want it to end flagged by dispute %s", advice, d.ID)
			}
			if prov, err := m.srv.ProviderReputation(m.admin, liar.ProviderID); err != nil {
				t.Fatal(err)
			} else if advice := prov.Detail.Advice; !strings.Contains(advice[len(advice)-1].Text, "is a flag: dispute "+d.ID) {
				t.Errorf("the liar's provider's advice ends %q: want it flagged by dispute %s", advice[len(advice)-1].Text, d.ID)
			}
			mustLedgerBalanced(t, m.store)
		})
	})
	t.Run("a liar without a bond gives back what the lease earned it, and the market its fee", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarketOn(t, verifyAll, func(s idlegrid.Store) idlegrid.Store { return s },
				func(c *server.Config) { c.PayoutHold = 30 * time.Minute })
			secondID, second := mustProviderNode(t, m, "second")
			thirdID, third := mustProviderNode(t, m, "third")
			for _, id := range []string{secondID, thirdID} { // the re-run goes to one of them: neither has a bond
				owner := idlegrid.NewContextWithCaller(context.Background(), &idlegrid.Caller{AccountID: id, Role: idlegrid.RoleProvider})
				if _, err := m.srv.ReleaseBond(owner, 100*idlegrid.MicrosPerUnit, "all of it"); err != nil {
					t.Fatal(err)
				}
			}
			nodes := []context.Context{m.node, m.rival, second, third}
			j, err := m.srv.SubmitJob(m.renter, verifiable)
			if err != nil {
				t.Fatal(err)
			}
			mustRunDigest(t, m, nodes, j.ID, "sha256:right")
			v := mustVerification(t, m)
			// The re-run runs 20 s, so that its lease earns something.
			c, n := mustStartCommandOn(t, m, nodes, v.Rerun.JobID)
			if err := m.srv.ReportLease(n, c.Lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Second)
			exit := 0
			if err := m.srv.ReportLease(n, c.Lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &exit, OutputDigest: "sha256:wrong"}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			liar := mustFindLease(t, m, c.Lease.ID)
			pending := mustAccountBalance(t, m, liar.ProviderID).Pending
			v = mustVerification(t, m)
			mustRunDigest(t, m, nodes, v.Tiebreak.JobID, "sha256:right")
			v = mustVerification(t, m)
			d, err := m.srv.FindDispute(m.admin, v.DisputeID)
			fee := liar.ChargedMicros / 10 // the test market's fee is 10%
			earned := liar.ChargedMicros - fee
			if err != nil {
				t.Fatal(err)
			} else if earned <= 0 || d.PenaltyMicros != 0 || d.RefundMicros != earned || d.FeeRefundMicros != fee || d.TransferID == "" {
				t.Fatalf("dispute %+v, want no penalty (no bond), a refund of the lease's whole charge %s (%s earned, %s fee), and its transfer",
					d, liar.ChargedMicros, earned, fee)
			}
			if got := pending - mustAccountBalance(t, m, liar.ProviderID).Pending; got != earned {
				t.Errorf("the liar's pending earnings fell by %s, want the %s its lease earned", got, earned)
			}
			if ts, err := m.store.ListTransfers(context.Background(), idlegrid.TransferFilter{ID: d.TransferID, Limit: 1}); err != nil || len(ts) != 1 ||
				!slices.ContainsFunc(ts[0].Entries, func(e idlegrid.Entry) bool {
					return e.Account == idlegrid.RenterAvailable(m.renterID) && e.Amount == earned
				}) || !slices.ContainsFunc(ts[0].Entries, func(e idlegrid.Entry) bool { return e.Account == idlegrid.PlatformFees && e.Amount == -fee }) {
				t.Errorf("the dispute's transfer %+v (%v): want %s of the earnings and %s of the fee paid to the renter", ts, err, earned, fee)
			}
			// The month's statements show the refund, the liar's and the renter's.
			liarCtx := idlegrid.NewContextWithCaller(context.Background(), &idlegrid.Caller{AccountID: liar.ProviderID, Role: idlegrid.RoleProvider})
			// The liar's is what its earnings gave back; the renter's all it got.
			for who, ctx := range map[string]context.Context{"liar": liarCtx, "renter": m.renter} {
				want := map[string]idlegrid.Micros{"liar": earned, "renter": liar.ChargedMicros}[who]
				st, err := m.srv.Statement(ctx, "", time.Now().UTC().Format("2006-01"))
				if err != nil || len(st.Penalties) != 1 || st.Penalties[0].DisputeID != d.ID || st.Penalties[0].RefundMicros != want {
					t.Errorf("the %s's statement's penalties = %+v (%v), want dispute %s's refund of %s", who, st.Penalties, err, d.ID, want)
				} else if sales := map[string]idlegrid.Micros{"liar": st.Total.EarningsMicros, "renter": st.Total.ChargedMicros}[who]; st.RefundedMicros != want || st.NetMicros != sales-want {
					t.Errorf("the %s's statement: refunded %s, net %s; want %s, of its %s", who, st.RefundedMicros, st.NetMicros, want, sales)
				}
			}
			// Past the payout hold, the liar's other earnings mature, and
			// the refunded lease's do not.
			payable := mustAccountBalance(t, m, liar.ProviderID).Payable // its bond, released
			time.Sleep(31 * time.Minute)
			synctest.Wait()
			if b := mustAccountBalance(t, m, liar.ProviderID); b.Pending != 0 || b.Payable-payable != pending-earned {
				t.Errorf("past the hold: the liar's pending %s, payable up %s; want none pending, and %s more payable", b.Pending, b.Payable-payable, pending-earned)
			}
			mustLedgerBalanced(t, m.store)
		})
	})
	t.Run("three different outputs convict nobody", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarketWith(t, verifyAll)
			_, second := mustProviderNode(t, m, "second")
			_, third := mustProviderNode(t, m, "third")
			nodes := []context.Context{m.node, m.rival, second, third}
			j, err := m.srv.SubmitJob(m.renter, verifiable)
			if err != nil {
				t.Fatal(err)
			}
			mustRunDigest(t, m, nodes, j.ID, "sha256:a")
			mustRunDigest(t, m, nodes, mustVerification(t, m).Rerun.JobID, "sha256:b")
			mustRunDigest(t, m, nodes, mustVerification(t, m).Tiebreak.JobID, "sha256:c")
			if v := mustVerification(t, m); v.State != idlegrid.VerificationInconclusive || v.DisputeID != "" {
				t.Errorf("verification %+v, want inconclusive", v)
			}
		})
	})
	t.Run("not sampled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarketWith(t, mustPolicy("version: 1\ngold: {min_level: 0}\nverification: {sample_fraction: 0, newcomer_sample_fraction: 0, first_checks: 0}\n"))
			j, err := m.srv.SubmitJob(m.renter, verifiable)
			if err != nil {
				t.Fatal(err)
			}
			mustRunDigest(t, m, []context.Context{m.node, m.rival}, j.ID, "sha256:a")
			if vs, _ := m.srv.ListVerifications(m.admin, idlegrid.VerificationFilter{}); len(vs) != 0 {
				t.Errorf("verifications %+v, want none at a sample fraction of 0", vs)
			}
		})
	})
}

// A run no node can take, or one its renter cancels, leaves the
// verification inconclusive rather than deciding for ever: it would count
// towards first_checks and keep the provider's bond while it waited.
func TestServer_Verification_stalledRuns(t *testing.T) {
	verifiable := testSpec()
	verifiable.Verifiable = true
	// Both test nodes are one provider's, so no node may take a re-run.
	start := func(t *testing.T, m *testMarket) *idlegrid.Verification {
		t.Helper()
		j, err := m.srv.SubmitJob(m.renter, verifiable)
		if err != nil {
			t.Fatal(err)
		}
		mustRunDigest(t, m, []context.Context{m.node, m.rival}, j.ID, "sha256:made-up")
		v := mustVerification(t, m)
		if v.State != idlegrid.VerificationRerunning {
			t.Fatalf("verification %+v, want a re-run waiting", v)
		}
		return v
	}
	reap := func(t *testing.T, m *testMarket) *idlegrid.Verification {
		t.Helper()
		for range 2 { // the server's own reaper may be halfway through the same pass: the second finishes it
			if err := m.srv.Reap(context.Background()); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		return mustVerification(t, m)
	}
	t.Run("no node takes the re-run within a day", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarketWith(t, verifyAll, hourly)
			mustBond(t, m, 100)
			v := start(t, m)
			_, err := m.srv.ReleaseBond(m.provider, idlegrid.MicrosPerUnit, "release-1")
			if idlegrid.ErrorCode(err) != idlegrid.ECONFLICT || !strings.Contains(idlegrid.ErrorMessage(err), v.ID) {
				t.Errorf("releasing the bond while %s decides: %v, want a conflict naming it", v.ID, err)
			}
			time.Sleep(23 * time.Hour)
			if v = reap(t, m); v.State != idlegrid.VerificationRerunning {
				t.Fatalf("after 23 hours: verification %s, want still waiting for its re-run", v.State)
			}
			time.Sleep(time.Hour)
			if v = reap(t, m); v.State != idlegrid.VerificationInconclusive || !strings.Contains(v.Outcome, "no other provider's node took it") {
				t.Fatalf("after a day: verification %s (%s), want inconclusive, saying no node took the re-run", v.State, v.Outcome)
			}
			if j, err := m.store.FindJob(context.Background(), v.Rerun.JobID); err != nil || j.State != idlegrid.JobCancelled {
				t.Errorf("re-run job %+v (%v), want cancelled", j, err)
			}
			if _, err := m.srv.ReleaseBond(m.provider, idlegrid.MicrosPerUnit, "release-1"); err != nil {
				t.Errorf("releasing the bond once nothing decides: %v", err)
			}
			mustLedgerBalanced(t, m.store)
		})
	})
	t.Run("its renter cancels the re-run", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarketWith(t, verifyAll)
			v := start(t, m)
			if _, err := m.srv.CancelJob(m.renter, v.Rerun.JobID); err != nil {
				t.Fatal(err)
			}
			if v = reap(t, m); v.State != idlegrid.VerificationInconclusive || !strings.Contains(v.Outcome, "ended cancelled") {
				t.Errorf("verification %s (%s), want inconclusive, saying its run was cancelled", v.State, v.Outcome)
			}
		})
	})
}
