package wire

import "github.com/idlegrid/idlegrid/internal/audit"

// The audit log's answers are made of internal/audit's types, which are
// pure (no I/O, no server): heads, proofs and entries are exactly what
// `idlegrid audit verify` checks.

// AuditHead is GET /v1/audit/head: the log's signed tree head now, and the
// public key the server signs with. A verifier must not take that key
// from the server it checks: it compares it with the key the operator
// published (see docs/trust.md).
type AuditHead struct {
	Head   audit.SignedTreeHead `json:"head"`
	LogKey string               `json:"log_key"` // base64 ed25519
}

// AuditEntries is a page of GET /v1/audit/entries: the caller's entries,
// each with its inclusion proof against Head. Next is the "from" of the
// next page; absent on the last.
type AuditEntries struct {
	Head    audit.SignedTreeHead `json:"head"`
	Entries []audit.EntryProof   `json:"entries"`
	Next    *uint64              `json:"next,omitempty"`
}
