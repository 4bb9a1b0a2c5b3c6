package server_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestServer_ReceiveReceipts_refusedInABatch checks that a batch with a
// receipt the server refuses keeps the receipts before it, and says which
// was refused, so that the node's pay for them does not hang on a later
// receipt and its chain goes on from the last kept.
func TestServer_ReceiveReceipts_refusedInABatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		_, placed := mustStart(t, m)
		m.advance(t, 200*time.Second)
		l := mustFindLease(t, m, placed.ID)
		key := nodeKey(t, m.nodeID)
		good := chain(l, key, nil, 60, 60)
		ahead := chain(l, key, &good[1], 3600)[0] // ends an hour from now
		batch := append(append(good[:2:2], ahead), chain(l, key, &ahead, 60)...)

		err := m.srv.ReceiveReceipts(m.node, l.ID, batch)
		var e *idlegrid.Error
		if !asError(err, &e) || e.Code != idlegrid.EINVALID || e.Field != "receipt.interval" ||
			!strings.Contains(e.Message, "receipt 3 ") || !strings.Contains(e.Message, "receipts 1 to 2 before it were accepted") {
			t.Errorf("error = %v, want EINVALID on receipt.interval naming receipt 3 and the two accepted before it", err)
		}
		sum, last, err := m.store.ReceiptUsage(context.Background(), l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if sum != good[0].GPUSeconds+good[1].GPUSeconds || last == nil || last.Hash() != good[1].Hash() {
			t.Fatalf("the lease has %d GPU-seconds up to %+v; want receipts 1 and 2, before the one refused", sum, last)
		}
		if got, err := m.srv.LastReceipt(m.node, l.ID); err != nil || got == nil || got.Hash() != good[1].Hash() {
			t.Errorf("LastReceipt = %+v, %v; want receipt 2, where the node goes on from", got, err)
		}

		// The node sends the batch again without the refused receipt, its
		// next chained to receipt 2: those it has are no-ops.
		next := chain(l, key, &good[1], 60)
		if err := m.srv.ReceiveReceipts(m.node, l.ID, append(good[:2:2], next...)); err != nil {
			t.Fatalf("the rest, chained to receipt 2: %v", err)
		}
		if sum, _, _ := m.store.ReceiptUsage(context.Background(), l.ID); sum != 3*good[0].GPUSeconds {
			t.Errorf("the lease has %d GPU-seconds, want %d: three receipts of 60 s", sum, 3*good[0].GPUSeconds)
		}
	})
}
