package agent

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// TestMeter_drop checks that the receipts after a refused one chain to the
// receipt before it, and that a receipt cut after the refused one, when
// nothing is left unsent, does too.
func TestMeter_drop(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	pub := key.Public().(ed25519.PublicKey)
	began := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var m meter
	mustOK(t, m.begin("", "lease_a", []string{"GPU-0"}, 3600, began, nil))
	mustOK(t, m.cutDue(began.Add(190*time.Second), time.Minute, key))
	var server []idlegrid.Receipt
	mustOK(t, accept(&server, m.pending(1)))
	mustOK(t, m.done(1))

	mustOK(t, m.drop(1, key)) // receipt 2 refused
	if !m.unsure() {
		t.Error("the chain is not checked against the server's after a refusal")
	}
	m.settle() // the server cannot say
	rs := m.pending(10)
	if len(rs) != 1 || !rs[0].Start.Equal(began.Add(120*time.Second)) {
		t.Fatalf("unsent = %+v, want the receipt of 120..180 s", rs)
	}
	mustOK(t, accept(&server, rs))
	mustOK(t, m.done(1))

	mustOK(t, m.cutDue(began.Add(250*time.Second), time.Minute, key))
	mustOK(t, m.drop(1, key)) // 180..240 s refused; nothing left unsent
	m.stopAt(time.Time{}, began.Add(270*time.Second))
	mustOK(t, m.cutDue(began.Add(270*time.Second), time.Minute, key))
	if err := accept(&server, m.pending(10)); err != nil {
		t.Fatalf("the last receipt after a refused one: %v", err)
	}
	if len(server) != 3 || !server[2].Start.Equal(began.Add(240*time.Second)) {
		t.Errorf("the server has %+v; want receipts of 0..60, 120..180 and 240..270 s", server)
	}
	for i := range server {
		if err := nodekey.VerifyReceipt(pub, &server[i]); err != nil {
			t.Errorf("receipt %d: %v", server[i].Seq, err)
		}
	}
}
