package agent_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/gpu"
	gpufake "github.com/idlegrid/idlegrid/internal/gpu/fake"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// startMetered runs an agent like startAgent, with GPUs whose telemetry
// busy sets first (nil: idle), and returns the node's public key.
func startMetered(tb testing.TB, cfg *agent.Config, srv agent.Server, busy func(det *gpufake.Detector, uuid string)) (*running, ed25519.PublicKey) {
	tb.Helper()
	key, err := nodekey.LoadOrCreate(cfg.KeyPath())
	if err != nil {
		tb.Fatal(err)
	}
	det, err := gpufake.Parse(cfg.FakeGPUs, nodekey.PublicString(key.Public().(ed25519.PublicKey)))
	if err != nil {
		tb.Fatal(err)
	}
	a, err := agent.New(agent.Options{
		Config: cfg, Server: srv, Detector: det, Runtime: &rtfake.Runtime{}, Key: key,
		Host:   &agent.Host{Name: "host", CPUCores: 8, RAMMB: 32768, DiskGB: 1000},
		Logger: slog.New(slog.NewTextHandler(testOutput(tb), &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		tb.Fatal(err)
	}
	devs, _ := det.Detect(context.Background())
	r := &running{a: a, done: make(chan error, 1)}
	for _, d := range devs {
		r.gpus = append(r.gpus, d.UUID)
	}
	if busy != nil {
		busy(det, r.gpus[0])
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- a.Run(ctx) }()
	return r, key.Public().(ed25519.PublicKey)
}

// busy makes a GPU look busy: 80% used, drawing 400 W.
func busy(det *gpufake.Detector, uuid string) {
	det.Update(uuid, func(d *gpu.Device) { d.UtilPct, d.PowerDrawW = 80, 400 })
}

// checkChain checks that rs are the lease's receipts 1, 2, 3…, each signed
// by pub, chained to the one before and starting where it ended, and
// returns their GPU-seconds.
func checkChain(tb testing.TB, leaseID string, pub ed25519.PublicKey, rs []idlegrid.Receipt) int64 {
	tb.Helper()
	var sum int64
	for i := range rs {
		r := &rs[i]
		if err := nodekey.VerifyReceipt(pub, r); err != nil {
			tb.Errorf("receipt %d: %v", r.Seq, err)
		}
		if err := r.Validate(); err != nil {
			tb.Errorf("receipt %d: %v", r.Seq, err)
		}
		if r.LeaseID != leaseID || r.Seq != int64(i+1) {
			tb.Errorf("receipt %d is %s #%d, want %s #%d", i+1, r.LeaseID, r.Seq, leaseID, i+1)
		}
		if i > 0 && (r.PrevHash != rs[i-1].Hash() || !r.Start.Equal(rs[i-1].End)) {
			tb.Errorf("receipt %d does not follow receipt %d", r.Seq, rs[i-1].Seq)
		}
		sum += r.GPUSeconds
	}
	return sum
}

func TestAgent_Receipts(t *testing.T) {
	t.Run("SignedAndChained", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r, pub := startMetered(t, testConfig(t), srv, busy)
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			r.assign(srv, "lease_a", job(150, nil))
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			// The final report came after the receipts: the fake refuses
			// receipts for a lease that has ended.
			rs := srv.receiptsFor("lease_a")
			if len(rs) != 3 {
				t.Fatalf("%d receipts for a 150 s lease, want 3 (60 s, 60 s and the last 30 s): %+v", len(rs), rs)
			}
			if sum := checkChain(t, "lease_a", pub, rs); sum != 150 {
				t.Errorf("the receipts claim %d GPU-seconds, want 150 (1 GPU for 150 s)", sum)
			}
			for i, want := range []struct {
				secs, gpuSeconds, wh int64
			}{{60, 60, 6}, {60, 60, 7}, {30, 30, 3}} { // 400 W: 6.67 Wh a minute, carried over
				got := rs[i]
				if got.Interval() != time.Duration(want.secs)*time.Second || got.GPUSeconds != want.gpuSeconds ||
					got.AvgUtilPct != 80 || got.EnergyWh != want.wh {
					t.Errorf("receipt %d = %v, %d GPU-s, %d%%, %d Wh; want %ds, %d GPU-s, 80%%, %d Wh",
						got.Seq, got.Interval(), got.GPUSeconds, got.AvgUtilPct, got.EnergyWh, want.secs, want.gpuSeconds, want.wh)
				}
			}
			r.stop(t)
		})
	})
	t.Run("FinalReceiptAtStop", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.ReceiptInterval = 40 * time.Second
			srv := &fakeServer{}
			r, pub := startMetered(t, cfg, srv, nil)
			r.assign(srv, "lease_a", job(3600, nil))
			waitFor(t, "the lease to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
			began := time.Now()
			time.Sleep(90 * time.Second)
			srv.requestStop("lease_a", "cancelled by the renter")
			waitFor(t, "the lease to be cancelled", leaseIn(srv, "lease_a", idlegrid.LeaseCancelled))
			ran := time.Since(began)
			rs := srv.receiptsFor("lease_a")
			if len(rs) != 3 {
				t.Fatalf("%d receipts, want 3: two of 40 s and the last up to the exit", len(rs))
			}
			sum := checkChain(t, "lease_a", pub, rs)
			if want := int64(ran / time.Second); sum < want-1 || sum > want {
				t.Errorf("the receipts claim %d GPU-seconds; the workload ran %v", sum, ran)
			}
			if last := rs[2]; rs[0].Interval() != 40*time.Second || last.End.Before(began.Add(90*time.Second)) {
				t.Errorf("receipts %v .. %v, want 40 s intervals and the last ending at the exit", rs[0].Interval(), last.End)
			}
			r.stop(t)
		})
	})
	t.Run("ResentAfterOutage", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r, pub := startMetered(t, testConfig(t), srv, nil)
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			down := errors.New("dial tcp 127.0.0.1:7070: connection refused")
			for range 9 { // about three minutes of backoff
				srv.fail("SendReceipts", down)
			}
			r.assign(srv, "lease_a", job(200, nil))
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			rs := srv.receiptsFor("lease_a")
			if len(rs) != 4 {
				t.Fatalf("%d receipts, want 4 (3 × 60 s and 20 s), every one kept through the outage", len(rs))
			}
			if sum := checkChain(t, "lease_a", pub, rs); sum != 200 {
				t.Errorf("the receipts claim %d GPU-seconds, want 200", sum)
			}
			if n := len(srv.callTimes("SendReceipts")); n < 10 {
				t.Errorf("%d sends, want the failed ones retried", n)
			}
			r.stop(t)
		})
	})
	t.Run("RefusedDroppedRestKept", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r, pub := startMetered(t, testConfig(t), srv, nil)
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			srv.fail("SendReceipts", idlegrid.Invalid("receipt.interval", "receipt 1 ends at a time that has not come yet"))
			r.assign(srv, "lease_a", job(90, nil))
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			// The first receipt was refused and dropped; the second goes
			// on from the server's last (none), so the rest of the lease
			// is still paid.
			rs := srv.receiptsFor("lease_a")
			if len(rs) != 1 {
				t.Fatalf("receipts = %+v, want the second, 60..90 s, kept as receipt 1", rs)
			}
			if sum := checkChain(t, "lease_a", pub, rs); sum != 30 {
				t.Errorf("the receipts claim %d GPU-seconds, want 30", sum)
			}
			r.stop(t)
		})
	})
	t.Run("RefusedOneOfABatch", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r, pub := startMetered(t, testConfig(t), srv, nil)
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			down := errors.New("dial tcp 127.0.0.1:7070: connection refused")
			for range 9 { // about three minutes of backoff: the receipts come in one batch
				srv.fail("SendReceipts", down)
			}
			var began time.Time
			srv.refuse = func(rc idlegrid.Receipt) error {
				if began.IsZero() {
					began = rc.Start // the first receipt starts the run
				}
				if rc.Start.Sub(began) == 60*time.Second {
					return idlegrid.Invalid("receipt.interval", "receipt %d: refused for this test", rc.Seq)
				}
				return nil
			}
			r.assign(srv, "lease_a", job(200, nil))
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			// Of 0..60, 60..120, 120..180 and 180..200 s, the second was
			// refused; the others are kept, chained anew where it was.
			rs := srv.receiptsFor("lease_a")
			if len(rs) != 3 {
				t.Fatalf("%d receipts, want 3 (all but the one refused): %+v", len(rs), rs)
			}
			for i := range rs {
				if err := nodekey.VerifyReceipt(pub, &rs[i]); err != nil || rs[i].Seq != int64(i+1) || (i > 0 && rs[i].PrevHash != rs[i-1].Hash()) {
					t.Errorf("receipt %d = %+v (%v), want #%d signed and chained", i, rs[i], err, i+1)
				}
			}
			if got := rs[1].Start.Sub(began); got != 120*time.Second {
				t.Errorf("receipt 2 starts %v into the run, want 120 s: the refused 60..120 s is left out", got)
			}
			var sum int64
			for _, rc := range rs {
				sum += rc.GPUSeconds
			}
			if sum != 140 {
				t.Errorf("the receipts claim %d GPU-seconds, want 140 (200 less the 60 refused)", sum)
			}
			r.stop(t)
		})
	})
	t.Run("StaleStateAfterRestart", func(t *testing.T) {
		// The previous agent sent receipts 1 and 2 and the server took
		// them, but its state file was last written after receipt 1 (the
		// write of receipt 2 failed) before it died. The workload runs on.
		synctest.Test(t, func(t *testing.T) {
			cfg, srv, rt := leftBehind(t, idlegrid.LeaseRunning, 3600)
			key, err := nodekey.LoadOrCreate(cfg.KeyPath())
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now().Add(-130 * time.Second)
			sent := []idlegrid.Receipt{
				{LeaseID: "lease_a", Seq: 1, Start: began, End: began.Add(time.Minute), GPUSeconds: 60, AvgUtilPct: 90},
				{LeaseID: "lease_a", Seq: 2, Start: began.Add(time.Minute), End: began.Add(2 * time.Minute), GPUSeconds: 60, AvgUtilPct: 90},
			}
			nodekey.SignReceipt(key, &sent[0])
			sent[1].PrevHash = sent[0].Hash()
			nodekey.SignReceipt(key, &sent[1])
			srv.receipts = map[string][]idlegrid.Receipt{"lease_a": sent}
			writeMeterState(t, cfg.DataDir, map[string]any{
				"lease_id": "lease_a", "gpus": rt.left[0].GPUs, "limit_seconds": 3600, "began": began,
				"cut": sent[0].End, "seq": 1, "prev_hash": sent[0].Hash(), "unsent": []idlegrid.Receipt{},
			})
			r := startAgent(t, cfg, srv, rt)
			waitFor(t, "a third receipt", func() bool { return len(srv.receiptsFor("lease_a")) >= 3 })
			rs := srv.receiptsFor("lease_a")
			checkChain(t, "lease_a", key.Public().(ed25519.PublicKey), rs)
			if rs[1].Hash() != sent[1].Hash() || !rs[2].Start.Equal(sent[1].End) {
				t.Errorf("receipts = %+v, want 1 and 2 as sent, then 3 from where 2 ended", rs)
			}
			r.stop(t)
		})
	})
	t.Run("OlderServer", func(t *testing.T) {
		// A server older than this agent has no GET .../receipts/last (404):
		// a workload taken back goes on with its chain as it was kept.
		synctest.Test(t, func(t *testing.T) {
			cfg, srv, rt := leftBehind(t, idlegrid.LeaseRunning, 3600)
			key, err := nodekey.LoadOrCreate(cfg.KeyPath())
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now().Add(-70 * time.Second)
			sent := idlegrid.Receipt{LeaseID: "lease_a", Seq: 1, Start: began, End: began.Add(time.Minute), GPUSeconds: 60}
			nodekey.SignReceipt(key, &sent)
			srv.receipts = map[string][]idlegrid.Receipt{"lease_a": {sent}}
			for range 10000 { // never, in the test's hour
				srv.fail("LastReceipt", idlegrid.Errorf(idlegrid.ENOTFOUND, "no route GET /v1/agent/leases/lease_a/receipts/last"))
			}
			writeMeterState(t, cfg.DataDir, map[string]any{
				"lease_id": "lease_a", "gpus": rt.left[0].GPUs, "limit_seconds": 3600, "began": began,
				"cut": sent.End, "seq": 1, "prev_hash": sent.Hash(), "unsent": []idlegrid.Receipt{},
			})
			r := startAgent(t, cfg, srv, rt)
			waitFor(t, "a second receipt", func() bool { return len(srv.receiptsFor("lease_a")) >= 2 })
			checkChain(t, "lease_a", key.Public().(ed25519.PublicKey), srv.receiptsFor("lease_a"))
			r.stop(t)
		})
	})
}

// writeMeterState writes a lease's receipt state as an agent keeps it
// (DATA_DIR/receipts/LEASE.json).
func writeMeterState(tb testing.TB, dataDir string, st map[string]any) {
	tb.Helper()
	data, err := json.Marshal(st)
	if err != nil {
		tb.Fatal(err)
	}
	dir := filepath.Join(dataDir, "receipts")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, st["lease_id"].(string)+".json"), data, 0o600); err != nil {
		tb.Fatal(err)
	}
}
