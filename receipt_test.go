package idlegrid_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

var r0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// goldenReceipt is the receipt whose canonical form is in testdata.
func goldenReceipt() idlegrid.Receipt {
	return idlegrid.Receipt{
		LeaseID: "lease_k3xq7abc", Seq: 2,
		Start: r0, End: r0.Add(60*time.Second + 250*time.Microsecond),
		GPUSeconds: 120, AvgUtilPct: 87, EnergyWh: 11,
		PrevHash:  strings.Repeat("ab", 32),
		Signature: "not part of the canonical form",
	}
}

// TestReceipt_Canonical pins the canonical encoding: a change to it would
// make every receipt ever signed unverifiable. Run with -update only when
// the tag in the first line changes too.
func TestReceipt_Canonical(t *testing.T) {
	r := goldenReceipt()
	got := hex.EncodeToString(r.Canonical()) + "\n" + r.Hash() + "\n"
	path := filepath.Join("testdata", "receipt-v1.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("canonical form and hash changed:\ngot  %q\nwant %q", got, want)
	}
	text := "idlegrid-receipt-v1\nlease=lease_k3xq7abc\nseq=2\nstart=1772366400000000\nend=1772366460000250\n" +
		"gpu_seconds=120\navg_util_pct=87\nenergy_wh=11\nprev=" + strings.Repeat("ab", 32) + "\n"
	if string(r.Canonical()) != text {
		t.Errorf("Canonical() =\n%s\nwant\n%s", r.Canonical(), text)
	}
	r.Signature = "another signature"
	if r.Hash() != goldenHash(t) {
		t.Error("the hash changed with the signature; it must cover every field but the signature")
	}
	json := r
	json.Start = json.Start.In(time.FixedZone("CET", 3600)) // the same instant, shown elsewhere
	if json.Hash() != r.Hash() {
		t.Error("the hash depends on the time zone of the interval")
	}
}

func goldenHash(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "receipt-v1.golden"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// TestReceipt_tamper checks that changing any signed field of a receipt
// breaks its signature.
func TestReceipt_tamper(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := goldenReceipt()
	sig := ed25519.Sign(priv, r.Canonical())
	if !ed25519.Verify(pub, r.Canonical(), sig) {
		t.Fatal("the untouched receipt does not verify")
	}
	for _, tt := range []struct {
		name   string
		tamper func(r *idlegrid.Receipt)
	}{
		{"LeaseID", func(r *idlegrid.Receipt) { r.LeaseID = "lease_other" }},
		{"Seq", func(r *idlegrid.Receipt) { r.Seq++ }},
		{"Start", func(r *idlegrid.Receipt) { r.Start = r.Start.Add(time.Microsecond) }},
		{"End", func(r *idlegrid.Receipt) { r.End = r.End.Add(time.Second) }},
		{"GPUSeconds", func(r *idlegrid.Receipt) { r.GPUSeconds = 121 }},
		{"AvgUtilPct", func(r *idlegrid.Receipt) { r.AvgUtilPct = 88 }},
		{"EnergyWh", func(r *idlegrid.Receipt) { r.EnergyWh = 0 }},
		{"PrevHash", func(r *idlegrid.Receipt) { r.PrevHash = strings.Repeat("cd", 32) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := goldenReceipt()
			tt.tamper(&got)
			if ed25519.Verify(pub, got.Canonical(), sig) {
				t.Errorf("the signature still verifies after changing %s", tt.name)
			}
			if got.Hash() == r.Hash() {
				t.Errorf("the hash did not change with %s", tt.name)
			}
		})
	}
}

func TestReceipt_Validate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(r *idlegrid.Receipt)
		field  string
	}{
		{"Valid", func(r *idlegrid.Receipt) {}, ""},
		{"FirstWithoutPrev", func(r *idlegrid.Receipt) { r.Seq, r.PrevHash = 1, "" }, ""},
		{"NoLease", func(r *idlegrid.Receipt) { r.LeaseID = "" }, "receipt.lease_id"},
		{"LeaseWithNewline", func(r *idlegrid.Receipt) { r.LeaseID = "lease_a\nseq=9" }, "receipt.lease_id"},
		{"SeqZero", func(r *idlegrid.Receipt) { r.Seq = 0 }, "receipt.seq"},
		{"NoStart", func(r *idlegrid.Receipt) { r.Start = time.Time{} }, "receipt.interval"},
		{"EmptyInterval", func(r *idlegrid.Receipt) { r.End = r.Start }, "receipt.interval"},
		{"Backwards", func(r *idlegrid.Receipt) { r.End = r.Start.Add(-time.Second) }, "receipt.interval"},
		{"NegativeGPUSeconds", func(r *idlegrid.Receipt) { r.GPUSeconds = -1 }, "receipt.gpu_seconds"},
		{"UtilOver100", func(r *idlegrid.Receipt) { r.AvgUtilPct = 101 }, "receipt.avg_util_pct"},
		{"NegativeEnergy", func(r *idlegrid.Receipt) { r.EnergyWh = -1 }, "receipt.energy_wh"},
		{"FirstWithPrev", func(r *idlegrid.Receipt) { r.Seq = 1 }, "receipt.prev_hash"},
		{"LaterWithoutPrev", func(r *idlegrid.Receipt) { r.PrevHash = "" }, "receipt.prev_hash"},
		{"PrevNotHex", func(r *idlegrid.Receipt) { r.PrevHash = strings.Repeat("AB", 32) }, "receipt.prev_hash"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := goldenReceipt()
			tt.change(&r)
			wantOKOrField(t, r.Validate(), tt.field)
		})
	}
}

// wantOKOrField checks that err is nil when field is "", else an EINVALID
// naming field.
func wantOKOrField(tb testing.TB, err error, field string) {
	tb.Helper()
	if field != "" {
		wantField(tb, err, field)
	} else if err != nil {
		tb.Fatalf("error = %v, want none", err)
	}
}

func TestReceipt_CheckAgainst(t *testing.T) {
	l := &idlegrid.Lease{ID: "lease_k3xq7abc", GPUUUIDs: []string{"GPU-0", "GPU-1"}, LimitSeconds: 3600}
	first := idlegrid.Receipt{LeaseID: l.ID, Seq: 1, Start: r0, End: r0.Add(time.Minute), GPUSeconds: 120}
	next := func(change func(r *idlegrid.Receipt)) idlegrid.Receipt {
		r := idlegrid.Receipt{LeaseID: l.ID, Seq: 2, Start: first.End, End: first.End.Add(time.Minute),
			GPUSeconds: 120, PrevHash: first.Hash()}
		change(&r)
		return r
	}
	for _, tt := range []struct {
		name  string
		r     idlegrid.Receipt
		prev  *idlegrid.Receipt
		field string
	}{
		{"First", first, nil, ""},
		{"Next", next(func(r *idlegrid.Receipt) {}), &first, ""},
		{"PartlyIdle", next(func(r *idlegrid.Receipt) { r.GPUSeconds = 7 }), &first, ""},
		{"AfterAGap", next(func(r *idlegrid.Receipt) { r.Start, r.End = r.Start.Add(time.Hour), r.End.Add(time.Hour) }), &first, ""},
		{"OtherLease", next(func(r *idlegrid.Receipt) { r.LeaseID = "lease_other" }), &first, "receipt.lease_id"},
		{"FirstIsNot1", next(func(r *idlegrid.Receipt) {}), nil, "receipt.seq"},
		{"SkippedSeq", next(func(r *idlegrid.Receipt) { r.Seq = 3 }), &first, "receipt.seq"},
		{"RepeatedSeq", next(func(r *idlegrid.Receipt) { r.Seq = 1; r.PrevHash = "" }), &first, "receipt.seq"},
		{"BrokenChain", next(func(r *idlegrid.Receipt) { r.PrevHash = strings.Repeat("0", 64) }), &first, "receipt.prev_hash"},
		{"Overlap", next(func(r *idlegrid.Receipt) { r.Start = first.End.Add(-time.Second) }), &first, "receipt.interval"},
		{"Inflated", next(func(r *idlegrid.Receipt) { r.GPUSeconds = 121 }), &first, "receipt.gpu_seconds"},
		{"OverLimit", next(func(r *idlegrid.Receipt) { r.End = r.Start.Add(3 * time.Hour); r.GPUSeconds = 7201 }), &first, "receipt.gpu_seconds"},
		{"Invalid", next(func(r *idlegrid.Receipt) { r.AvgUtilPct = -1 }), &first, "receipt.avg_util_pct"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantOKOrField(t, tt.r.CheckAgainst(l, tt.prev), tt.field)
		})
	}
}
