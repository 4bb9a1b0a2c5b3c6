package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
)

// moneyClock is a coordinator clock the test moves.
type moneyClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *moneyClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *moneyClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// moneyMarket runs a coordinator with no payout hold on a clock the test
// moves, behind the real HTTP API, with a renter whose job ran 30
// GPU-seconds on a provider's node (signed for with a receipt) and that
// provider's earnings matured; it returns the CLI environments of the
// admin, the renter and the provider.
func moneyMarket(t *testing.T) (admin, renter, provider map[string]string, renterID string, price idlegrid.Micros) {
	t.Helper()
	m := mustMoneyMarket(t)
	return m.admin, m.renter, m.provider, m.renterID, m.price
}

// cliMarket is moneyMarket's market, with its node's agent client for
// tests that run a lease of their own on it.
type cliMarket struct {
	admin, renter, provider map[string]string
	renterID                string
	price                   idlegrid.Micros
	node                    *client.AgentClient
}

// runningJob submits a job that rig takes, and reports its lease running;
// it returns the job's ID and the lease.
func (m *cliMarket) runningJob(t *testing.T) (string, *idlegrid.Lease) {
	t.Helper()
	ctx := context.Background()
	j, err := client.New(m.renter["IDLEGRID_ADDR"], m.renter["IDLEGRID_KEY"]).SubmitJob(ctx, idlegrid.JobSpec{Kind: idlegrid.KindTraining,
		Image: "x/y:1", GPUs: 1, Tier: idlegrid.TierSilver, MaxPriceMicrosPerGPUHour: idlegrid.MicrosPerUnit, DurationSeconds: 600})
	mustOK(t, err)
	for {
		cmds, err := m.node.Commands(ctx, 5*time.Second)
		mustOK(t, err)
		for _, c := range cmds {
			if c.Lease != nil && c.Lease.JobID == j.ID {
				mustOK(t, m.node.ReportLease(ctx, c.Lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}))
				return j.ID, c.Lease
			}
		}
	}
}

func mustMoneyMarket(t *testing.T) *cliMarket {
	t.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, sqlstoretest.Path(t))
	mustOK(t, err)
	t.Cleanup(func() { store.Close() })
	clock := &moneyClock{now: idlegrid.SystemClock{}.Now()}
	srv, err := server.Open(server.Config{Store: store, Clock: clock, PayoutHold: -1,
		HeartbeatInterval: time.Hour, StartTimeout: time.Hour})
	mustOK(t, err)
	t.Cleanup(func() { srv.Close() })
	ts := httptest.NewServer(httpapi.New(srv, httpapi.Options{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(ts.Close)
	_, _, adminKey, err := srv.Bootstrap(ctx, "root", idlegrid.RoleAdmin)
	mustOK(t, err)
	rs := struct{ url, adminKey string }{ts.URL, adminKey}
	adminClient := client.New(rs.url, rs.adminKey)
	ren, _, renterKey, err := adminClient.CreateAccount(ctx, "ren", idlegrid.RoleRenter)
	mustOK(t, err)
	_, _, providerKey, err := adminClient.CreateAccount(ctx, "prov", idlegrid.RoleProvider)
	mustOK(t, err)
	_, err = adminClient.TopUp(ctx, ren.ID, 10*idlegrid.MicrosPerUnit, "t")
	mustOK(t, err)
	_, token, err := client.New(rs.url, providerKey).CreateJoinToken(ctx, "n", 1, time.Hour)
	mustOK(t, err)
	_, key, err := ed25519.GenerateKey(nil)
	mustOK(t, err)
	node := client.NewAgent(rs.url, key)
	offer := idlegrid.Offer{
		Name: "rig", GPUs: []idlegrid.GPU{{UUID: "GPU-1", Model: "RTX4090", VRAMMB: 24576}}, Region: "eu-west", Residency: "EU",
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways},
		Ask:      idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 400_000}},
	}
	_, err = node.Join(ctx, idlegrid.JoinRequest{Token: token, Offer: offer})
	mustOK(t, err)
	mustOK(t, node.UpdateOffer(ctx, idlegrid.OfferRequest{Offer: offer}))
	_, err = client.New(rs.url, renterKey).SubmitJob(ctx, idlegrid.JobSpec{Name: "sweep", Kind: idlegrid.KindTraining, Image: "x/y:1",
		GPUs: 1, Tier: idlegrid.TierSilver, MaxPriceMicrosPerGPUHour: idlegrid.MicrosPerUnit, DurationSeconds: 600})
	mustOK(t, err)
	var lease *idlegrid.Lease
	for lease == nil {
		cmds, err := node.Commands(ctx, 5*time.Second)
		mustOK(t, err)
		for _, c := range cmds {
			lease = c.Lease
		}
	}
	mustOK(t, node.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}))
	clock.advance(30 * time.Second)
	lease, _, err = client.New(rs.url, renterKey).FindLease(ctx, lease.ID)
	mustOK(t, err)
	r := idlegrid.Receipt{LeaseID: lease.ID, Seq: 1, Start: *lease.StartedAt, End: lease.StartedAt.Add(30 * time.Second),
		GPUSeconds: 30, AvgUtilPct: 90}
	nodekey.SignReceipt(key, &r)
	mustOK(t, node.SendReceipts(ctx, lease.ID, []idlegrid.Receipt{r}))
	exit := 0
	mustOK(t, node.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &exit}))
	mustOK(t, srv.Reap(ctx)) // no payout hold: the earnings mature now
	as := func(key string) map[string]string {
		return map[string]string{"IDLEGRID_ADDR": rs.url, "IDLEGRID_KEY": key}
	}
	return &cliMarket{admin: as(rs.adminKey), renter: as(renterKey), provider: as(providerKey), renterID: ren.ID,
		price: lease.PriceMicrosPerGPUHour, node: node}
}

func TestMoneyCommands(t *testing.T) {
	admin, renter, provider, renterID, price := moneyMarket(t)
	charge := idlegrid.CostOf(price, 30) // the 30 GPU-s of the receipt at the locked price
	earned := charge - charge/10
	funds := 10*idlegrid.MicrosPerUnit - charge

	t.Run("RenterAccount", func(t *testing.T) {
		out := must(t, renter, "account")
		want := regexp.MustCompile(`^renter account acct_\w+ \(ren\)\n\nAVAILABLE +HELD +SPENT THIS MONTH +SPENT IN ALL\n` +
			regexp.QuoteMeta(funds.String()) + ` +\$0\.000000 +` + regexp.QuoteMeta(charge.String()) + ` +` + regexp.QuoteMeta(charge.String()) + `\n$`)
		if !want.MatchString(out) {
			t.Errorf("idlegrid account printed:\n%s", out)
		}
	})
	t.Run("Statement", func(t *testing.T) {
		month := time.Now().UTC().Format("2006-01")
		csv := must(t, renter, "account", "statement", "--month", month, "--csv")
		rows := strings.Split(strings.TrimSpace(csv), "\n")
		if len(rows) != 3 || rows[0] != "month,job_id,job_name,leases,gpu_seconds,gpu_hours,price_per_gpu_hour,total,model,requests,penalty,refund,dispute_id,offence,lease_id" ||
			!strings.HasSuffix(rows[1], ",sweep,1,30,0.008333,"+units(price)+","+units(charge)+",,,,,,,") ||
			!strings.HasSuffix(rows[2], ",total,,1,30,0.008333,,"+units(charge)+",,0,0.000000,0.000000,,,") {
			t.Errorf("CSV statement:\n%s", csv)
		}
		var s idlegrid.Statement
		mustJSON(t, provider, &s, "account", "statement")
		if len(s.Lines) != 1 || s.Lines[0].NodeName != "rig" || s.Total.EarningsMicros != earned || s.Total.FeesMicros != charge/10 {
			t.Errorf("provider statement %+v, want one node earning %s", s, earned)
		}
		if table := must(t, provider, "account", "statement"); !strings.Contains(table, "NODE") || !strings.Contains(table, "rig") {
			t.Errorf("provider statement table:\n%s", table)
		}
		if r := run(t, renter, "account", "statement", "--month", "November"); r.code != 2 {
			t.Errorf("a bad --month: %s, want a usage error", r)
		}
	})
	t.Run("Limits", func(t *testing.T) {
		if out := must(t, admin, "account", "limit", renterID, "5"); !strings.Contains(out, "account "+renterID+" may spend $5.000000 a month") {
			t.Errorf("account limit printed %q", out)
		}
		var k createdKey
		mustJSON(t, renter, &k, "key", "create", "--name", "ci", "--spend-limit", "2")
		if k.Limit == nil || k.Limit.LimitMicros != 2*idlegrid.MicrosPerUnit || k.Limit.KeyID != k.Key.ID {
			t.Fatalf("key create --spend-limit = %+v", k)
		}
		if ls := must(t, renter, "key", "ls"); !strings.Contains(ls, "$2.000000 ($0.000000 used)") {
			t.Errorf("key ls:\n%s", ls)
		}
		var listed []struct {
			ID         string
			SpendLimit *idlegrid.SpendLimitStatus `json:"spend_limit"`
		}
		mustJSON(t, renter, &listed, "key", "ls")
		for _, l := range listed {
			if limited := l.SpendLimit != nil && l.SpendLimit.LimitMicros == 2*idlegrid.MicrosPerUnit; limited != (l.ID == k.Key.ID) {
				t.Errorf("key ls --json: key %s has spend_limit %+v; want $2 on %s alone", l.ID, l.SpendLimit, k.Key.ID)
			}
		}
		if out := must(t, renter, "account"); !strings.Contains(out, "Spend limits in ") || !strings.Contains(out, k.Key.ID) {
			t.Errorf("idlegrid account shows no limits:\n%s", out)
		}
		if out := must(t, renter, "key", "limit", k.Key.ID, "none"); out != "lifted the spend limit of API key "+k.Key.ID+"\n" {
			t.Errorf("key limit none printed %q", out)
		}
		if r := run(t, renter, "account", "limit", renterID, "1"); r.code != 1 || !strings.Contains(r.err, "forbidden") && !strings.Contains(r.err, "may not") {
			t.Errorf("a renter limiting its own account: %s", r)
		}
		must(t, admin, "account", "limit", renterID, "none")
		if out := must(t, renter, "account", "notices"); out != "no notices to list yet\n" {
			t.Errorf("notices:\n%s", out)
		}
	})
	t.Run("Payouts", func(t *testing.T) {
		out := must(t, provider, "account")
		if !strings.Contains(out, "request a payout with: idlegrid payout request "+earned.String()[1:]) {
			t.Fatalf("provider account:\n%s", out)
		}
		if r := run(t, provider, "payout", "request", "1000"); r.code != 1 || !strings.Contains(r.err, "payable earnings too low") {
			t.Errorf("asking for too much: %s", r)
		}
		out = must(t, provider, "payout", "request", earned.String()[1:])
		m := regexp.MustCompile(`^requested payout (payout_\w+) of \$[0-9.]+ \(idempotency key (cli-payout_\w+)\); it is requested\n$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("payout request printed %q", out)
		}
		again := must(t, provider, "payout", "request", earned.String()[1:], "--idempotency-key", m[2])
		if !strings.Contains(again, m[1]) {
			t.Errorf("a retry with the printed key made another payout: %q", again)
		}
		var ps []*idlegrid.Payout
		mustJSON(t, provider, &ps, "payout", "ls")
		if len(ps) != 1 || ps[0].State != idlegrid.PayoutRequested {
			t.Fatalf("payout ls = %+v", ps)
		}
		if r := run(t, provider, "payout", "settle", m[1]); r.code != 1 {
			t.Errorf("a provider settling: %s", r)
		}
		if r := run(t, admin, "payout", "reject", m[1]); r.code != 2 {
			t.Errorf("reject without --reason: %s", r)
		}
		if out := must(t, admin, "payout", "settle", m[1], "--reference", "wire 7"); !strings.HasPrefix(out, "settled payout "+m[1]) {
			t.Errorf("settle printed %q", out)
		}
		var v accountView
		mustJSON(t, provider, &v, "account")
		if v.Balance.PaidOut != earned || v.Balance.Payable != 0 || len(v.Payouts) != 1 || v.Payouts[0].Reason != "wire 7" {
			t.Errorf("provider after the payout: %+v %+v", v.Balance, v.Payouts)
		}
		if ls := must(t, admin, "payout", "ls", "--state", "settled"); !strings.Contains(ls, m[1]) {
			t.Errorf("admin payout ls:\n%s", ls)
		}
		// A full page ends with the command for the next, which is empty.
		next := "idlegrid payout ls --state settled --provider " + v.Payouts[0].ProviderID + " --limit 1 --before " + m[1]
		if ls := must(t, admin, "payout", "ls", "--state", "settled", "--provider", v.Payouts[0].ProviderID, "--limit", "1"); !strings.HasSuffix(ls, "more may follow: "+next+"\n") {
			t.Errorf("a full page of payouts:\n%s", ls)
		}
		if ls, want := must(t, admin, strings.Fields(next)[1:]...), "no more payouts before "+m[1]+" --provider "+v.Payouts[0].ProviderID+" --state settled\n"; ls != want {
			t.Errorf("the page after the only payout:\n%s\nwant %q", ls, want)
		}
		if r := run(t, admin, "payout", "ls", "--before", "payout_missing"); r.code != 2 || !strings.Contains(r.err, "--before: ") {
			t.Errorf("a page after no payout: %s", r)
		}
		// Oldest first, a full page goes on --after its last payout.
		next = "idlegrid payout ls --oldest --state settled --limit 1 --after " + m[1]
		if ls := must(t, admin, "payout", "ls", "--oldest", "--state", "settled", "--limit", "1"); !strings.HasSuffix(ls, "more may follow: "+next+"\n") {
			t.Errorf("a full page of payouts, oldest first:\n%s", ls)
		}
		if ls, want := must(t, admin, strings.Fields(next)[1:]...), "no more payouts after "+m[1]+" --state settled\n"; ls != want {
			t.Errorf("the page after the only payout, oldest first:\n%s\nwant %q", ls, want)
		}
		for _, args := range [][]string{{"--after", m[1]}, {"--oldest", "--before", m[1]}, {"--oldest", "--after", "payout_missing"}} {
			if r := run(t, admin, append([]string{"payout", "ls"}, args...)...); r.code != 2 || !strings.Contains(r.err, "--"+strings.TrimPrefix(args[len(args)-2], "--")) {
				t.Errorf("payout ls %s: %s", strings.Join(args, " "), r)
			}
		}
	})
}

// A statement's inference totals print as rows of their own, and the
// total row counts their requests.
func TestPrintStatement_inference(t *testing.T) {
	s := &idlegrid.Statement{AccountID: "acct_p", Role: idlegrid.RoleProvider, Month: "2026-11",
		Lines:     []idlegrid.StatementLine{{NodeID: "node_a", NodeName: "rig", Leases: 1, GPUHours: "1.000000", ChargedMicros: 1_000_000, FeesMicros: 100_000, EarningsMicros: 900_000}},
		Inference: []idlegrid.InferenceTotal{{NodeID: "node_a", NodeName: "rig", Model: "llama-8b", Requests: 12, ChargedMicros: 40_000, FeesMicros: 4_000, EarningsMicros: 36_000}},
		Total:     idlegrid.StatementLine{Leases: 1, Requests: 12, GPUHours: "1.000000", ChargedMicros: 1_040_000, FeesMicros: 104_000, EarningsMicros: 936_000}}
	var out bytes.Buffer
	if err := printStatement(&env{Stdio: Stdio{Out: &out, Err: &bytes.Buffer{}}}, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"llama-8b", "$0.036000", "$0.936000", "REQUESTS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed:\n%s\nwant it to show %s", out.String(), want)
		}
	}
	// A renter's shows what a million tokens cost on average.
	s.Role, s.Inference[0].InputTokens, s.Inference[0].OutputTokens = idlegrid.RoleRenter, 3000, 1000
	out.Reset()
	if err := printStatement(&env{Stdio: Stdio{Out: &out, Err: &bytes.Buffer{}}}, s); err != nil {
		t.Fatal(err)
	}
	if want := "$10.000000/M tokens"; !strings.Contains(out.String(), want) {
		t.Errorf("printed:\n%s\nwant it to show %s", out.String(), want)
	}
}

// TestAccountTransfers_pages: a full page of account transfers ends with
// the command for the next, which lists the transfers after it; a cursor
// that is not on the account is refused, naming --before's field.
func TestAccountTransfers_pages(t *testing.T) {
	admin, renter, provider, renterID, _ := moneyMarket(t)
	for _, amount := range []string{"1.00", "2.00"} {
		must(t, admin, "account", "topup", renterID, amount)
	}
	var all []idlegrid.Transfer
	mustJSON(t, renter, &all, "account", "transfers")
	if len(all) < 4 { // three top-ups and the job's hold
		t.Fatalf("the renter's transfers: %+v, want at least four", all)
	}
	out := must(t, admin, "account", "transfers", renterID, "--limit", "2")
	next := regexp.MustCompile(`(?m)^more may follow: idlegrid account transfers ` + renterID + ` --limit 2 --before (\S+)$`).FindStringSubmatch(out)
	if next == nil || next[1] != all[1].ID || !strings.Contains(out, all[0].ID) || strings.Contains(out, all[2].ID) {
		t.Fatalf("account transfers --limit 2 of %d: %s\nwant %s and %s, then the next page's command", len(all), out, all[0].ID, all[1].ID)
	}
	var page []idlegrid.Transfer
	mustJSON(t, renter, &page, "account", "transfers", "--limit", "2", "--before", next[1])
	if len(page) != 2 || page[0].ID != all[2].ID || page[1].ID != all[3].ID {
		t.Errorf("the next page: %+v, want %s and %s", page, all[2].ID, all[3].ID)
	}
	last := all[len(all)-1].ID
	if out := must(t, renter, "account", "transfers", "--before", last); out != "no more transfers before "+last+"\n" {
		t.Errorf("the page after the last transfer: %q, want it said that no more follow", out)
	}
	// The renter's transfer is no cursor for the provider's own.
	if r := run(t, provider, "account", "transfers", "--before", all[0].ID); r.code == 0 || !strings.Contains(r.err, "before: no transfer "+all[0].ID+" on account") {
		t.Errorf("account transfers --before another account's transfer: %s", r)
	}
}

// TestAccountList_pages: account ls lists by role, a page at a time, a
// full page ending with the command for the next; an admin's account
// show of another account finds it by its ID.
func TestAccountList_pages(t *testing.T) {
	admin, renter, _, renterID, _ := moneyMarket(t)
	var all []idlegrid.Account
	mustJSON(t, admin, &all, "account", "ls")
	if len(all) < 3 {
		t.Fatalf("account ls: %+v, want the admin, the renter and the provider", all)
	}
	out := must(t, admin, "account", "ls", "--limit", "1")
	want := "more may follow: idlegrid account ls --limit 1 --after " + all[0].ID + "\n"
	if !strings.HasSuffix(out, want) || strings.Contains(out, all[1].ID) {
		t.Fatalf("account ls --limit 1:\n%s\nwant %s alone, then %q", out, all[0].ID, want)
	}
	var page []idlegrid.Account
	mustJSON(t, admin, &page, "account", "ls", "--limit", "1", "--after", all[0].ID)
	if len(page) != 1 || page[0].ID != all[1].ID {
		t.Errorf("the next page: %+v, want %s", page, all[1].ID)
	}
	var renters []idlegrid.Account
	mustJSON(t, admin, &renters, "account", "ls", "--role", "renter")
	if len(renters) != 1 || renters[0].ID != renterID {
		t.Errorf("account ls --role renter: %+v, want %s alone", renters, renterID)
	}
	if r := run(t, admin, "account", "ls", "--role", "king"); r.code != 2 || !strings.Contains(r.err, "--role") {
		t.Errorf("account ls --role king: %s, want a usage error naming --role", r)
	}
	if r := run(t, renter, "account", "ls"); r.code != 1 {
		t.Errorf("a renter listing accounts: %s", r)
	}
	if out := must(t, admin, "account", "show", renterID); !strings.Contains(out, "renter account "+renterID) {
		t.Errorf("an admin's account show of the renter:\n%s", out)
	}
	if r := run(t, renter, "account", "show", all[0].ID); r.code != 1 || !strings.Contains(r.err, "not found") {
		t.Errorf("a renter's account show of another account: %s", r)
	}
}

// TestMoneyCommands_reusedIdempotencyKey: a top-up or payout request that
// reuses an idempotency key for another amount is refused, and the hint
// says to give another key, not to look at a state that is not at fault.
func TestMoneyCommands_reusedIdempotencyKey(t *testing.T) {
	admin, _, provider, renterID, _ := moneyMarket(t)
	must(t, admin, "account", "topup", renterID, "1", "--idempotency-key", "invoice-7")
	must(t, provider, "payout", "request", "0.000001", "--idempotency-key", "p-7")
	for _, args := range [][]string{
		{"account", "topup", renterID, "2", "--idempotency-key", "invoice-7"},
		{"payout", "request", "0.000002", "--idempotency-key", "p-7"},
	} {
		who := admin
		if args[0] == "payout" {
			who = provider
		}
		r := run(t, who, args...)
		if r.code != 1 || !strings.Contains(r.err, "was used before") || !strings.Contains(r.err, "give another --idempotency-key") ||
			strings.Contains(r.err, "not in a state") {
			t.Errorf("%s: %s\nwant a conflict that says to give another --idempotency-key", strings.Join(args, " "), r)
		}
	}
}
