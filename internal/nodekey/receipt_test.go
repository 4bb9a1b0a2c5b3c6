package nodekey_test

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

func TestVerifyReceipt(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	otherPub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	signed := func() idlegrid.Receipt {
		r := idlegrid.Receipt{LeaseID: "lease_a", Seq: 1, Start: start, End: start.Add(time.Minute), GPUSeconds: 60, AvgUtilPct: 90}
		nodekey.SignReceipt(priv, &r)
		return r
	}
	tests := []struct {
		name   string
		pub    ed25519.PublicKey
		change func(r *idlegrid.Receipt)
		ok     bool
	}{
		{"Valid", pub, func(*idlegrid.Receipt) {}, true},
		{"OtherNode", otherPub, func(*idlegrid.Receipt) {}, false},
		{"Inflated", pub, func(r *idlegrid.Receipt) { r.GPUSeconds = 61 }, false},
		{"Stretched", pub, func(r *idlegrid.Receipt) { r.End = r.End.Add(time.Second) }, false},
		{"OtherLease", pub, func(r *idlegrid.Receipt) { r.LeaseID = "lease_b" }, false},
		{"Unsigned", pub, func(r *idlegrid.Receipt) { r.Signature = "" }, false},
		{"NotBase64", pub, func(r *idlegrid.Receipt) { r.Signature = "!!" }, false},
		{"NoKey", nil, func(*idlegrid.Receipt) {}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := signed()
			tt.change(&r)
			err := nodekey.VerifyReceipt(tt.pub, &r)
			if got := err == nil; got != tt.ok {
				t.Fatalf("VerifyReceipt ok = %v (%v), want %v", got, err, tt.ok)
			}
			if !tt.ok && tt.pub != nil && !errors.Is(err, nodekey.ErrBadReceiptSignature) {
				t.Errorf("error = %v, want ErrBadReceiptSignature", err)
			}
		})
	}
}

func TestVerifyReceiptChain(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var good []idlegrid.Receipt
	for i := range 3 {
		r := idlegrid.Receipt{LeaseID: "lease_a", Seq: int64(i + 1), Start: start.Add(time.Duration(i) * time.Minute),
			End: start.Add(time.Duration(i+1) * time.Minute), GPUSeconds: 120}
		if i > 0 {
			r.PrevHash = good[i-1].Hash()
		}
		nodekey.SignReceipt(priv, &r)
		good = append(good, r)
	}
	resign := func(change func(rs []idlegrid.Receipt)) []idlegrid.Receipt {
		rs := append([]idlegrid.Receipt(nil), good...)
		change(rs)
		for i := range rs {
			nodekey.SignReceipt(priv, &rs[i])
		}
		return rs
	}
	for _, tt := range []struct {
		name string
		rs   []idlegrid.Receipt
		gpus int
		bad  []bool // which receipts fail
	}{
		{"Good", good, 2, []bool{false, false, false}},
		{"OneGPUCannotRunThat", good, 1, []bool{true, true, true}},
		{"Tampered", func() []idlegrid.Receipt {
			rs := append([]idlegrid.Receipt(nil), good...)
			rs[1].GPUSeconds = 60 // without the node's key: the signature breaks, and the chain after it
			return rs
		}(), 2, []bool{false, true, true}},
		{"Dropped", []idlegrid.Receipt{good[0], good[2]}, 2, []bool{false, true}},
		{"Reordered", []idlegrid.Receipt{good[1], good[0], good[2]}, 2, []bool{true, true, true}},
		{"Rechained", resign(func(rs []idlegrid.Receipt) { rs[2].PrevHash = rs[0].Hash() }), 2, []bool{false, false, true}},
		{"OtherLease", resign(func(rs []idlegrid.Receipt) { rs[0].LeaseID = "lease_b" }), 2, []bool{true, true, false}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			errs := nodekey.VerifyReceiptChain(pub, "lease_a", tt.gpus, tt.rs)
			if len(errs) != len(tt.rs) {
				t.Fatalf("%d results for %d receipts", len(errs), len(tt.rs))
			}
			for i, err := range errs {
				if (err != nil) != tt.bad[i] {
					t.Errorf("receipt %d: %v, want failed = %v", i+1, err, tt.bad[i])
				}
			}
		})
	}
}
