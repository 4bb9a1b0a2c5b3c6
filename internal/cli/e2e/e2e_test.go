package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/pgtest"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// feeBPS is the platform fee the server under test takes: 10%.
const feeBPS = 1000

func TestMarket_SQLite(t *testing.T) {
	t.Parallel()
	testMarket(t, filepath.Join(t.TempDir(), "idlegrid.db"))
}

func TestMarket_Postgres(t *testing.T) {
	t.Parallel()
	testMarket(t, pgtest.NewDSN(t))
}

// testMarket runs a server and two agents as real processes on the store
// named by dsn, and drives a job from "idlegrid job submit" to a charged
// completion, checking every side of the money.
func testMarket(t *testing.T, dsn string) {
	dir := t.TempDir()
	m := startMarket(t, dsn, dir)

	// A provider with two machines: a gaming PC and a workstation.
	var provider createdAccount
	cliJSON(t, m.admin, &provider, "account", "create", "--name", "acme-gpus", "--role", "provider")
	providerEnv := m.as(provider.Secret)
	var token struct {
		Token  idlegrid.JoinToken `json:"token"`
		Secret string             `json:"secret"`
	}
	cliJSON(t, providerEnv, &token, "token", "create", "--name", "e2e", "--max-uses", "2")
	startAgent(t, m, "gamer", token.Secret, "2xRTX4090", `
region: us-west
residency: US
ask:
  floor: {gold: "0.60", silver: "0.40", bronze: "0.30"}
fake_speed: 4
`)
	startAgent(t, m, "studio", token.Secret, "1xL40S", `
region: eu-west
residency: EU
schedule:
  mode: windows
  time_zone: Europe/Berlin
  weekly:
    - {days: [mon, tue, wed, thu, fri, sat, sun], start: "00:00", end: "00:00"}
ask:
  floor: {silver: "0.80"}
  allowed_kinds: [training, eval]
fake_speed: 4
`)
	var nodes []*idlegrid.Node
	eventually(t, "both nodes online", func() error {
		cliJSON(t, providerEnv, &nodes, "node", "ls")
		online := 0
		for _, n := range nodes {
			if n.State == idlegrid.NodeOnline {
				online++
			}
		}
		if online != 2 {
			return fmt.Errorf("%d of %d nodes online", online, len(nodes))
		}
		return nil
	})
	gamer := nodeNamed(t, nodes, "gamer")

	// A renter with $100.
	var renter createdAccount
	cliJSON(t, m.admin, &renter, "account", "create", "--name", "acme-research", "--role", "renter")
	renterEnv := m.as(renter.Secret)
	const funds = 100 * idlegrid.MicrosPerUnit
	if out := cli(t, m.admin, "account", "topup", renter.Account.ID, "100", "--idempotency-key", "e2e-topup"); !strings.Contains(out, "topped up "+renter.Account.ID+" by $100.000000") {
		t.Fatalf("topup printed:\n%s", out)
	}
	cli(t, m.admin, "account", "topup", renter.Account.ID, "100", "--idempotency-key", "e2e-topup") // a retry adds nothing

	// The renter submits a job file; only the gaming PC has RTX 4090s.
	jobFile := filepath.Join(dir, "job.yaml")
	mustWrite(t, jobFile, `
name: e2e-eval
kind: eval
image: ghcr.io/acme/evals:1.0
command: [python, run_evals.py]
env: {SUITE: smoke}
gpus: 1
gpu_models: [RTX4090]
tier: silver
max_price: "2.50"
duration: 20s
`)
	var job idlegrid.Job
	cliJSON(t, renterEnv, &job, "job", "submit", "-f", jobFile)
	if job.State != idlegrid.JobQueued || job.MaxPriceMicrosPerGPUHour != 2_500_000 || job.DurationSeconds != 20 {
		t.Fatalf("submitted job = %s %s cap %d for %ds; want queued, cap 2500000 for 20s", job.ID, job.State, job.MaxPriceMicrosPerGPUHour, job.DurationSeconds)
	}
	follow := startProc(t, "job logs -f", renterEnv, "job", "logs", job.ID, "-f")
	watch := startProc(t, "job watch", renterEnv, "job", "watch", job.ID, "--every", "500ms")
	eventually(t, "job succeeds", func() error {
		cliJSON(t, renterEnv, &job, "job", "get", job.ID)
		switch {
		case job.State == idlegrid.JobSucceeded:
			return nil
		case job.State.Terminal():
			t.Fatalf("job ended %s: %s", job.State, job.Reason)
		}
		return fmt.Errorf("job is %s (%s)", job.State, job.Reason)
	})

	// One lease, on the gaming PC, charged for the GPU-seconds its node
	// signed receipts for (never more than the server's clock saw), at the
	// price locked at placement.
	var leases []*idlegrid.Lease
	cliJSON(t, renterEnv, &leases, "job", "leases", job.ID)
	if len(leases) != 1 {
		t.Fatalf("job has %d leases, want 1", len(leases))
	}
	l := leases[0]
	if l.State != idlegrid.LeaseSucceeded || l.NodeID != gamer.ID || len(l.GPUUUIDs) != 1 {
		t.Fatalf("lease = %s on %s with %d GPUs; want succeeded on %s (gamer) with 1", l.State, l.NodeID, len(l.GPUUUIDs), gamer.ID)
	}
	if l.PriceMicrosPerGPUHour < 400_000 || l.PriceMicrosPerGPUHour > job.MaxPriceMicrosPerGPUHour {
		t.Errorf("locked price %s is outside [floor $0.40, cap %s]", l.PriceMicrosPerGPUHour, job.MaxPriceMicrosPerGPUHour)
	}
	var receipts struct {
		GPUSeconds int64 `json:"gpu_seconds"`
		Verified   bool  `json:"verified"`
		Receipts   []any `json:"receipts"`
	}
	cliJSON(t, renterEnv, &receipts, "lease", "receipts", l.ID)
	if !receipts.Verified || len(receipts.Receipts) == 0 {
		t.Fatalf("lease receipts: %d receipts, verified %v; want the node's receipts, verified", len(receipts.Receipts), receipts.Verified)
	}
	charge, used := l.ChargedMicros, min(receipts.GPUSeconds, l.GPUSeconds(*l.EndedAt))
	if want := idlegrid.CostOf(l.PriceMicrosPerGPUHour, used); charge != want || charge <= 0 {
		t.Fatalf("lease charged %s, want %s (%d GPU-s at %s; receipts %d GPU-s) and more than zero", charge, want, used, l.PriceMicrosPerGPUHour, receipts.GPUSeconds)
	}
	if job.ChargedMicros != charge {
		t.Errorf("job charged %s, lease charged %s", job.ChargedMicros, charge)
	}

	// Every state change is recorded with a reason.
	var got struct {
		idlegrid.Lease
		Events []*idlegrid.LeaseEvent `json:"events"`
	}
	cliJSON(t, renterEnv, &got, "lease", "get", l.ID)
	var path []string
	for _, ev := range got.Events {
		path = append(path, string(ev.To))
	}
	if strings.Join(path, ">") != "assigned>running>succeeded" {
		t.Errorf("lease events go %s, want assigned>running>succeeded", strings.Join(path, ">"))
	}
	if text := cli(t, renterEnv, "lease", "get", l.ID); !regexp.MustCompile(`(?s)State +succeeded\n.*\nEvents:\n.*running.*succeeded`).MatchString(text) {
		t.Errorf("lease get printed:\n%s", text)
	}
	logs := cli(t, renterEnv, "job", "logs", job.ID)
	if !strings.Contains(logs, "step") {
		t.Errorf("job logs have no training steps:\n%s", logs)
	}
	follow.waitExit(t, "with the lease")
	if follow.err != nil {
		t.Errorf("job logs -f exited with %v", follow.err)
	}
	// job watch followed it from the queue to the end, and exited 0.
	watch.waitExit(t, "with the job")
	// It names the node as its owner does; the renter may read what the
	// market shows of it.
	placedOn := fmt.Sprintf("placed on gamer (%s, 2xRTX4090, %s): 1 GPU(s) at %s/GPU-h, silver", gamer.ID, gamer.Region, l.PriceMicrosPerGPUHour)
	for _, want := range []string{placedOn, "started on gamer", "succeeded; charged " + charge.String() + " in all"} {
		if watch.err != nil || !strings.Contains(watch.out.String(), want) {
			t.Errorf("job watch exited with %v, printed:\n%s\nwant %q", watch.err, watch.out.String(), want)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !strings.Contains(follow.out.String(), line+"\n") {
			t.Errorf("job logs -f did not print %q; it printed:\n%s", line, follow.out.String())
			break
		}
	}

	// The money: the renter paid exactly the charge, the provider got the
	// charge less the fee, the platform the fee.
	fee := charge * feeBPS / 10000
	var rb, pb idlegrid.Balance
	cliJSON(t, renterEnv, &rb, "account", "balance")
	if rb.Available != funds-charge || rb.Held != 0 || rb.Spent != charge {
		t.Errorf("renter balance = available %s held %s spent %s; want %s, $0, %s", rb.Available, rb.Held, rb.Spent, funds-charge, charge)
	}
	cliJSON(t, providerEnv, &pb, "account", "balance")
	if pb.Pending != charge-fee {
		t.Errorf("provider earned %s pending, want %s (charge %s less fee %s)", pb.Pending, charge-fee, charge, fee)
	}
	sum, err := client.New(m.url, m.adminKey).Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.SpentMicros != charge || sum.EarnedMicros != charge-fee || sum.FeesMicros != fee || sum.HeldMicros != 0 {
		t.Errorf("summary: spent %s earned %s fees %s held %s; want %s, %s, %s, $0", sum.SpentMicros, sum.EarnedMicros, sum.FeesMicros, sum.HeldMicros, charge, charge-fee, fee)
	}
	var transfers []*idlegrid.Transfer
	cliJSON(t, m.admin, &transfers, "account", "transfers", renter.Account.ID)
	kinds := map[idlegrid.TransferKind]int{}
	for _, tr := range transfers {
		kinds[tr.Kind]++
		if err := tr.Validate(); err != nil {
			t.Errorf("transfer %s does not balance: %v", tr.ID, err)
		}
	}
	if kinds[idlegrid.TransferTopUp] != 1 || kinds[idlegrid.TransferHold] != 1 || kinds[idlegrid.TransferSettle] != 1 {
		t.Errorf("renter's transfers by kind = %v, want one top-up, one hold, one settle", kinds)
	}

	// Everything stops cleanly on Ctrl-C, and the ledger sums to zero.
	for _, p := range m.procs {
		if err := p.stop(t); err != nil {
			t.Errorf("%s exited with %v after SIGINT, want 0\n%s", p.name, err, p.out.String())
		}
	}
	checkLedger(t, dsn, renter.Account.ID, funds-charge)
}

// market is a running server and the processes around it.
type market struct {
	dir      string
	url      string
	adminKey string
	admin    []string // the environment of the admin's CLI
	procs    []*proc  // agents first, then the server, in the order to stop them
}

func (m *market) as(key string) []string {
	return []string{"IDLEGRID_ADDR=" + m.url, "IDLEGRID_KEY=" + key}
}

// createdAccount is what "account create --json" prints.
type createdAccount struct {
	Account idlegrid.Account `json:"account"`
	Key     idlegrid.APIKey  `json:"key"`
	Secret  string           `json:"secret"`
}

var listening = regexp.MustCompile(`idlegrid server listening on (http://127\.0\.0\.1:\d+)`)

func startMarket(t *testing.T, dsn, dir string) *market {
	keyFile := filepath.Join(dir, "admin.key")
	srv := startProc(t, "server", nil, "server", "--listen", "127.0.0.1:0", "--db", dsn,
		"--fee-bps", fmt.Sprint(feeBPS), "--bootstrap-admin-key-file", keyFile, "--meter-journal", filepath.Join(dir, "meter-journal"))
	m := &market{dir: dir, url: srv.waitForLine(t, listening), procs: []*proc{srv}}
	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", keyFile, fi.Mode().Perm())
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	m.adminKey = strings.TrimSpace(string(b))
	m.admin = m.as(m.adminKey)
	var me []*idlegrid.Account
	cliJSON(t, m.admin, &me, "account", "ls")
	if len(me) != 1 || me[0].Role != idlegrid.RoleAdmin {
		t.Fatalf("a fresh server has accounts %+v, want one admin", me)
	}
	return m
}

// startAgent writes an agent config and runs "idlegrid agent" with it, the
// server, the token, the data dir and the GPUs given as flags.
func startAgent(t *testing.T, m *market, name, token, gpus, config string) {
	cfgPath := filepath.Join(m.dir, name+".yaml")
	mustWrite(t, cfgPath, "name: "+name+"\n"+strings.TrimLeft(config, "\n"))
	a := startProc(t, "agent "+name, nil, "agent", "--config", cfgPath, "--server", m.url,
		"--join-token", token, "--data", filepath.Join(m.dir, name), "--fake-gpus", gpus)
	m.procs = append([]*proc{a}, m.procs...)
}

func nodeNamed(t *testing.T, nodes []*idlegrid.Node, name string) *idlegrid.Node {
	t.Helper()
	for _, n := range nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no node named %s among %d", name, len(nodes))
	return nil
}

// checkLedger opens the store the server used, now that it has stopped,
// and checks that the ledger sums to zero and the renter's balance stands.
func checkLedger(t *testing.T, dsn, renterID string, wantAvailable idlegrid.Micros) {
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if sum, err := db.LedgerSum(ctx); err != nil || sum != 0 {
		t.Errorf("ledger sums to %s (%v), want $0", sum, err)
	}
	if b, err := db.Balance(ctx, renterID); err != nil || b.Available != wantAvailable {
		t.Errorf("renter available in the store = %v (%v), want %s", b, err, wantAvailable)
	}
}

func mustWrite(tb testing.TB, path, data string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(strings.TrimLeft(data, "\n")), 0o600); err != nil {
		tb.Fatal(err)
	}
}
