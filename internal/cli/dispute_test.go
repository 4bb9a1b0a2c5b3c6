package cli

import (
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

func TestBondAndDisputeCommands(t *testing.T) {
	admin, renter, provider, _, price := moneyMarket(t)
	earned := idlegrid.CostOf(price, 30) - idlegrid.CostOf(price, 30)/10

	var b idlegrid.Balance
	mustJSON(t, provider, &b, "bond", "post", units(earned), "--idempotency-key", "stake-1")
	if b.Bond != earned || b.Payable != 0 {
		t.Fatalf("bond post: %+v, want all %s of the payable earnings staked", b, earned)
	}
	if out := must(t, provider, "bond", "post", units(earned), "--idempotency-key", "stake-1"); !strings.Contains(out, "the bond of") {
		t.Errorf("a retried bond post printed %q", out)
	}
	if r := run(t, provider, "bond", "post", "1"); r.code != 1 || !strings.Contains(r.err, "payable earnings too low") {
		t.Errorf("staking more than is payable: %s", r)
	}
	if r := run(t, renter, "bond", "post", "1"); r.code != 1 {
		t.Errorf("a renter staking a bond: %s", r)
	}
	if r := run(t, provider, "bond", "post", "-3"); r.code != 2 {
		t.Errorf("a negative amount: %s, want a usage error", r)
	}
	if out := must(t, provider, "bond", "release", units(earned)); !strings.Contains(out, "your bond is now $0.000000") {
		t.Errorf("bond release printed %q", out)
	}

	var ds []idlegrid.Dispute
	mustJSON(t, admin, &ds, "dispute", "ls", "--json")
	if len(ds) != 0 {
		t.Errorf("dispute ls = %+v, want none", ds)
	}
	// An empty listing says so, and under which filters, not a bare header.
	if out := must(t, admin, "dispute", "ls", "--state", "open"); out != "no dispute matches --state open\n" {
		t.Errorf("dispute ls printed:\n%s", out)
	}
	if out := must(t, admin, "dispute", "ls"); out != "no disputes to list yet\n" {
		t.Errorf("dispute ls printed:\n%s", out)
	}
	if r := run(t, admin, "dispute", "ls", "--state", "maybe"); r.code != 2 {
		t.Errorf("an unknown --state: %s, want a usage error", r)
	}
	if r := run(t, admin, "dispute", "uphold", "dispute_x"); r.code != 2 || !strings.Contains(r.err, "--reason") {
		t.Errorf("uphold without --reason: %s", r)
	}
	if r := run(t, admin, "dispute", "show", "dispute_missing"); r.code != 1 || !strings.Contains(r.err, "not found") {
		t.Errorf("show a missing dispute: %s", r)
	}
	var vs []idlegrid.Verification
	mustJSON(t, renter, &vs, "dispute", "verifications", "--json")
	if len(vs) != 0 {
		t.Errorf("dispute verifications = %+v, want none", vs)
	}
}

// TestDisputeOpen: an operator opens a dispute from the command line, as
// the dispute group's help says it may, the server's faults named as the
// flags given, and resolves it.
func TestDisputeOpen(t *testing.T) {
	admin, renter, _, _, _ := moneyMarket(t)
	var providers []idlegrid.Account
	mustJSON(t, admin, &providers, "account", "ls", "--role", "provider")
	if len(providers) != 1 {
		t.Fatalf("providers: %+v", providers)
	}
	prov := providers[0].ID
	if r := run(t, admin, "dispute", "open", "--provider", prov, "--offence", "broken_notice"); r.code != 2 || !strings.Contains(r.err, "--evidence") {
		t.Errorf("open without --evidence: %s, want a usage error naming --evidence", r)
	}
	if r := run(t, admin, "dispute", "open", "--provider", prov, "--offence", "rudeness", "--evidence", "x"); r.code != 2 || !strings.Contains(r.err, "--offence: ") {
		t.Errorf("open with an unknown offence: %s, want a usage error naming --offence", r)
	}
	if r := run(t, admin, "dispute", "open", "--provider", prov, "--offence", "broken_notice", "--evidence", "x", "--harm", "-1"); r.code != 2 || !strings.Contains(r.err, "--harm") {
		t.Errorf("open with a negative harm: %s, want a usage error naming --harm", r)
	}
	args := []string{"dispute", "open", "--provider", prov, "--offence", "broken_notice", "--evidence", "node rebooted mid-lease", "--harm", "1.50"}
	if r := run(t, renter, args...); r.code == 0 || !strings.Contains(r.err, "--lease: required: a renter complains about a lease of its own") {
		t.Errorf("a renter opening a dispute of no lease: %s, want it told to name its lease", r)
	}
	var d idlegrid.Dispute
	mustJSON(t, admin, &d, append(args, "--json")...)
	if d.State != idlegrid.DisputeOpen || d.ProviderID != prov || d.HarmMicros != 1_500_000 || d.Evidence != "node rebooted mid-lease" {
		t.Fatalf("dispute open --json = %+v", d)
	}
	if out := must(t, admin, "dispute", "ls", "--state", "open"); !strings.Contains(out, d.ID) || !strings.Contains(out, "when upheld") {
		t.Errorf("dispute ls --state open:\n%s\nwant %s, its penalty set when upheld", out, d.ID)
	}
	if out := must(t, admin, "dispute", "show", d.ID); !strings.Contains(out, "penalty   set when it is upheld") {
		t.Errorf("dispute show of an open dispute:\n%s\nwant its penalty set when upheld", out)
	}
	if out := must(t, admin, "dispute", "dismiss", d.ID, "--reason", "the renter's own script rebooted it"); !strings.Contains(out, "(dismissed)") {
		t.Errorf("dispute dismiss printed:\n%s", out)
	}
}

// TestConvicted: a verification names the provider it convicted, the one
// whose output the other two runs contradicted.
func TestConvicted(t *testing.T) {
	v := &idlegrid.Verification{State: idlegrid.VerificationConvicted,
		Original: idlegrid.Run{ProviderID: "p1", Digest: "a"}, Rerun: idlegrid.Run{ProviderID: "p2", Digest: "b"},
		Tiebreak: &idlegrid.Run{ProviderID: "p3", Digest: "a"}}
	if got := convicted(v); got != "p2" {
		t.Errorf("the re-run the odd one out: convicted %q, want p2", got)
	}
	v.Tiebreak.Digest = "b"
	if got := convicted(v); got != "p1" {
		t.Errorf("the original the odd one out: convicted %q, want p1", got)
	}
	v.State = idlegrid.VerificationInconclusive
	if got := convicted(v); got != "" {
		t.Errorf("inconclusive: convicted %q, want none", got)
	}
}

// TestDisputeOpen_renterComplaint: a renter complains about a running lease
// of its own, naming only the lease: the dispute opens with the lease's
// provider, its hold as the harm, and the command says an admin decides it.
func TestDisputeOpen_renterComplaint(t *testing.T) {
	m := mustMoneyMarket(t)
	_, l := m.runningJob(t)
	out := must(t, m.renter, "dispute", "open", "--lease", l.ID, "--offence", "fake_hardware", "--evidence", "nvidia-smi in the container shows a smaller GPU")
	for _, want := range []string{"provider  " + l.ProviderID, "lease     " + l.ID, "harm      " + l.HoldMicros.String(), "an admin decides it; follow it with: idlegrid dispute show "} {
		if !strings.Contains(out, want) {
			t.Errorf("dispute open --lease printed:\n%s\nwant %q", out, want)
		}
	}
	if r := run(t, m.renter, "dispute", "open", "--lease", "lease_missing", "--offence", "fake_hardware", "--evidence", "x"); r.code == 0 || !strings.Contains(r.err, "lease_missing") {
		t.Errorf("a complaint about no such lease: %s, want it refused naming the lease", r)
	}
}
