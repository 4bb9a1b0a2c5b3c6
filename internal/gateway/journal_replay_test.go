package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gateway"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/metricstest"
)

// TestGateway_replayChargesWhatIsLeft: a charge left in the journal that
// comes to more than its renter has when the next start replays it takes
// what is left, as the meter does while the gateway runs, rather than
// nothing: the provider served the request.
func TestGateway_replayChargesWhatIsLeft(t *testing.T) {
	m := mustChargeWhileDown(t, nil)
	f := m.f
	ctx := context.Background()
	if err := f.GW.Close(); err != nil { // the charge stays in the journal
		t.Fatal(err)
	}
	const left = 100 // micros, less than the charge of 170
	spend := &idlegrid.Transfer{IdempotencyKey: "spent-meanwhile", Kind: idlegrid.TransferHold, CreatedAt: time.Now(), Entries: []idlegrid.Entry{
		{Account: idlegrid.RenterAvailable(f.RenterID), Amount: -(startFunds - left)},
		{Account: idlegrid.RenterHeld(f.RenterID), Amount: startFunds - left},
	}}
	if _, err := f.Store.PostTransfer(ctx, spend); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewPedanticRegistry()
	g, err := gateway.New(gateway.Config{Store: f.Store, Nodes: noNodes{}, Authenticate: f.Server.AuthenticateKey,
		StatusCode: httpapi.StatusCode, FeeBasisPoints: 1000, Logger: f.log, Journal: m.dir, Metrics: reg})
	if err != nil {
		t.Fatalf("gateway.New on the journal: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	wantBalances(t, f, m.nodeID, 0, left-left/10)
	us, err := f.Store.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: f.RenterID})
	if err != nil || len(us) != 1 || us[0].ChargeMicros != left || us[0].FeeMicros != left/10 {
		t.Errorf("usage records = %+v (%v), want one charged %d with a fee of %d", us, err, left, left/10)
	}
	if n := metricstest.Value(t, reg, "idlegrid_inference_charges_failed_total", nil); n != 0 {
		t.Errorf("idlegrid_inference_charges_failed_total = %v, want 0: what was left was charged", n)
	}
}
