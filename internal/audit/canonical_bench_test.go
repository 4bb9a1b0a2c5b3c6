package audit

import (
	"encoding/json"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// BenchmarkCanonicalize canonicalizes the payload of a placement's escrow
// posting, the entry every placement logs, with Canonicalize and, as the
// baseline in the same run, by decoding into Go values and encoding again
// (what Canonicalize did before).
//
// Run: go test -run '^$' -bench Canonicalize -benchmem ./internal/audit
func BenchmarkCanonicalize(b *testing.B) {
	tr := &idlegrid.Transfer{
		ID: "trf_01JDX9Q2W3E4R5T6Y7U8I9O0P1", IdempotencyKey: "hold:job_01JDX9Q2W3E4R5T6Y7U8I9O0P2", Kind: idlegrid.TransferHold,
		LeaseID: "lea_01JDX9Q2W3E4R5T6Y7U8I9O0P3", Memo: "escrow for 2 GPUs × 1.5 h at $2.500000/GPU-hour",
		Entries: []idlegrid.Entry{
			{Account: idlegrid.RenterAvailable("rnt_01JDX9Q2W3E4R5T6Y7U8I9O0P4"), Amount: -7_500_000},
			{Account: idlegrid.RenterHeld("rnt_01JDX9Q2W3E4R5T6Y7U8I9O0P4"), Amount: 7_500_000},
		},
		CreatedAt: t0,
	}
	raw, err := json.Marshal(tr)
	if err != nil {
		b.Fatal(err)
	}
	for _, bb := range []struct {
		name string
		f    func([]byte) ([]byte, error)
	}{
		{"bytes", func(r []byte) ([]byte, error) { return Canonicalize(r) }},
		{"baseline-decode", canonicalizeByDecoding},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bb.f(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
