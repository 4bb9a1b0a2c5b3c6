// Package audit is idlegrid's transparency log: an append-only Merkle tree,
// as in Certificate Transparency (RFC 6962, RFC 9162), over every ledger
// posting, receipt and lease transition, so that a renter or a provider can
// check, without trusting the operator, that their own entries are in the log
// and that the log was only ever appended to.
//
// The pieces, in the order a reader meets them:
//
//	Entry            what is logged, and its canonical leaf encoding (entry.go)
//	HashLeaf, HashChildren
//	                 SHA-256(0x00‖leaf) and SHA-256(0x01‖left‖right) (hash.go)
//	LeafStore, Tree  the leaf hashes and the tree heads and proofs computed
//	                 over them (tree.go, proofs.go)
//	SignedTreeHead   a tree size and root signed with the log's ed25519 key
//	                 (treehead.go)
//	VerifyInclusion, VerifyConsistency
//	                 the verifiers of RFC 9162 §2.1.3.2 and §2.1.4.2, which
//	                 share no code with the tree that made the proofs (verify.go)
//	Check            what `idlegrid audit verify` runs over what a user has
//	                 collected: heads, consistency proofs, entries (check.go)
//
// The package is pure except for Tree, which reads and appends through the
// LeafStore it is given, and LoadOrCreateKey, which reads a key file.
// docs/trust.md describes the log for users.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// HashSize is the size of every hash in the log: SHA-256.
const HashSize = sha256.Size

// Hash is a leaf hash, an interior node hash or a root hash. It is written
// as 64 lower-case hex digits in JSON and text, like receipt hashes.
type Hash [HashSize]byte

// Domain separation prefixes of RFC 6962 §2.1: a leaf can never pass for an
// interior node, nor the other way round.
const (
	leafPrefix = 0x00
	nodePrefix = 0x01
)

// HashLeaf returns the leaf hash of a leaf's encoding: SHA-256(0x00 ‖ leaf).
func HashLeaf(leaf []byte) Hash {
	h := sha256.New()
	h.Write([]byte{leafPrefix})
	h.Write(leaf)
	var out Hash
	h.Sum(out[:0])
	return out
}

// HashChildren returns the hash of an interior node from the hashes of its
// children: SHA-256(0x01 ‖ left ‖ right).
func HashChildren(left, right Hash) Hash { return nodeHash(left[:], right[:]) }

func nodeHash(left, right []byte) Hash {
	h := sha256.New()
	h.Write([]byte{nodePrefix})
	h.Write(left)
	h.Write(right)
	var out Hash
	h.Sum(out[:0])
	return out
}

// EmptyRoot is the root hash of the empty tree: SHA-256 of nothing.
func EmptyRoot() Hash { return sha256.Sum256(nil) }

// String returns h in lower-case hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// MarshalText writes h in lower-case hex.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText reads 64 hex digits.
func (h *Hash) UnmarshalText(b []byte) error {
	v, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = v
	return nil
}

// ParseHash reads a hash written as 64 hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*HashSize {
		return h, fmt.Errorf("a hash is %d hex digits, got %d characters", 2*HashSize, len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("a hash is %d hex digits: %v", 2*HashSize, err)
	}
	return h, nil
}
