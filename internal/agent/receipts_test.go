package agent_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
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
	t.Run("RefusedAreDropped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r, _ := startMetered(t, testConfig(t), srv, nil)
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			srv.fail("SendReceipts", idlegrid.Invalid("receipt.gpu_seconds", "too many"))
			r.assign(srv, "lease_a", job(90, nil))
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			// The first receipt was refused and dropped; the second then
			// cannot follow it, and is refused too. The lease still ends.
			if rs := srv.receiptsFor("lease_a"); len(rs) != 0 {
				t.Errorf("receipts = %+v, want none kept", rs)
			}
			r.stop(t)
		})
	})
}

func TestConfig_receiptInterval(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want time.Duration
		ok   bool
	}{
		{"", 0, true},
		{"receipt_interval: 30s\n", 30 * time.Second, true},
		{"receipt_interval: 1h\n", time.Hour, true},
		{"receipt_interval: 500ms\n", 0, false},
		{"receipt_interval: 1500ms\n", 0, false},
		{"receipt_interval: 2h\n", 0, false},
	} {
		c, err := agent.ParseConfig([]byte(minimal + tt.yaml))
		switch {
		case tt.ok && err != nil:
			t.Errorf("%q: %v", tt.yaml, err)
		case tt.ok && c.ReceiptInterval != tt.want:
			t.Errorf("%q: interval %v, want %v", tt.yaml, c.ReceiptInterval, tt.want)
		case !tt.ok:
			var e *idlegrid.Error
			if !errors.As(err, &e) || e.Field != "receipt_interval" {
				t.Errorf("%q: error %v, want one naming receipt_interval", tt.yaml, err)
			}
		}
	}
}
