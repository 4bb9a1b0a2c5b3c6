package audit

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// TreeHead is the state of the log at one moment: how many entries it held
// and the root hash over them.
type TreeHead struct {
	Size     uint64 `json:"size"`
	RootHash Hash   `json:"root_hash"`
	// Timestamp is when the head was signed; the signature covers it to the
	// millisecond.
	Timestamp time.Time `json:"timestamp"`
}

// SignedTreeHead is a tree head signed with the log's ed25519 key. Two
// signed heads of the same size with different roots, or a later head that
// does not extend an earlier one, prove that the log was rewritten.
type SignedTreeHead struct {
	TreeHead
	Signature []byte `json:"signature"` // ed25519 over TreeHead.Canonical(); base64 in JSON
}

// treeHeadTag starts every tree head's canonical form, so that a head's
// signature can never pass for a request's or a receipt's.
const treeHeadTag = "idlegrid-tree-head-v1"

// Canonical is the byte string a tree head's signature covers, one line
// each, each ending in "\n":
//
//	idlegrid-tree-head-v1
//	size=<Size, decimal>
//	root=<RootHash, lower-case hex>
//	timestamp=<Timestamp, unix milliseconds, decimal>
func (h *TreeHead) Canonical() []byte {
	b := make([]byte, 0, 128)
	b = append(b, treeHeadTag+"\nsize="...)
	b = strconv.AppendUint(b, h.Size, 10)
	b = append(b, "\nroot="+h.RootHash.String()+"\ntimestamp="...)
	b = strconv.AppendInt(b, h.Timestamp.UnixMilli(), 10)
	return append(b, '\n')
}

// SignTreeHead signs h with the log's key. The timestamp is truncated to the
// millisecond, which is all the signature covers.
func SignTreeHead(key ed25519.PrivateKey, h TreeHead) SignedTreeHead {
	h.Timestamp = time.UnixMilli(h.Timestamp.UnixMilli()).UTC()
	return SignedTreeHead{TreeHead: h, Signature: ed25519.Sign(key, h.Canonical())}
}

// Verify checks the head's signature with the log's public key.
func (s *SignedTreeHead) Verify(logKey ed25519.PublicKey) error {
	if len(logKey) != ed25519.PublicKeySize {
		return errors.New("audit: the log key is not an ed25519 public key")
	}
	if !ed25519.Verify(logKey, s.Canonical(), s.Signature) {
		return fmt.Errorf("%w: the tree head of size %d is not signed by the log key", ErrVerification, s.Size)
	}
	return nil
}
