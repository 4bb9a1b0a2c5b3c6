package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// TestAccountCreate_idempotencyKey: "account create" run again with its
// --idempotency-key creates nothing and shows the first account with a
// new key; a name its role has is refused, saying what to do.
func TestAccountCreate_idempotencyKey(t *testing.T) {
	admin, _, _, _, _ := moneyMarket(t)
	create := []string{"account", "create", "--name", "lab", "--role", "renter", "--idempotency-key", "onboard-lab"}
	var first, again createdAccount
	mustJSON(t, admin, &first, create...)
	if first.Replayed || first.Account == nil || first.Secret == "" {
		t.Fatalf("account create --json: %+v", first)
	}
	out := must(t, admin, create...)
	if want := "already created under idempotency key onboard-lab: renter account " + first.Account.ID + " (lab), not created again\n"; !strings.HasPrefix(out, want) ||
		!strings.Contains(out, "API key (shown once): igk_") || strings.Contains(out, first.Secret) {
		t.Errorf("account create run again printed:\n%s\nwant it to start %q and show a new key", out, want)
	}
	mustJSON(t, admin, &again, create...)
	if !again.Replayed || again.Account.ID != first.Account.ID || again.Key.ID == first.Key.ID {
		t.Errorf("account create --json run again: %+v, want replayed, %s with a new key", again, first.Account.ID)
	}
	var renters []idlegrid.Account
	mustJSON(t, admin, &renters, "account", "ls", "--role", "renter")
	if len(renters) != 2 { // the market's own and lab
		t.Errorf("renters: %+v, want the market's and one lab", renters)
	}

	r := run(t, admin, "account", "create", "--name", "lab", "--role", "renter")
	if r.code != 1 || !strings.Contains(r.err, "name: ") || !strings.Contains(r.err, first.Account.ID) ||
		!strings.Contains(r.err, "another --name") || !strings.Contains(r.err, "idlegrid account ls --role renter'") {
		t.Errorf("a renter named as one is: %s, want the name's conflict and what to do", r)
	}
	r = run(t, admin, "account", "create", "--name", "lab-2", "--role", "renter", "--idempotency-key", "onboard-lab")
	if r.code != 1 || !strings.Contains(r.err, "idempotency_key: ") || !strings.Contains(r.err, "another --idempotency-key") {
		t.Errorf("the key for another account: %s, want the key's conflict", r)
	}
	must(t, admin, "account", "create", "--name", "lab", "--role", "provider")
}

// TestDisputeOpen_idempotencyKey: "dispute open" run again with its
// --idempotency-key opens nothing and shows the first dispute; the key
// with other flags is refused.
func TestDisputeOpen_idempotencyKey(t *testing.T) {
	admin, _, _, _, _ := moneyMarket(t)
	var providers []idlegrid.Account
	mustJSON(t, admin, &providers, "account", "ls", "--role", "provider")
	if len(providers) != 1 {
		t.Fatalf("providers: %+v", providers)
	}
	open := []string{"dispute", "open", "--provider", providers[0].ID, "--offence", "fake_hardware",
		"--evidence", "smaller GPUs than offered", "--idempotency-key", "case-1"}
	var d idlegrid.Dispute
	mustJSON(t, admin, &d, open...)
	out := must(t, admin, open...)
	if want := "already opened under idempotency key case-1: " + d.ID + " (open), not opened again\n"; !strings.HasPrefix(out, want) {
		t.Errorf("dispute open run again printed:\n%s\nwant it to start %q", out, want)
	}
	var ds []idlegrid.Dispute
	mustJSON(t, admin, &ds, "dispute", "ls")
	if len(ds) != 1 || ds[0].ID != d.ID {
		t.Errorf("disputes: %+v, want only %s", ds, d.ID)
	}
	other := append(open[:len(open)-4:len(open)-4], "--evidence", "fewer GPUs than offered", "--idempotency-key", "case-1")
	if r := run(t, admin, other...); r.code != 1 || !strings.Contains(r.err, "idempotency_key: ") || !strings.Contains(r.err, "another --idempotency-key") {
		t.Errorf("the key with other evidence: %s, want the key's conflict", r)
	}
}

// TestDevSeed_rerun: 'idlegrid dev --data DIR' stopped after seeding its
// accounts but before saving its state seeds again on the next run: the
// same accounts, not a refusal of their names.
func TestDevSeed_rerun(t *testing.T) {
	admin, _, _, _, _ := moneyMarket(t)
	url := admin["IDLEGRID_ADDR"]
	cl := client.New(url, admin["IDLEGRID_KEY"])
	dir := t.TempDir()
	first := &devMarket{dir: dir}
	if err := first.seed(context.Background(), cl, url); err != nil {
		t.Fatal(err)
	}
	again := &devMarket{dir: dir} // no state: as if it was never saved
	if err := again.seed(context.Background(), cl, url); err != nil {
		t.Fatalf("seeding again: %v", err)
	}
	if again.state.Renter.ID != first.state.Renter.ID {
		t.Errorf("demo renter seeded again as %s, want %s", again.state.Renter.ID, first.state.Renter.ID)
	}
	for name, p := range first.state.Providers {
		if got := again.state.Providers[name]; got.ID != p.ID || got.JoinToken == "" {
			t.Errorf("provider %s seeded again as %+v, want %s with a join token", name, got, p.ID)
		}
	}
}

// TestTopUpAndPayout_idempotencyKey: "account topup", "bond post", "bond
// release", "payout request", "payout settle" and "payout reject" run
// again with their --idempotency-key say that nothing moved again.
func TestTopUpAndPayout_idempotencyKey(t *testing.T) {
	admin, _, provider, renterID, _ := moneyMarket(t)
	topup := []string{"account", "topup", renterID, "10", "--idempotency-key", "invoice-7"}
	if out := must(t, admin, topup...); !strings.HasPrefix(out, "topped up "+renterID+" by $10.000000") {
		t.Errorf("the top-up printed:\n%s", out)
	}
	if out := must(t, admin, topup...); !strings.HasPrefix(out, "already topped up under idempotency key invoice-7: "+renterID+" was not credited again") {
		t.Errorf("the top-up run again printed:\n%s", out)
	}
	var providers []idlegrid.Account
	mustJSON(t, admin, &providers, "account", "ls", "--role", "provider")
	if len(providers) != 1 {
		t.Fatalf("providers: %+v", providers)
	}
	deposit := []string{"bond", "post", "5", "--provider", providers[0].ID, "--idempotency-key", "deposit-1"} // payable money to request
	if out := must(t, admin, deposit...); !strings.HasPrefix(out, "staked $5.000000") {
		t.Errorf("the deposit printed:\n%s", out)
	}
	if out := must(t, admin, deposit...); !strings.HasPrefix(out, "already staked under idempotency key deposit-1: nothing staked again; the bond of "+providers[0].ID+" is $5.000000") {
		t.Errorf("the deposit run again printed:\n%s", out)
	}
	release := []string{"bond", "release", "3", "--idempotency-key", "free-1"}
	must(t, provider, release...)
	if out := must(t, provider, release...); !strings.HasPrefix(out, "already released under idempotency key free-1: nothing released again; your bond is $2.000000") {
		t.Errorf("the release run again printed:\n%s", out)
	}
	request := []string{"payout", "request", "0.5", "--idempotency-key", "week-49"}
	if out := must(t, provider, request...); !strings.HasPrefix(out, "requested payout ") {
		t.Errorf("the payout request printed:\n%s", out)
	}
	var p idlegrid.Payout
	mustJSON(t, provider, &p, append(request, "--json")...)
	if out := must(t, provider, request...); !strings.HasPrefix(out, "already requested under idempotency key week-49: payout ") {
		t.Errorf("the payout request run again printed:\n%s", out)
	}
	settle := []string{"payout", "settle", p.ID, "--reference", "wire 7", "--idempotency-key", "wire-7"}
	if out := must(t, admin, settle...); !strings.HasPrefix(out, "settled payout "+p.ID) {
		t.Errorf("the settlement printed:\n%s", out)
	}
	if out := must(t, admin, settle...); !strings.HasPrefix(out, "already settled under idempotency key wire-7: payout "+p.ID) {
		t.Errorf("the settlement run again printed:\n%s", out)
	}
	second := []string{"payout", "request", "0.25", "--idempotency-key", "week-50", "--json"}
	mustJSON(t, provider, &p, second...)
	reject := []string{"payout", "reject", p.ID, "--reason", "bank details missing", "--idempotency-key", "no-bank"}
	if out := must(t, admin, reject...); !strings.HasPrefix(out, "rejected payout "+p.ID) {
		t.Errorf("the rejection printed:\n%s", out)
	}
	if out := must(t, admin, reject...); !strings.HasPrefix(out, "already rejected under idempotency key no-bank: payout "+p.ID) {
		t.Errorf("the rejection run again printed:\n%s", out)
	}
}
