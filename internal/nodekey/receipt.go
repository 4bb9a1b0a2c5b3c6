package nodekey

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"math"

	"github.com/idlegrid/idlegrid"
)

// SignReceipt signs r's canonical form (idlegrid.Receipt.Canonical) with
// the node's key and sets r.Signature.
func SignReceipt(priv ed25519.PrivateKey, r *idlegrid.Receipt) {
	r.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(priv, r.Canonical()))
}

// ErrBadReceiptSignature is what VerifyReceipt returns for a receipt whose
// signature is not the node's signature of it.
var ErrBadReceiptSignature = errors.New("the receipt's signature is not the node's signature of it")

// VerifyReceipt checks that r.Signature is pub's signature of r's
// canonical form: that the node signed the receipt, and nobody changed it
// since.
func VerifyReceipt(pub ed25519.PublicKey, r *idlegrid.Receipt) error {
	if len(pub) != ed25519.PublicKeySize {
		return errors.New("not an ed25519 public key")
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(r.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, r.Canonical(), sig) {
		return ErrBadReceiptSignature
	}
	return nil
}

// VerifyReceiptChain checks a lease's receipts as exported, without
// trusting whoever exported them: each must be signed by pub, be for
// leaseID, follow the one before it in the list (Seq 1, 2, 3…, PrevHash the
// hash of the one before, starting no earlier than it ended) and claim no
// more GPU-seconds than gpus GPUs could run in its interval. It returns one
// result per receipt: nil for a receipt that passes.
func VerifyReceiptChain(pub ed25519.PublicKey, leaseID string, gpus int, rs []idlegrid.Receipt) []error {
	// The lease as far as the receipts can be checked against it; its time
	// limit is the server's to enforce.
	l := &idlegrid.Lease{ID: leaseID, GPUUUIDs: make([]string, gpus), LimitSeconds: math.MaxInt64 / int64(max(gpus, 1))}
	out := make([]error, len(rs))
	for i := range rs {
		var prev *idlegrid.Receipt
		if i > 0 {
			prev = &rs[i-1]
		}
		if err := VerifyReceipt(pub, &rs[i]); err != nil {
			out[i] = fmt.Errorf("receipt %d: %w", rs[i].Seq, err)
		} else if err := rs[i].CheckAgainst(l, prev); err != nil {
			out[i] = err
		}
	}
	return out
}
