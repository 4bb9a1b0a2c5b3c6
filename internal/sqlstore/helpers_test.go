package sqlstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/pgtest"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// t0 is the suite's "now": a fixed time with microseconds, so that a time
// that does not round-trip exactly shows.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)

// at returns t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

func ptr[T any](v T) *T { return &v }

var seq atomic.Int64

// id returns a readable identifier unique within the test binary,
// zero-padded so that IDs made later also sort later: the store breaks ties
// of equal times by ID.
func id(prefix string) string { return fmt.Sprintf("%s_%08d", prefix, seq.Add(1)) }

// mustOpen opens the store at dsn and closes it when the test ends.
func mustOpen(tb testing.TB, dsn string) *sqlstore.DB {
	tb.Helper()
	db, err := sqlstore.Open(context.Background(), dsn)
	if err != nil {
		tb.Fatalf("Open(%q): %v", dsn, err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// postgresCopies migrates a PostgreSQL database for t, skipping t when
// there is no server (pgtest), and returns a newDSN that gives each test a
// copy of it, so that the migrations run once, not once a test.
func postgresCopies(t *testing.T) func(t *testing.T) string {
	template := pgtest.NewDSN(t)
	db, err := sqlstore.Open(context.Background(), template)
	mustOK(t, err)
	mustOK(t, db.Close())
	return func(t *testing.T) string { return pgtest.NewDSNFrom(t, template) }
}

// wantCode fails tb unless err carries code.
func wantCode(tb testing.TB, err error, code string) {
	tb.Helper()
	if got := idlegrid.ErrorCode(err); got != code {
		tb.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

// wantField fails tb unless err is invalid input naming field.
func wantField(tb testing.TB, err error, field string) {
	tb.Helper()
	if e, ok := err.(*idlegrid.Error); !ok || e.Code != idlegrid.EINVALID || e.Field != field {
		tb.Fatalf("error = %v, want invalid %s", err, field)
	}
}

// mustOK fails tb on err.
func mustOK(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// checkLedger fails tb unless the ledger sums to zero and each balance row
// is the sum of its account's entries.
func checkLedger(tb testing.TB, db *sqlstore.DB) {
	tb.Helper()
	sum, err := db.LedgerSum(context.Background())
	if err != nil {
		tb.Fatalf("LedgerSum: %v", err)
	} else if sum != 0 {
		tb.Fatalf("LedgerSum = %d, want 0", sum)
	}
	if err := sqlstore.CheckLedgerSums(context.Background(), db); err != nil {
		tb.Fatal(err)
	}
}

func mustAccount(tb testing.TB, db *sqlstore.DB, role idlegrid.Role) *idlegrid.Account {
	tb.Helper()
	acctID := id("acct")
	a := &idlegrid.Account{ID: acctID, Name: string(role) + " " + acctID, Role: role, CreatedAt: t0} // names are unique by role
	mustOK(tb, db.CreateAccount(context.Background(), a))
	return a
}

func topUp(renterID string, amount idlegrid.Micros) *idlegrid.Transfer {
	return &idlegrid.Transfer{
		IdempotencyKey: id("topup"),
		Kind:           idlegrid.TransferTopUp,
		Entries: []idlegrid.Entry{
			{Account: idlegrid.WorldAccount, Amount: -amount},
			{Account: idlegrid.RenterAvailable(renterID), Amount: amount},
		},
		CreatedAt: t0,
	}
}

func mustTopUp(tb testing.TB, db *sqlstore.DB, renterID string, amount idlegrid.Micros) {
	tb.Helper()
	_, err := db.PostTransfer(context.Background(), topUp(renterID, amount))
	mustOK(tb, err)
	checkLedger(tb, db)
}

func offer(name string, gpus int) idlegrid.Offer {
	o := idlegrid.Offer{
		Name: name, CPUCores: 32, RAMMB: 256000, DiskGB: 2000, Region: "eu-west", Residency: "EU",
		Labels: map[string]string{"rack": "r1"},
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, TimeZone: "Europe/Paris",
			Weekly: []idlegrid.WeeklyWindow{{Days: []string{"sat", "sun"}, Start: "00:00", End: "00:00"}}},
		Ask: idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 1_000_000}},
	}
	for i := 0; i < gpus; i++ {
		o.GPUs = append(o.GPUs, idlegrid.GPU{UUID: fmt.Sprintf("GPU-%s-%d", name, i), Model: "H100-80GB", VRAMMB: 81920})
	}
	return o
}

// mustJoinToken creates a join token for provider and returns its hash.
func mustJoinToken(tb testing.TB, db *sqlstore.DB, providerID string, maxUses int) *idlegrid.JoinToken {
	tb.Helper()
	t := &idlegrid.JoinToken{ID: id("jt"), ProviderID: providerID, Name: "fleet", Prefix: "igj_ab",
		Hash: id("hash"), MaxUses: maxUses, ExpiresAt: at(24 * time.Hour), CreatedAt: t0}
	mustOK(tb, db.CreateJoinToken(context.Background(), t))
	return t
}

// mustNode joins a node with gpus GPUs under provider and brings it online.
func mustNode(tb testing.TB, db *sqlstore.DB, providerID string, gpus int) *idlegrid.Node {
	tb.Helper()
	ctx := context.Background()
	tok := mustJoinToken(tb, db, providerID, 0)
	nodeID := id("node")
	n := &idlegrid.Node{ID: nodeID, PublicKey: "key-" + nodeID, Offer: offer(nodeID, gpus),
		AgentVersion: "v1", CreatedAt: t0}
	mustOK(tb, db.JoinNode(ctx, tok.Hash, n))
	mustOK(tb, db.UpdateOffer(ctx, n.ID, n.Offer, "v1", t0))
	got, err := db.FindNode(ctx, n.ID)
	mustOK(tb, err)
	return got
}

func newJob(renterID string, nodes, gpus int) *idlegrid.Job {
	return &idlegrid.Job{
		ID: id("job"), RenterID: renterID, CreatedAt: t0, Reason: "waiting for a placement",
		JobSpec: idlegrid.JobSpec{
			Name: "train", Kind: idlegrid.KindTraining, Image: "ghcr.io/org/trainer:1.2",
			Command: []string{"python", "train.py"}, Env: map[string]string{"EPOCHS": "3"},
			GPUs: gpus, Nodes: nodes, GPUModels: []string{"H100-80GB"}, Tier: idlegrid.TierSilver,
			MaxPriceMicrosPerGPUHour: 3_000_000, DurationSeconds: 3600,
		},
	}
}

func mustJob(tb testing.TB, db *sqlstore.DB, renterID string, nodes, gpus int) *idlegrid.Job {
	tb.Helper()
	j := newJob(renterID, nodes, gpus)
	mustOK(tb, db.CreateJob(context.Background(), j))
	return j
}

// price is the clearing price the suite's placements lock: 2 units per
// GPU-hour; with an hour's limit a one-GPU lease holds 2 units.
const price = 2 * idlegrid.MicrosPerUnit

// lease returns a lease of j on n's GPUs at index gpus.
func lease(j *idlegrid.Job, n *idlegrid.Node, gpus ...int) *idlegrid.Lease {
	l := &idlegrid.Lease{ID: id("lease"), JobID: j.ID, NodeID: n.ID, Tier: j.Tier,
		PriceMicrosPerGPUHour: price, PriceNote: "second price", LimitSeconds: 3600, Reason: "placed"}
	for _, g := range gpus {
		l.GPUUUIDs = append(l.GPUUUIDs, n.GPUs[g].UUID)
	}
	l.HoldMicros = idlegrid.CostOf(price, l.LimitSeconds*int64(len(l.GPUUUIDs)))
	return l
}

// placement places j at attempt with leases, holding each lease's cost.
func placement(j *idlegrid.Job, attempt int, leases ...*idlegrid.Lease) *idlegrid.Placement {
	p := &idlegrid.Placement{JobID: j.ID, Attempt: attempt, Leases: leases, At: at(time.Minute)}
	for _, l := range leases {
		l.Attempt = attempt + 1
		p.Transfers = append(p.Transfers, &idlegrid.Transfer{
			IdempotencyKey: "hold:" + l.ID, Kind: idlegrid.TransferHold, LeaseID: l.ID,
			Entries: []idlegrid.Entry{
				{Account: idlegrid.RenterAvailable(j.RenterID), Amount: -l.HoldMicros},
				{Account: idlegrid.RenterHeld(j.RenterID), Amount: l.HoldMicros},
			},
		})
	}
	return p
}

func mustPlace(tb testing.TB, db *sqlstore.DB, p *idlegrid.Placement) {
	tb.Helper()
	mustOK(tb, db.PlaceJob(context.Background(), p))
	checkLedger(tb, db)
}

// settle is the transfer that ends lease l having charged charge: the
// provider gets 90%, the platform 10%, the rest of the hold goes back.
func settle(l *idlegrid.Lease, charge idlegrid.Micros) *idlegrid.Transfer {
	fee := charge / 10
	return &idlegrid.Transfer{
		IdempotencyKey: "settle:" + l.ID, Kind: idlegrid.TransferSettle, LeaseID: l.ID,
		Entries: []idlegrid.Entry{
			{Account: idlegrid.RenterHeld(l.RenterID), Amount: -l.HoldMicros},
			{Account: idlegrid.ProviderPending(l.ProviderID), Amount: charge - fee},
			{Account: idlegrid.PlatformFees, Amount: fee},
			{Account: idlegrid.RenterAvailable(l.RenterID), Amount: l.HoldMicros - charge},
		},
	}
}

// mustTransition applies a transition with its transfers.
func mustTransition(tb testing.TB, db *sqlstore.DB, t *idlegrid.LeaseTransition, ts ...*idlegrid.Transfer) {
	tb.Helper()
	mustOK(tb, db.TransitionLease(context.Background(), t, ts))
	checkLedger(tb, db)
}

// start moves l from assigned to running at at(2m).
func start(tb testing.TB, db *sqlstore.DB, l *idlegrid.Lease) {
	tb.Helper()
	mustTransition(tb, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseAssigned},
		To: idlegrid.LeaseRunning, Reason: "started", At: at(2 * time.Minute)})
}

// mustJobState fails tb unless the job is in state with a reason containing reason.
func mustJobState(tb testing.TB, db *sqlstore.DB, jobID string, state idlegrid.JobState, reason string) *idlegrid.Job {
	tb.Helper()
	j, err := db.FindJob(context.Background(), jobID)
	mustOK(tb, err)
	if j.State != state || !strings.Contains(j.Reason, reason) {
		tb.Fatalf("job is %s (%q), want %s (%q)", j.State, j.Reason, state, reason)
	}
	return j
}

func mustBalance(tb testing.TB, db *sqlstore.DB, accountID string) *idlegrid.Balance {
	tb.Helper()
	b, err := db.Balance(context.Background(), accountID)
	mustOK(tb, err)
	return b
}
