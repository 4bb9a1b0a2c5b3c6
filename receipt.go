package idlegrid

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// Receipt is a node's signed account of how much of a lease it ran in one
// interval. The agent cuts one per lease every receipt interval, and a last
// one when the workload exits; each names the hash of the one before, so the
// receipts of a lease form a chain that cannot be reordered, dropped from
// the middle or rewritten without breaking a signature. The renter is
// charged from them (see docs/billing.md, "Usage receipts").
type Receipt struct {
	LeaseID string `json:"lease_id"`
	Seq     int64  `json:"seq"` // 1, 2, 3… within the lease
	// Start and End bound the interval, on the node's clock, to the
	// microsecond. Intervals of one lease never overlap.
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	GPUSeconds int64     `json:"gpu_seconds"`  // the lease's GPUs × the seconds its workload ran in the interval
	AvgUtilPct int       `json:"avg_util_pct"` // mean utilisation of the lease's GPUs, 0..100
	EnergyWh   int64     `json:"energy_wh"`    // the GPUs' energy in the interval; 0 when unknown
	// PrevHash is Hash() of the previous receipt of the lease; "" for Seq 1.
	PrevHash string `json:"prev_hash"`
	// Signature is the node key's ed25519 signature of Canonical(), in
	// base64 (see nodekey.SignReceipt).
	Signature string `json:"signature"`
}

// receiptTag starts every receipt's canonical form. It differs from the
// prefix of signed agent requests, so a signature of one can never pass for
// the other.
const receiptTag = "idlegrid-receipt-v1"

// Canonical is the byte string a receipt's signature and hash cover: every
// field but Signature, one "name=value" line each, in this order, each line
// ending in "\n":
//
//	idlegrid-receipt-v1
//	lease=<LeaseID>
//	seq=<Seq, decimal>
//	start=<Start, unix microseconds, decimal>
//	end=<End, unix microseconds, decimal>
//	gpu_seconds=<GPUSeconds, decimal>
//	avg_util_pct=<AvgUtilPct, decimal>
//	energy_wh=<EnergyWh, decimal>
//	prev=<PrevHash, lower-case hex, or nothing>
//
// Decimals have no sign unless negative and no leading zeros. Validate
// refuses a lease ID with a control character, so no value can forge a line.
// The encoding never changes for version 1; a new field means a new tag.
func (r *Receipt) Canonical() []byte {
	b := make([]byte, 0, 256)
	b = append(b, receiptTag+"\n"...)
	b = append(b, "lease="+r.LeaseID+"\n"...)
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"seq", r.Seq}, {"start", r.Start.UnixMicro()}, {"end", r.End.UnixMicro()},
		{"gpu_seconds", r.GPUSeconds}, {"avg_util_pct", int64(r.AvgUtilPct)}, {"energy_wh", r.EnergyWh},
	} {
		b = append(b, f.name+"="...)
		b = strconv.AppendInt(b, f.v, 10)
		b = append(b, '\n')
	}
	return append(b, "prev="+r.PrevHash+"\n"...)
}

// Hash is the lower-case hex SHA-256 of Canonical(): what the next receipt
// of the lease names as its PrevHash.
func (r *Receipt) Hash() string {
	sum := sha256.Sum256(r.Canonical())
	return hex.EncodeToString(sum[:])
}

// Interval is the length of the receipt's interval.
func (r *Receipt) Interval() time.Duration { return r.End.Sub(r.Start) }

// maxReceiptLeaseID bounds a receipt's lease ID.
const maxReceiptLeaseID = 128

// Validate checks what a receipt says on its own, without its lease: the
// fields are present and in range, and the interval is positive. It does not
// check the signature (nodekey.VerifyReceipt does) nor the lease's limits
// and chain (CheckAgainst does).
func (r *Receipt) Validate() error {
	switch {
	case r.LeaseID == "" || len(r.LeaseID) > maxReceiptLeaseID:
		return Invalid("receipt.lease_id", "required, at most %d characters", maxReceiptLeaseID)
	case hasControl(r.LeaseID):
		return Invalid("receipt.lease_id", "must not contain control characters")
	case r.Seq < 1:
		return Invalid("receipt.seq", "must be 1 or more, got %d", r.Seq)
	case r.Start.IsZero() || r.End.IsZero():
		return Invalid("receipt.interval", "receipt %d needs a start and an end", r.Seq)
	case !r.End.After(r.Start):
		return Invalid("receipt.interval", "receipt %d: the interval must be positive: end %s is not after start %s",
			r.Seq, r.End.Format(time.RFC3339Nano), r.Start.Format(time.RFC3339Nano))
	case r.GPUSeconds < 0:
		return Invalid("receipt.gpu_seconds", "receipt %d: must not be negative, got %d", r.Seq, r.GPUSeconds)
	case r.AvgUtilPct < 0 || r.AvgUtilPct > 100:
		return Invalid("receipt.avg_util_pct", "receipt %d: must be between 0 and 100, got %d", r.Seq, r.AvgUtilPct)
	case r.EnergyWh < 0:
		return Invalid("receipt.energy_wh", "receipt %d: must not be negative (0 when unknown), got %d", r.Seq, r.EnergyWh)
	case r.Seq == 1 && r.PrevHash != "":
		return Invalid("receipt.prev_hash", "receipt 1 has no previous receipt; must be empty")
	case r.Seq > 1 && !IsHexSHA256(r.PrevHash):
		return Invalid("receipt.prev_hash", "receipt %d: must be the hex SHA-256 of receipt %d", r.Seq, r.Seq-1)
	}
	return nil
}

// CheckAgainst checks r against its lease and the receipt before it (nil
// for the first): it is the lease's, it follows prev in sequence and chain
// and starts no earlier than prev ended, and it claims no more GPU-seconds
// than the lease's GPUs could run in its interval, nor than the lease's
// time limit allows. It calls Validate first.
func (r *Receipt) CheckAgainst(l *Lease, prev *Receipt) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.LeaseID != l.ID {
		return Invalid("receipt.lease_id", "receipt %d is for lease %s, not %s", r.Seq, r.LeaseID, l.ID)
	}
	if err := r.follows(prev); err != nil {
		return err
	}
	gpus := int64(len(l.GPUUUIDs))
	if limit := gpus * l.LimitSeconds; r.GPUSeconds > limit {
		return Invalid("receipt.gpu_seconds", "receipt %d claims %d GPU-seconds, more than the lease's %d GPUs × %d s limit",
			r.Seq, r.GPUSeconds, gpus, l.LimitSeconds)
	}
	// A Duration is at most 292 years, so GPUs × its microseconds cannot
	// overflow for any node's GPU count.
	if iv := r.Interval(); r.GPUSeconds > gpus*iv.Microseconds()/1e6 {
		return Invalid("receipt.gpu_seconds", "receipt %d claims %d GPU-seconds, more than %d GPUs × its %s interval",
			r.Seq, r.GPUSeconds, gpus, iv)
	}
	return nil
}

// follows checks that r comes right after prev.
func (r *Receipt) follows(prev *Receipt) error {
	if prev == nil {
		if r.Seq != 1 {
			return Invalid("receipt.seq", "receipt %d skips ahead: the lease has no receipts yet, so the next is 1", r.Seq)
		}
		return nil
	}
	switch {
	case r.Seq != prev.Seq+1:
		return Invalid("receipt.seq", "receipt %d is out of sequence: the next is %d", r.Seq, prev.Seq+1)
	case r.PrevHash != prev.Hash():
		return Invalid("receipt.prev_hash", "receipt %d does not chain to receipt %d: its prev_hash is not that receipt's hash", r.Seq, prev.Seq)
	case r.Start.Before(prev.End):
		return Invalid("receipt.interval", "receipt %d starts at %s, before receipt %d ended at %s: intervals must not overlap",
			r.Seq, r.Start.Format(time.RFC3339Nano), prev.Seq, prev.End.Format(time.RFC3339Nano))
	}
	return nil
}

func hasControl(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// IsHexSHA256 reports whether s is a SHA-256 hash in lowercase hex, as
// idlegrid writes them.
func IsHexSHA256(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// LeaseReceipts is the export of a lease's receipts: every receipt the
// server accepted, in order, with the public key of the node that signed
// them, so that the renter and the provider can check each signature and
// the chain themselves rather than take the server's word.
type LeaseReceipts struct {
	LeaseID       string    `json:"lease_id"`
	NodeID        string    `json:"node_id"`
	NodePublicKey string    `json:"node_public_key"` // base64 ed25519
	GPUs          int       `json:"gpus"`            // the lease's GPUs
	Receipts      []Receipt `json:"receipts"`
	GPUSeconds    int64     `json:"gpu_seconds"` // the receipts' sum
}
