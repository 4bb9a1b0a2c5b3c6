package agent_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// prefixServer is a fakeServer that, as the server does, keeps the
// receipts of a batch that come before the one it refuses.
type prefixServer struct{ *fakeServer }

func (p prefixServer) SendReceipts(ctx context.Context, leaseID string, rs []idlegrid.Receipt) error {
	for i := range rs {
		if err := p.fakeServer.SendReceipts(ctx, leaseID, rs[i:i+1]); err != nil {
			return err
		}
	}
	return nil
}

// refuseAt makes srv refuse, as invalid, the receipt that starts at offset
// into the run (the first receipt starts it), and returns the run's start.
func refuseAt(srv *fakeServer, offset time.Duration) *time.Time {
	var began time.Time
	srv.refuse = func(rc idlegrid.Receipt) error {
		if began.IsZero() {
			began = rc.Start
		}
		if rc.Start.Sub(began) == offset {
			return idlegrid.Invalid("receipt.interval", "receipt %d: refused for this test", rc.Seq)
		}
		return nil
	}
	return &began
}

// TestAgent_ReceiptRefusals checks that a refused receipt, or a refused
// batch, costs no more than what was refused: the receipts after it are
// accepted, renumbered and chained to the one before it.
func TestAgent_ReceiptRefusals(t *testing.T) {
	t.Run("ServerCannotSayItsLast", func(t *testing.T) {
		// A server without GET .../receipts/last: the chain goes on from
		// the receipt before the refused one, as the node knows it.
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			for range 10000 { // never, in the test's hour
				srv.fail("LastReceipt", idlegrid.Errorf(idlegrid.ENOTFOUND, "no route GET /v1/agent/leases/lease_a/receipts/last"))
			}
			r, pub := startMetered(t, testConfig(t), srv, nil)
			defer r.stop(t) // also when a check fails: the bubble must end with none of its goroutines
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			began := refuseAt(srv, 60*time.Second)
			r.assign(srv, "lease_a", job(200, nil))
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			// Of 0..60, 60..120, 120..180 and 180..200 s, the second was
			// refused; the two after it still count.
			rs := srv.receiptsFor("lease_a")
			if len(rs) != 3 {
				t.Fatalf("%d receipts, want 3 (all but the one refused): %+v", len(rs), rs)
			}
			if sum := checkGappedChain(t, "lease_a", pub, rs); sum != 140 {
				t.Errorf("the receipts claim %d GPU-seconds, want 140 (200 less the 60 refused)", sum)
			}
			if got := rs[1].Start.Sub(*began); got != 120*time.Second {
				t.Errorf("receipt 2 starts %v into the run, want 120 s", got)
			}
		})
	})
	t.Run("ServerKeepsTheBatchBeforeTheRefused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fake := &fakeServer{}
			srv := prefixServer{fake}
			r, pub := startMetered(t, testConfig(t), srv, nil)
			defer r.stop(t) // also when a check fails: the bubble must end with none of its goroutines
			waitFor(t, "the offer", func() bool { _, offers, _ := fake.counts(); return offers == 1 })
			down := errors.New("dial tcp 127.0.0.1:7070: connection refused")
			for range 9 { // about three minutes of backoff: the receipts come in one batch
				fake.fail("SendReceipts", down)
			}
			// After the outage 60..120, 120..180 and 180..200 s go in one
			// batch; the server keeps the first and refuses the second.
			began := refuseAt(fake, 120*time.Second)
			r.assign(fake, "lease_a", job(200, nil))
			waitFor(t, "the lease to succeed", leaseIn(fake, "lease_a", idlegrid.LeaseSucceeded))
			rs := fake.receiptsFor("lease_a")
			if len(rs) != 3 {
				t.Fatalf("%d receipts, want 3 (all but the one refused): %+v", len(rs), rs)
			}
			if sum := checkGappedChain(t, "lease_a", pub, rs); sum != 140 {
				t.Errorf("the receipts claim %d GPU-seconds, want 140 (200 less the 60 refused)", sum)
			}
			if got := rs[2].Start.Sub(*began); got != 180*time.Second {
				t.Errorf("receipt 3 starts %v into the run, want 180 s", got)
			}
		})
	})
	t.Run("ConflictCheckedAndSentAgain", func(t *testing.T) {
		// A conflict is not the receipts' fault (another request stored
		// them meanwhile, say): they are checked against the server's
		// chain and sent again, not dropped with the chain broken after
		// them.
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r, pub := startMetered(t, testConfig(t), srv, nil)
			defer r.stop(t) // also when a check fails: the bubble must end with none of its goroutines
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			srv.fail("SendReceipts", idlegrid.Errorf(idlegrid.ECONFLICT, "the receipts of lease lease_a changed meanwhile; send them again"))
			r.assign(srv, "lease_a", job(200, nil))
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			rs := srv.receiptsFor("lease_a")
			if len(rs) != 4 {
				t.Fatalf("%d receipts, want 4 (3 × 60 s and 20 s): %+v", len(rs), rs)
			}
			if sum := checkChain(t, "lease_a", pub, rs); sum != 200 {
				t.Errorf("the receipts claim %d GPU-seconds, want 200", sum)
			}
		})
	})
}

// checkGappedChain checks that rs are the lease's receipts 1, 2, 3…, each
// signed by pub and chained to the one before, starting no earlier than it
// ended (a refused receipt leaves a gap), and returns their GPU-seconds.
func checkGappedChain(tb testing.TB, leaseID string, pub ed25519.PublicKey, rs []idlegrid.Receipt) int64 {
	tb.Helper()
	var sum int64
	for i := range rs {
		r := &rs[i]
		if err := nodekey.VerifyReceipt(pub, r); err != nil {
			tb.Errorf("receipt %d: %v", r.Seq, err)
		}
		if r.LeaseID != leaseID || r.Seq != int64(i+1) {
			tb.Errorf("receipt %d is %s #%d, want %s #%d", i+1, r.LeaseID, r.Seq, leaseID, i+1)
		}
		if i > 0 && (r.PrevHash != rs[i-1].Hash() || r.Start.Before(rs[i-1].End)) {
			tb.Errorf("receipt %d does not follow receipt %d", r.Seq, rs[i-1].Seq)
		}
		sum += r.GPUSeconds
	}
	return sum
}

// TestAgent_ReceiptsKeptBeforeSent checks that no receipt leaves the node
// before the state that holds it is on disk: an agent that restarted from
// an older state would sign that receipt's number again with other
// contents, which the server reads as forgery.
func TestAgent_ReceiptsKeptBeforeSent(t *testing.T) {
	t.Run("HeldUntilTheWriteWorks", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig(t)
			srv := &fakeServer{}
			r, pub := startMetered(t, cfg, srv, nil)
			defer r.stop(t) // also when a check fails: the bubble must end with none of its goroutines
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			r.assign(srv, "lease_a", job(300, nil))
			waitFor(t, "the first receipt", func() bool { return len(srv.receiptsFor("lease_a")) == 1 })
			path := filepath.Join(cfg.DataDir, "receipts", "lease_a.json")
			breakStateFile(t, path)
			time.Sleep(90 * time.Second) // receipt 2 is cut at 120 s, and cannot be written
			if got := len(srv.receiptsFor("lease_a")); got != 1 {
				t.Fatalf("the server has %d receipts; want 1: the state on disk holds only receipt 1", got)
			}
			if err := os.RemoveAll(path); err != nil { // the disk mends
				t.Fatal(err)
			}
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			rs := srv.receiptsFor("lease_a")
			if len(rs) != 5 {
				t.Fatalf("%d receipts, want 5 (every 60 s), sent once written", len(rs))
			}
			if sum := checkChain(t, "lease_a", pub, rs); sum != 300 {
				t.Errorf("the receipts claim %d GPU-seconds, want 300", sum)
			}
		})
	})
	t.Run("GivenUpAtTheEndIfNeverWritten", func(t *testing.T) {
		// The workload exits while its receipt state cannot be written:
		// the final report goes after a few tries, without the receipts
		// the disk does not hold, rather than wait for ever.
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig(t)
			srv := &fakeServer{}
			r, _ := startMetered(t, cfg, srv, nil)
			defer r.stop(t) // also when a check fails: the bubble must end with none of its goroutines
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			r.assign(srv, "lease_a", job(150, nil))
			waitFor(t, "the first receipt", func() bool { return len(srv.receiptsFor("lease_a")) == 1 })
			breakStateFile(t, filepath.Join(cfg.DataDir, "receipts", "lease_a.json"))
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			if got := len(srv.receiptsFor("lease_a")); got != 1 {
				t.Errorf("the server has %d receipts; want 1, the only one written", got)
			}
		})
	})
}

// breakStateFile makes every later write of the state file at path fail:
// a directory stands where it is renamed to. It runs in a synctest bubble
// and first waits for the agent to be idle: the agent writes the file
// again once the server has a receipt, and such a write between the
// removal and the directory would leave a file in the directory's way.
func breakStateFile(tb testing.TB, path string) {
	tb.Helper()
	synctest.Wait()
	if err := os.Remove(path); err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "in-the-way"), 0o700); err != nil {
		tb.Fatal(err)
	}
}

// batchRefuser is a fakeServer that refuses, once, the first batch of
// more than one receipt after it is armed, keeping none of it, as a
// server would a batch whose receipts pass one by one; and counts the
// batches of more than one it takes after that.
type batchRefuser struct {
	*fakeServer
	mu           sync.Mutex
	downUntil    time.Time // before then, sends fail as with the server down
	armed        bool
	refused      bool
	batchesAfter int
}

func (b *batchRefuser) SendReceipts(ctx context.Context, leaseID string, rs []idlegrid.Receipt) error {
	b.mu.Lock()
	switch {
	case time.Now().Before(b.downUntil):
		b.mu.Unlock()
		return errors.New("dial tcp 127.0.0.1:7070: connection refused")
	case b.armed && !b.refused && len(rs) > 1:
		b.refused = true
		b.mu.Unlock()
		return idlegrid.Invalid("receipt.gpu_seconds", "the batch claims more than its lease's GPUs could run: refused for this test")
	case b.refused && len(rs) > 1:
		b.batchesAfter++
	}
	b.mu.Unlock()
	return b.fakeServer.SendReceipts(ctx, leaseID, rs)
}

// TestAgent_ReceiptsBatchAfterProbe: once the receipts of a refused batch
// have gone one at a time, the rest go in batches again, not each in a
// request of its own.
func TestAgent_ReceiptsBatchAfterProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := &fakeServer{}
		srv := &batchRefuser{fakeServer: fake}
		cfg := testConfig(t)
		cfg.ReceiptInterval = time.Second
		r, pub := startMetered(t, cfg, srv, nil)
		defer r.stop(t) // also when a check fails: the bubble must end with none of its goroutines
		waitFor(t, "the offer", func() bool { _, offers, _ := fake.counts(); return offers == 1 })
		// Down for 200 s: twice as many receipts wait as a batch holds, so
		// after the refused batch and its probe a batch of many is left.
		srv.mu.Lock()
		srv.armed = true
		srv.downUntil = time.Now().Add(200 * time.Second)
		srv.mu.Unlock()
		r.assign(fake, "lease_a", job(300, nil))
		waitFor(t, "the lease to succeed", leaseIn(fake, "lease_a", idlegrid.LeaseSucceeded))
		rs := fake.receiptsFor("lease_a")
		if sum := checkChain(t, "lease_a", pub, rs); sum != 300 {
			t.Errorf("the receipts claim %d GPU-seconds, want 300: none was refused alone", sum)
		}
		srv.mu.Lock()
		defer srv.mu.Unlock()
		if !srv.refused || srv.batchesAfter == 0 {
			t.Errorf("refused a batch: %v; batches taken after it: %d, want some: the receipts after the refused batch go in batches again", srv.refused, srv.batchesAfter)
		}
	})
}
