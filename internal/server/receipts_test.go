package server_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// nodeKeys holds the identity key of every node the tests joined, by node ID.
var nodeKeys sync.Map

// logBuffer is a log every test server writes its warnings to, so that a
// test can check what was logged as evidence.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged lines that contain every one of subs.
func (b *logBuffer) lines(subs ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
next:
	for _, line := range strings.Split(b.buf.String(), "\n") {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

var (
	testLog    = &logBuffer{}
	testLogger = slog.New(slog.NewTextHandler(testLog, &slog.HandlerOptions{Level: slog.LevelWarn}))
)

func nodeKey(t *testing.T, nodeID string) ed25519.PrivateKey {
	t.Helper()
	k, ok := nodeKeys.Load(nodeID)
	if !ok {
		t.Fatalf("no key for node %s", nodeID)
	}
	return k.(ed25519.PrivateKey)
}

// chain returns receipts of lease l after prev (nil: from the lease's
// start), one per interval of secs seconds, each claiming all the lease's
// GPUs for its whole interval, signed by key.
func chain(l *idlegrid.Lease, key ed25519.PrivateKey, prev *idlegrid.Receipt, secs ...int64) []idlegrid.Receipt {
	var out []idlegrid.Receipt
	start, seq, hash := *l.StartedAt, int64(1), ""
	if prev != nil {
		start, seq, hash = prev.End, prev.Seq+1, prev.Hash()
	}
	for _, s := range secs {
		r := idlegrid.Receipt{
			LeaseID: l.ID, Seq: seq, Start: start, End: start.Add(time.Duration(s) * time.Second),
			GPUSeconds: s * int64(len(l.GPUUUIDs)), AvgUtilPct: 93, EnergyWh: 8, PrevHash: hash,
		}
		nodekey.SignReceipt(key, &r)
		out = append(out, r)
		start, seq, hash = r.End, seq+1, r.Hash()
	}
	return out
}

func mustFindLease(t *testing.T, m *testMarket, id string) *idlegrid.Lease {
	t.Helper()
	l, err := m.store.FindLease(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// mustSendReceipts has the market's node sign and send receipts for its
// lease from its start, one per interval of secs seconds.
func mustSendReceipts(t *testing.T, m *testMarket, leaseID string, secs ...int64) []idlegrid.Receipt {
	t.Helper()
	l := mustFindLease(t, m, leaseID)
	rs := chain(l, nodeKey(t, m.nodeID), nil, secs...)
	if err := m.srv.ReceiveReceipts(m.node, leaseID, rs); err != nil {
		t.Fatalf("ReceiveReceipts: %v", err)
	}
	return rs
}

func TestServer_ReceiveReceipts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		_, placed := mustStart(t, m)
		m.advance(t, 150*time.Second)
		l := mustFindLease(t, m, placed.ID)
		key := nodeKey(t, m.nodeID)
		good := chain(l, key, nil, 60, 60)

		if err := m.srv.ReceiveReceipts(m.node, l.ID, good[:1]); err != nil {
			t.Fatalf("first receipt: %v", err)
		}
		if err := m.srv.ReceiveReceipts(m.node, l.ID, good); err != nil {
			t.Fatalf("the first again with the second: %v (a resent receipt must be a no-op)", err)
		}
		if err := m.srv.ReceiveReceipts(m.node, l.ID, good); err != nil {
			t.Fatalf("both again: %v", err)
		}
		next := func(change func(r *idlegrid.Receipt), resign bool) []idlegrid.Receipt {
			r := chain(l, key, &good[1], 20)[0]
			change(&r)
			if resign {
				nodekey.SignReceipt(key, &r)
			}
			return []idlegrid.Receipt{r}
		}
		_, thief, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		changed := good[1]
		changed.AvgUtilPct = 10
		nodekey.SignReceipt(key, &changed)
		third := next(func(*idlegrid.Receipt) {}, false)[0]
		for _, tt := range []struct {
			name  string
			rs    []idlegrid.Receipt
			field string
		}{
			{"Forged", next(func(r *idlegrid.Receipt) { nodekey.SignReceipt(thief, r) }, false), "receipt.signature"},
			{"Tampered", next(func(r *idlegrid.Receipt) { r.GPUSeconds = 30 }, false), "receipt.signature"},
			{"SkippedSeq", next(func(r *idlegrid.Receipt) { r.Seq = 4 }, true), "receipt.seq"},
			{"BrokenChain", next(func(r *idlegrid.Receipt) { r.PrevHash = good[0].Hash() }, true), "receipt.prev_hash"},
			{"Overlapping", next(func(r *idlegrid.Receipt) { r.Start = r.Start.Add(-10 * time.Second) }, true), "receipt.interval"},
			{"Inflated", next(func(r *idlegrid.Receipt) { r.GPUSeconds = 41 }, true), "receipt.gpu_seconds"},
			{"InTheFuture", next(func(r *idlegrid.Receipt) { r.End = r.Start.Add(time.Hour) }, true), "receipt.interval"},
			{"EmptyInterval", next(func(r *idlegrid.Receipt) { r.End = r.Start; r.GPUSeconds = 0 }, true), "receipt.interval"},
			{"ChangedResend", []idlegrid.Receipt{good[0], changed}, "receipt.seq"},
			{"OutOfOrder", []idlegrid.Receipt{third, good[1]}, "receipt.seq"}, // last: it keeps third
		} {
			// No t.Run: subtests cannot run inside a synctest bubble.
			err := m.srv.ReceiveReceipts(m.node, l.ID, tt.rs)
			var e *idlegrid.Error
			if !asError(err, &e) || e.Code != idlegrid.EINVALID || e.Field != tt.field {
				t.Errorf("%s: error = %v, want EINVALID on %s", tt.name, err, tt.field)
				continue
			}
			r := tt.rs[0]
			if len(tt.rs) > 1 { // the second is the bad one
				r = tt.rs[1]
			}
			if got := testLog.lines("usage receipt refused", "evidence=receipt", "lease="+l.ID, "field="+tt.field, "hash="+r.Hash()); len(got) == 0 {
				t.Errorf("%s: the refusal was not logged as evidence with the receipt", tt.name)
			}
		}
		sum, last, err := m.store.ReceiptUsage(context.Background(), l.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Of the refused batches, only the receipt that led the last, valid
		// before the one refused, was kept.
		if sum != 280 || last == nil || last.Hash() != third.Hash() {
			t.Fatalf("the lease has %d GPU-seconds up to %+v; want the good chain's 240 and the third's 40, nothing of the refused", sum, last)
		}

		early := *l // a receipt from before the lease was placed
		early.StartedAt = ptr(l.CreatedAt.Add(-nodekey.MaxSkew - time.Second))
		if err := m.srv.ReceiveReceipts(m.node, l.ID, chain(&early, key, nil, 60)); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Errorf("a receipt from before the placement: error = %v, want EINVALID", err)
		}
		if err := m.srv.ReceiveReceipts(m.rival, l.ID, good[:1]); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("another node: error = %v, want ENOTFOUND for another node's lease", err)
		}
		if err := m.srv.ReceiveReceipts(m.renter, l.ID, good[:1]); idlegrid.ErrorCode(err) != idlegrid.EUNAUTHORIZED {
			t.Errorf("a renter: error = %v, want EUNAUTHORIZED", err)
		}
	})
}

func TestServer_ReceiveReceipts_limit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		_, placed := mustStart(t, m)
		m.advance(t, 3700*time.Second)
		l := mustFindLease(t, m, placed.ID) // a limit of 3600 s
		rs := chain(l, nodeKey(t, m.nodeID), nil, 3600, 60)
		err := m.srv.ReceiveReceipts(m.node, l.ID, rs)
		if idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("error = %v, want EINVALID past the limit", err)
		}
		if err := m.srv.ReceiveReceipts(m.node, l.ID, rs[:1]); err != nil {
			t.Fatalf("up to the limit: %v", err)
		}
	})
}

func TestServer_ReceiveReceipts_notStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		if _, err := m.srv.SubmitJob(m.renter, testSpec()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		cmds, err := m.srv.Commands(m.node, 0)
		if err != nil || len(cmds) != 1 {
			t.Fatalf("commands = %+v, %v; want one start", cmds, err)
		}
		l := *cmds[0].Lease
		l.StartedAt = ptr(m.srv.Now())
		err = m.srv.ReceiveReceipts(m.node, l.ID, chain(&l, nodeKey(t, m.nodeID), nil, 1))
		if idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			t.Fatalf("receipts for an assigned lease: error = %v, want ECONFLICT", err)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func asError(err error, e **idlegrid.Error) bool {
	v, ok := err.(*idlegrid.Error)
	*e = v
	return ok
}

// TestServer_ChargeFromReceipts checks that a lease is charged what its
// receipts claim, capped by its wall-clock time; and that a lease without
// receipts is charged at most NoReceiptCapSeconds of its GPUs.
func TestServer_ChargeFromReceipts(t *testing.T) {
	for _, tt := range []struct {
		name       string
		run        time.Duration
		secs       []int64 // the receipts' intervals
		idle       bool    // the receipts claim half the GPUs only
		gpuSeconds int64   // charged
	}{
		{"Receipts", 300 * time.Second, []int64{60, 60, 60, 60, 60}, false, 2 * 300},
		{"PartlyIdle", 300 * time.Second, []int64{60, 60, 60, 60, 60}, true, 300},
		{"FewerThanRan", 300 * time.Second, []int64{60, 60}, false, 2 * 120},
		{"MoreThanTheWallClock", 60 * time.Second, []int64{60, 60}, false, 2 * 60},
		{"NoReceipts", 300 * time.Second, nil, false, 2 * server.NoReceiptCapSeconds},
		{"NoReceiptsShortRun", 30 * time.Second, nil, false, 2 * 30},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := mustMarket(t)
				j, placed := mustStart(t, m)
				m.advance(t, tt.run)
				l := mustFindLease(t, m, placed.ID)
				rs := chain(l, nodeKey(t, m.nodeID), nil, tt.secs...)
				if tt.idle {
					for i := range rs { // re-sign a chain claiming one GPU of two
						rs[i].GPUSeconds /= 2
						if i > 0 {
							rs[i].PrevHash = rs[i-1].Hash()
						}
						nodekey.SignReceipt(nodeKey(t, m.nodeID), &rs[i])
					}
				}
				if err := m.srv.ReceiveReceipts(m.node, l.ID, rs); err != nil {
					t.Fatal(err)
				}
				code := 0
				if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &code}); err != nil {
					t.Fatal(err)
				}
				got, err := m.srv.FindJob(m.renter, j.ID)
				if err != nil {
					t.Fatal(err)
				}
				price := l.PriceMicrosPerGPUHour
				if want := idlegrid.CostOf(price, tt.gpuSeconds); got.ChargedMicros != want || want <= 0 {
					t.Errorf("charged %d, want %d (%d GPU-seconds at %d/GPU-h)", got.ChargedMicros, want, tt.gpuSeconds, price)
				}
				mustLedgerBalanced(t, m.store)

				// The lease has ended: its receipts are closed.
				late := chain(l, nodeKey(t, m.nodeID), lastOf(rs), 1)
				if err := m.srv.ReceiveReceipts(m.node, l.ID, late); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
					t.Errorf("a receipt after the end: err = %v, want ECONFLICT", err)
				}
			})
		})
	}
}

func lastOf(rs []idlegrid.Receipt) *idlegrid.Receipt {
	if len(rs) == 0 {
		return nil
	}
	return &rs[len(rs)-1]
}

func TestServer_LeaseReceipts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		_, placed := mustStart(t, m)
		m.advance(t, 120*time.Second)
		sent := mustSendReceipts(t, m, placed.ID, 60, 60)
		nosy, _, _, err := m.srv.CreateAccount(m.admin, "nosy", idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		for _, who := range []struct {
			name string
			ctx  context.Context
		}{{"Renter", m.renter}, {"Provider", m.provider}, {"Admin", m.admin}} {
			got, err := m.srv.LeaseReceipts(who.ctx, placed.ID)
			if err != nil {
				t.Fatalf("%s: %v", who.name, err)
			}
			if got.LeaseID != placed.ID || got.NodeID != m.nodeID || got.GPUs != 2 || got.GPUSeconds != 240 || len(got.Receipts) != 2 {
				t.Fatalf("%s: export = %+v, want the lease's 2 receipts on 2 GPUs, 240 GPU-seconds", who.name, got)
			}
			pub, err := nodekey.ParsePublic(got.NodePublicKey)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range got.Receipts {
				if err := nodekey.VerifyReceipt(pub, &r); err != nil || r.Hash() != sent[i].Hash() {
					t.Errorf("%s: receipt %d does not verify with the exported key (%v), or changed", who.name, r.Seq, err)
				}
			}
		}
		if _, err := m.srv.LeaseReceipts(as(nosy), placed.ID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("another renter: err = %v, want ENOTFOUND", err)
		}
		if _, err := m.srv.LeaseReceipts(m.node, placed.ID); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
			t.Errorf("a node: err = %v, want EFORBIDDEN", err)
		}
	})
}

// TestServer_ReceiptsBeforeTheStartReport checks that a node that started
// the workload before the server heard of it (its running report was held
// up) has its receipts accepted, and that the renter still pays for no more
// than the server saw run.
func TestServer_ReceiptsBeforeTheStartReport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		j, err := m.srv.SubmitJob(m.renter, testSpec())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		cmds, err := m.srv.Commands(m.node, 0)
		if err != nil || len(cmds) != 1 {
			t.Fatalf("commands = %+v, %v; want one start", cmds, err)
		}
		l := cmds[0].Lease
		m.advance(t, 90*time.Second) // the workload runs; the report is held up
		if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
			t.Fatal(err)
		}
		m.advance(t, 60*time.Second)
		ran := *l
		ran.StartedAt = &l.CreatedAt // the node's receipts start at placement
		rs := chain(&ran, nodeKey(t, m.nodeID), nil, 60, 60, 30)
		if err := m.srv.ReceiveReceipts(m.node, l.ID, rs); err != nil {
			t.Fatalf("receipts from before the running report: %v", err)
		}
		code := 0
		if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &code}); err != nil {
			t.Fatal(err)
		}
		got, err := m.srv.FindJob(m.renter, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		// 300 GPU-seconds signed; the server saw 60 s on 2 GPUs.
		if want := idlegrid.CostOf(l.PriceMicrosPerGPUHour, 2*60); got.ChargedMicros != want {
			t.Errorf("charged %d, want %d: the wall-clock GPU-seconds since the server saw the start", got.ChargedMicros, want)
		}
	})
}

// TestServer_ReceiveReceipts_hugeForgery: a receipt whose signature is far
// too long to be one still convicts its provider: the conviction's record
// shows the signature cut, so that it fits the audit log.
func TestServer_ReceiveReceipts_hugeForgery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		_, placed := mustStart(t, m)
		m.advance(t, 90*time.Second)
		l := mustFindLease(t, m, placed.ID)
		r := chain(l, nodeKey(t, m.nodeID), nil, 60)[0]
		r.Signature = strings.Repeat("A", 100<<10)
		err := m.srv.ReceiveReceipts(m.node, l.ID, []idlegrid.Receipt{r})
		var e *idlegrid.Error
		if !asError(err, &e) || e.Field != "receipt.signature" {
			t.Fatalf("ReceiveReceipts = %v, want refused on receipt.signature", err)
		}
		synctest.Wait()
		var convicted int
		for _, d := range upheld(t, m) {
			if d.Offence == string(trustpolicy.OffenceForgedReceipt) && d.LeaseID == l.ID {
				convicted++
			}
		}
		if convicted != 1 {
			t.Errorf("%d forged-receipt convictions of the lease, want 1", convicted)
		}
	})
}
