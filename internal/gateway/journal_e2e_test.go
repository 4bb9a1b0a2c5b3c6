package gateway_test

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gateway"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/metricstest"
)

// unreachableMeter is a store whose inference writes fail, as when the
// database cannot be reached, while down is set; with fault, that error.
type unreachableMeter struct {
	idlegrid.Store
	down  atomic.Bool
	fault error
}

func (s *unreachableMeter) RecordInference(ctx context.Context, cs []idlegrid.InferenceCharge) []error {
	if !s.down.Load() {
		return s.Store.RecordInference(ctx, cs)
	}
	errs := make([]error, len(cs))
	for i := range errs {
		errs[i] = cmp.Or(s.fault, errors.New("database unreachable"))
	}
	return errs
}

// noNodes reaches no agent: a gateway that only replays its journal.
type noNodes struct{}

func (noNodes) Dial(string) (http.RoundTripper, bool) { return nil, false }

// TestGateway_meterJournal checks that a charge the store could not take
// before the gateway stopped is not lost: its journal keeps it, and the
// next gateway on the same journal whose store takes it charges it, once,
// before it serves, however often its line is replayed.
func TestGateway_meterJournal(t *testing.T) {
	m := mustChargeWhileDown(t, nil)
	f, store, dir, node := m.f, m.store, m.dir, m.nodeID
	files, err := filepath.Glob(filepath.Join(dir, "meter-*.jsonl"))
	if err != nil || len(files) != 1 {
		t.Fatalf("journal files %v (%v), want the one that holds the charge", files, err)
	}
	line, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := f.GW.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(files[0]); err != nil {
		t.Fatalf("the journal's file is gone after Close, with its charge unwritten: %v", err)
	}

	reopen := func(s idlegrid.Store) {
		t.Helper()
		g, err := gateway.New(gateway.Config{Store: s, Nodes: noNodes{}, Authenticate: f.Server.AuthenticateKey,
			StatusCode: httpapi.StatusCode, FeeBasisPoints: 1000, Logger: f.log, Journal: dir})
		if err != nil {
			t.Fatalf("gateway.New on the journal: %v", err)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A start while the store still fails: the gateway opens, and the
	// file stays.
	reopen(store)
	wantBalances(t, f, node, startFunds, 0)
	if _, err := os.Stat(files[0]); err != nil {
		t.Fatalf("a start that could not write the journal's charges deleted its file: %v", err)
	}
	// The next start, with the store back: the charge is written before
	// the gateway serves.
	reopen(f.Store)
	wantBalances(t, f, node, startFunds-wantCharge, wantCharge-wantFee)
	if left, _ := filepath.Glob(filepath.Join(dir, "meter-*")); len(left) != 0 {
		t.Errorf("journal files %v left after the replay, want none", left)
	}

	// The same line again, as when a crash came between the store's commit
	// and the file's deletion: the store has the request, so no charge.
	if err := os.WriteFile(filepath.Join(dir, "meter-00000000000000000007.jsonl"), line, 0o600); err != nil {
		t.Fatal(err)
	}
	reopen(f.Store)
	wantBalances(t, f, node, startFunds-wantCharge, wantCharge-wantFee)
	us, err := f.Store.ListInferenceUsage(context.Background(), idlegrid.UsageFilter{AccountID: f.RenterID, Limit: 10})
	if err != nil || len(us) != 1 || us[0].NodeID != node || us[0].ChargeMicros != wantCharge {
		t.Fatalf("usage records %+v (%v), want the one request, charged %d", us, err, wantCharge)
	}
}

// startFunds is what the fixture's renter starts with.
const startFunds = 100 * idlegrid.MicrosPerUnit

// downMarket is a gateway whose store cannot take charges, after one
// request was answered and metered.
type downMarket struct {
	f      *fixture
	store  *unreachableMeter // down: set it false to let charges through
	nodeID string            // the node that answered
	dir    string            // the meter's journal
	reg    *prometheus.Registry
}

// mustChargeWhileDown answers a chat completion while the store cannot
// take its charge, and checks that nobody was charged.
func mustChargeWhileDown(t *testing.T, fault error) *downMarket {
	t.Helper()
	m := &downMarket{store: &unreachableMeter{fault: fault}, dir: t.TempDir(), reg: prometheus.NewPedanticRegistry()}
	m.store.down.Store(true)
	m.f = mustFixture(t, func(c *gateway.Config) {
		m.store.Store = c.Store
		c.Store, c.Journal, c.Metrics = m.store, m.dir, m.reg
	})
	up := mustMock(t, "alpha")
	m.nodeID = m.f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 4)).NodeID
	m.f.waitProviders(t, testModel, 1)
	c := m.f.sdk(m.f.RenterKey)
	if _, err := c.Chat.Completions.New(context.Background(), chatParams("Say hello.")); err != nil {
		t.Fatalf("chat: %v", err)
	}
	mustSync(t, m.f)
	wantBalances(t, m.f, m.nodeID, startFunds, 0)
	return m
}

// wantBalances checks the renter's available balance, the node's
// provider's pending earnings and that the ledger sums to zero.
func wantBalances(t *testing.T, f *fixture, nodeID string, renter, provider idlegrid.Micros) {
	t.Helper()
	ctx := context.Background()
	bal, err := f.Store.Balance(ctx, f.RenterID)
	if err != nil {
		t.Fatal(err)
	}
	prov, err := f.Store.Balance(ctx, providerOf(t, f, nodeID))
	if err != nil {
		t.Fatal(err)
	}
	if bal.Available != renter || prov.Pending != provider {
		t.Errorf("renter available %s, provider pending %s; want %s and %s", bal.Available, prov.Pending, renter, provider)
	}
	if sum, err := f.Store.LedgerSum(ctx); err != nil || sum != 0 {
		t.Errorf("the ledger sums to %d (%v), want 0", sum, err)
	}
}

// TestGateway_meterRetries checks that a charge the store could not take
// is written once the store is back, while the gateway runs: charged
// once, and its journal file gone at Close.
func TestGateway_meterRetries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault error
	}{
		{"unreachable", nil},
		{"busy", idlegrid.Errorf(idlegrid.EUNAVAILABLE, "database busy; try again")}, // as sqlstore says of a lock it waited out
	} {
		t.Run(tc.name, func(t *testing.T) { testMeterRetries(t, tc.fault) })
	}
}

func testMeterRetries(t *testing.T, fault error) {
	m := mustChargeWhileDown(t, fault)
	f, reg, node := m.f, m.reg, m.nodeID
	ctx := context.Background()
	if n := metricstest.Value(t, reg, "idlegrid_inference_charges_retrying", nil); n != 1 {
		t.Errorf("idlegrid_inference_charges_retrying = %v, want 1", n)
	}

	m.store.down.Store(false) // the meter tries again within meterRetry
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		bal, err := f.Store.Balance(ctx, f.RenterID)
		if err != nil {
			t.Fatal(err)
		}
		if bal.Available != startFunds || time.Now().After(deadline) {
			break
		}
	}
	wantBalances(t, f, node, startFunds-wantCharge, wantCharge-wantFee)
	mustSync(t, f) // the meter has counted what still waits
	if n := metricstest.Value(t, reg, "idlegrid_inference_charges_retrying", nil); n != 0 {
		t.Errorf("idlegrid_inference_charges_retrying = %v once written, want 0", n)
	}
	if n := metricstest.Value(t, reg, "idlegrid_inference_charges_failed_total", nil); n != 0 {
		t.Errorf("idlegrid_inference_charges_failed_total = %v, want 0: the charge was written", n)
	}
	if err := f.GW.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(m.dir, "meter-*")); len(left) != 0 {
		t.Errorf("journal files %v left after Close, with every charge written", left)
	}
}

// TestGateway_meterChargesWhatIsLeft: a charge that comes to more than
// its renter has when it is written (here the renter spent the rest
// meanwhile) takes what is left, rather than nothing: the provider served
// the request.
func TestGateway_meterChargesWhatIsLeft(t *testing.T) {
	m := mustChargeWhileDown(t, nil)
	f := m.f
	ctx := context.Background()
	const left = 100 // micros, less than the charge of 170
	spend := &idlegrid.Transfer{IdempotencyKey: "spent-meanwhile", Kind: idlegrid.TransferHold, CreatedAt: time.Now(), Entries: []idlegrid.Entry{
		{Account: idlegrid.RenterAvailable(f.RenterID), Amount: -(startFunds - left)},
		{Account: idlegrid.RenterHeld(f.RenterID), Amount: startFunds - left},
	}}
	if _, err := f.Store.PostTransfer(ctx, spend); err != nil {
		t.Fatal(err)
	}
	m.store.down.Store(false) // the meter tries again within meterRetry
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		bal, err := f.Store.Balance(ctx, f.RenterID)
		if err != nil {
			t.Fatal(err)
		}
		if bal.Available != left || time.Now().After(deadline) {
			break
		}
	}
	wantBalances(t, f, m.nodeID, 0, left-left/10)
	mustSync(t, f)
	if n := metricstest.Value(t, m.reg, "idlegrid_inference_charges_failed_total", nil); n != 0 {
		t.Errorf("idlegrid_inference_charges_failed_total = %v, want 0: what was left was charged", n)
	}
	us, err := f.Store.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: f.RenterID})
	if err != nil || len(us) != 1 || us[0].ChargeMicros != left || us[0].FeeMicros != left/10 {
		t.Errorf("usage records = %+v (%v), want one charged %d with a fee of %d", us, err, left, left/10)
	}
}
