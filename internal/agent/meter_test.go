package agent

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// TestMeter_resume checks that a meter restored from the state a previous
// agent left goes on with the same chain: the unsent receipts first, then
// new ones that follow them.
func TestMeter_resume(t *testing.T) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().(ed25519.PublicKey)
	dir := t.TempDir()
	path := meterPath(dir, "lease_a")
	began := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	telemetry := map[string]gpuSample{"GPU-0": {utilPct: 70, powerW: 300}, "GPU-1": {utilPct: 90, powerW: 300}}

	var first meter
	mustOK(t, first.begin(path, "lease_a", []string{"GPU-0", "GPU-1"}, 3600, began, telemetry))
	mustOK(t, first.cutDue(began.Add(130*time.Second), time.Minute, key))
	sent := first.pending(10)
	if len(sent) != 2 || sent[0].GPUSeconds != 120 || sent[0].AvgUtilPct != 80 || sent[0].EnergyWh != 10 {
		t.Fatalf("receipts = %+v, want 2 of 120 GPU-seconds at 80%% and 10 Wh (600 W for a minute)", sent)
	}
	mustOK(t, first.done(1)) // the server took the first; then the agent died

	var second meter
	mustOK(t, second.resume(path, telemetry))
	second.stopAt(time.Time{}, began.Add(150*time.Second+500*time.Millisecond))
	mustOK(t, second.cutDue(began.Add(200*time.Second), time.Minute, key))
	rest := second.pending(10)
	if len(rest) != 2 || rest[0].Hash() != sent[1].Hash() {
		t.Fatalf("after resuming: %+v, want the unsent receipt 2, then the last", rest)
	}
	last := rest[1]
	if err := nodekey.VerifyReceipt(pub, &last); err != nil || last.Seq != 3 || last.PrevHash != sent[1].Hash() ||
		!last.Start.Equal(sent[1].End) || !last.End.Equal(began.Add(150*time.Second)) || last.GPUSeconds != 60 {
		t.Fatalf("last receipt = %+v (%v); want #3 chained to #2, 120..150 s, 60 GPU-seconds, signed", last, err)
	}
	mustOK(t, second.done(2))

	if got := meterPath(dir, "../../etc/passwd"); got != "" {
		t.Errorf("meterPath of a hostile lease ID = %q, want none", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "receipts", "lease_b.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	var third meter
	if err := third.resume(meterPath(dir, "lease_b"), nil); err == nil {
		t.Error("resumed from a corrupt state file")
	}
}

// TestMeter_rebase checks that a chain goes on from the server's last
// receipt: what the server has is dropped, and the rest renumbered and
// signed anew only where that changed them.
func TestMeter_rebase(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	pub := key.Public().(ed25519.PublicKey)
	began := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cut3 := func() *meter {
		m := &meter{}
		mustOK(t, m.begin("", "lease_a", []string{"GPU-0"}, 3600, began, nil))
		mustOK(t, m.cutDue(began.Add(190*time.Second), time.Minute, key))
		return m
	}
	t.Run("ServerHasTheFirst", func(t *testing.T) {
		m := cut3()
		rs := m.pending(10)
		mustOK(t, m.rebase(&rs[0], key))
		if got := m.pending(10); len(got) != 2 || got[0].Signature != rs[1].Signature || got[1].Signature != rs[2].Signature {
			t.Errorf("unsent = %+v, want receipts 2 and 3 unchanged", got)
		}
	})
	t.Run("FirstRefused", func(t *testing.T) {
		m := cut3()
		rs := m.pending(10)
		mustOK(t, m.done(1))
		mustOK(t, m.rebase(nil, key))
		got := m.pending(10)
		if len(got) != 2 || got[0].Seq != 1 || got[0].PrevHash != "" || got[1].Seq != 2 || got[1].PrevHash != got[0].Hash() ||
			!got[0].Start.Equal(rs[1].Start) || !got[1].End.Equal(rs[2].End) {
			t.Fatalf("unsent = %+v, want receipts 2 and 3 renumbered 1 and 2", got)
		}
		for i := range got {
			if err := nodekey.VerifyReceipt(pub, &got[i]); err != nil {
				t.Errorf("receipt %d: %v", got[i].Seq, err)
			}
		}
		m.stopAt(time.Time{}, began.Add(200*time.Second))
		mustOK(t, m.cutDue(began.Add(200*time.Second), time.Minute, key))
		if all := m.pending(10); len(all) != 3 || all[2].Seq != 3 || all[2].PrevHash != got[1].Hash() {
			t.Errorf("after the last cut: %+v, want it chained to the renumbered 2", all)
		}
	})
	t.Run("ServerAhead", func(t *testing.T) {
		// The server has receipts this meter lost: a later one of its own.
		m := cut3()
		rs := m.pending(10)
		mustOK(t, m.done(3))
		theirs := idlegrid.Receipt{LeaseID: "lease_a", Seq: 4, Start: rs[2].End, End: began.Add(240 * time.Second), GPUSeconds: 60}
		nodekey.SignReceipt(key, &theirs)
		mustOK(t, m.rebase(&theirs, key))
		mustOK(t, m.cutDue(began.Add(300*time.Second), time.Minute, key))
		if got := m.pending(10); len(got) != 1 || got[0].Seq != 5 || got[0].PrevHash != theirs.Hash() || !got[0].Start.Equal(theirs.End) {
			t.Errorf("unsent = %+v, want receipt 5 from where the server's 4 ended", got)
		}
	})
}

func TestMeter_limit(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	began := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var m meter
	mustOK(t, m.begin("", "lease_a", []string{"GPU-0"}, 90, began, nil))
	m.stopAt(time.Time{}, began.Add(125*time.Second)) // ran past its 90 s limit
	mustOK(t, m.cutDue(began.Add(200*time.Second), time.Minute, key))
	var sum int64
	for _, r := range m.pending(10) {
		sum += r.GPUSeconds
		if r.EnergyWh != 0 || r.AvgUtilPct != 0 {
			t.Errorf("receipt %d has %d Wh, %d%%; want 0 where nothing is known", r.Seq, r.EnergyWh, r.AvgUtilPct)
		}
	}
	if sum != 90 {
		t.Errorf("the receipts claim %d GPU-seconds, want 90: never past the lease's limit", sum)
	}
}

// TestMeter_stopAt checks that a workload is charged up to when its
// runtime says it ended, never before it began nor after the agent
// learnt of the end.
func TestMeter_stopAt(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	began := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := began.Add(100 * time.Second)
	for _, tc := range []struct {
		name string
		at   time.Time
		want int64 // GPU-seconds, on 2 GPUs
	}{
		{"Unknown", time.Time{}, 200},
		{"Earlier", began.Add(40*time.Second + 500*time.Millisecond), 80},
		{"BeforeItBegan", began.Add(-time.Hour), 0},
		{"AheadOfTheAgent", now.Add(time.Hour), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m meter
			mustOK(t, m.begin("", "lease_a", []string{"GPU-0", "GPU-1"}, 3600, began, nil))
			m.stopAt(tc.at, now)
			m.stopAt(began.Add(time.Second), now) // the first end stands
			mustOK(t, m.cutDue(now, time.Hour, key))
			var sum int64
			for _, r := range m.pending(10) {
				sum += r.GPUSeconds
			}
			if sum != tc.want || !m.finished() {
				t.Errorf("charged %d GPU-seconds (finished %v), want %d", sum, m.finished(), tc.want)
			}
		})
	}
}

// TestMeter_resumeAfterTheEnd checks that the end of a workload, and the
// cut of its last receipt, outlive a crash: an agent that takes the
// workload back and is told of its exit again charges no more.
func TestMeter_resumeAfterTheEnd(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	began := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	later := began.Add(time.Hour) // when the next agent is told of the exit
	t.Run("LastReceiptCut", func(t *testing.T) {
		path := meterPath(t.TempDir(), "lease_a")
		var first meter
		mustOK(t, first.begin(path, "lease_a", []string{"GPU-0"}, 3600, began, nil))
		first.stopAt(time.Time{}, began.Add(150*time.Second))
		mustOK(t, first.cutDue(began.Add(150*time.Second), time.Minute, key))
		mustOK(t, first.done(3)) // the server has them all; the agent dies before its final report

		var second meter
		mustOK(t, second.resume(path, nil))
		second.stopAt(time.Time{}, later)
		mustOK(t, second.cutDue(later, time.Minute, key))
		if got := second.pending(10); len(got) != 0 || !second.finished() {
			t.Errorf("after the restart: %+v, want no more receipts", got)
		}
	})
	t.Run("EndedBeforeTheLastCut", func(t *testing.T) {
		path := meterPath(t.TempDir(), "lease_a")
		var first meter
		mustOK(t, first.begin(path, "lease_a", []string{"GPU-0"}, 3600, began, nil))
		first.stopAt(time.Time{}, began.Add(150*time.Second)) // the agent dies before it cuts
		var second meter
		mustOK(t, second.resume(path, nil))
		second.stopAt(time.Time{}, later)
		mustOK(t, second.cutDue(later, time.Minute, key))
		var sum int64
		for _, r := range second.pending(10) {
			sum += r.GPUSeconds
		}
		if sum != 150 {
			t.Errorf("charged %d GPU-seconds, want 150: up to the end kept on disk", sum)
		}
	})
}

func mustOK(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
