package agent

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// accept takes rs into have as the server does: a receipt it has is a
// no-op when unchanged and forgery when changed; the next must follow the
// last in sequence and chain.
func accept(have *[]idlegrid.Receipt, rs []idlegrid.Receipt) error {
	for _, r := range rs {
		n := int64(len(*have))
		switch {
		case r.Seq >= 1 && r.Seq <= n && (*have)[r.Seq-1].Hash() == r.Hash():
		case r.Seq >= 1 && r.Seq <= n:
			return fmt.Errorf("receipt %d was already accepted with other contents: forgery", r.Seq)
		case r.Seq != n+1 || (n > 0 && r.PrevHash != (*have)[n-1].Hash()):
			return fmt.Errorf("receipt %d does not follow receipt %d", r.Seq, n)
		default:
			*have = append(*have, r)
		}
	}
	return nil
}

// TestMeter_crashAfterAFailedWrite checks that a receipt whose state could
// not be written is not sent: the agent that restarts after a crash goes
// on from the state on disk, and would otherwise sign that receipt's
// number again with other contents, even where the server cannot say
// which receipt it has last (rebase cannot mend it).
func TestMeter_crashAfterAFailedWrite(t *testing.T) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	path := meterPath(t.TempDir(), "lease_a")
	began := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	gpus := []string{"GPU-0"}
	var server []idlegrid.Receipt
	send := func(m *meter) error { // as sendReceipts does, to a server that can take them all
		rs := m.pending(10)
		if len(rs) == 0 {
			return nil
		} else if err := accept(&server, rs); err != nil {
			return err
		}
		_ = m.done(len(rs)) // as the agent does: a failed write holds the receipts back (keep)
		return nil
	}

	var first meter
	mustOK(t, first.begin(path, "lease_a", gpus, 3600, began, map[string]gpuSample{"GPU-0": {utilPct: 90}}))
	mustOK(t, first.cutDue(began.Add(60*time.Second), time.Minute, key))
	mustOK(t, send(&first))
	onDisk, err := os.ReadFile(path) // as the crash will leave it
	if err != nil {
		t.Fatal(err)
	}
	// The disk fails: a directory stands where the state is renamed to.
	mustOK(t, os.Remove(path))
	mustOK(t, os.MkdirAll(filepath.Join(path, "in-the-way"), 0o700))
	if err := first.cutDue(began.Add(120*time.Second), time.Minute, key); err == nil {
		t.Fatal("receipt 2's state was written over a directory")
	}
	mustOK(t, send(&first))
	if len(server) != 1 {
		t.Errorf("the server has %d receipts; want 1: receipt 2 was sent while its state was not on disk", len(server))
	}

	// The agent dies, and the next takes the workload back from the disk
	// as it was, with other telemetry. The server cannot say which
	// receipt it has last (one older than the agent).
	mustOK(t, os.RemoveAll(path))
	mustOK(t, os.WriteFile(path, onDisk, 0o600))
	var second meter
	mustOK(t, second.resume(path, map[string]gpuSample{"GPU-0": {utilPct: 10}}))
	second.settle()
	mustOK(t, second.cutDue(began.Add(130*time.Second), time.Minute, key))
	if err := send(&second); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if len(server) != 2 || server[1].AvgUtilPct != 10 {
		t.Errorf("the server has %+v; want receipt 1, then receipt 2 as the restarted agent cut it", server)
	}
}
