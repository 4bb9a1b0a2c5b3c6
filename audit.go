package idlegrid

import (
	"context"
	"encoding/json"
	"time"
)

// The audit log is a transparency log (RFC 6962) of every ledger posting,
// receipt and lease transition: internal/audit builds its Merkle tree,
// signs its heads and checks its proofs; docs/trust.md describes it.

// AuditStore keeps the audit log's entries. The store appends an entry for
// every transfer it posts, every receipt it stores and every lease
// transition it makes, in the transaction that writes it, so a change is
// logged exactly when it commits. Entries are numbered 0, 1, 2… in commit
// order without gaps, and never changed or removed.
type AuditStore interface {
	// AuditSize returns the number of entries in the log.
	AuditSize(ctx context.Context) (uint64, error)
	// AuditLeafHashes returns the leaf hashes of the entries at indices
	// [start, end), in order; EINVALID when the log has fewer than end.
	AuditLeafHashes(ctx context.Context, start, end uint64) ([][32]byte, error)
	// ListAuditEntries returns the entries f selects, in log order.
	ListAuditEntries(ctx context.Context, f AuditFilter) ([]*AuditEntry, error)
	// AppendAudit logs entries that record no other change of the store
	// (a level change, the trust policy in force), in order, in one
	// transaction, and returns the index of the first. Index and LeafHash
	// are filled in.
	AppendAudit(ctx context.Context, entries []*AuditEntry) (first uint64, err error)

	// AuditSigner returns the key the log's tree heads are signed with, as
	// recorded by the first server that signed them; the zero AuditSigner
	// when none has been recorded yet.
	AuditSigner(ctx context.Context) (AuditSigner, error)
	// ClaimAuditSigner records s as the log's signer unless one is already
	// recorded, and returns the one recorded: s, or the earlier claim.
	// Users hold heads signed with that key, so it is never replaced.
	ClaimAuditSigner(ctx context.Context, s AuditSigner) (AuditSigner, error)
}

// AuditSigner is the public key that signs the audit log's tree heads
// (internal/audit.PublicKeyString), and since when.
type AuditSigner struct {
	PublicKey string    `json:"public_key"`
	Since     time.Time `json:"since"`
}

// IsZero reports whether no signer is recorded.
func (s AuditSigner) IsZero() bool { return s.PublicKey == "" }

// AuditEntry is one entry of the audit log as the store keeps it. Kind,
// Subjects, Payload and At are the entry (internal/audit.Entry), from
// which anyone can recompute LeafHash.
type AuditEntry struct {
	Index    uint64          `json:"index"` // the leaf's index in the log's tree
	Kind     string          `json:"kind"`  // e.g. "ledger.posting", "receipt", "lease.transition"
	Subjects []string        `json:"subjects"`
	Payload  json.RawMessage `json:"payload"`
	At       time.Time       `json:"at"`
	LeafHash [32]byte        `json:"-"`
}

// AuditFilter selects entries of the audit log.
type AuditFilter struct {
	// Subject selects the entries that name it (an account, a lease, a
	// job, a node); "" selects every entry.
	Subject string
	// From is the first index to return.
	From uint64
	// Before bounds the indices returned, e.g. to a tree size; 0: no bound.
	Before uint64
	Limit  int
}
