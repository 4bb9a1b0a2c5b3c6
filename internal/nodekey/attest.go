package nodekey

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"

	"github.com/idlegrid/idlegrid"
)

// SignAttestation signs a's message (idlegrid.Attestation.Message: the
// node, the time and the fingerprint's hash) with the node's key and sets
// a.Signature.
func SignAttestation(priv ed25519.PrivateKey, a *idlegrid.Attestation) {
	a.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(priv, a.Message()))
}

// ErrBadAttestationSignature is what VerifyAttestation returns for an
// attestation the node's key did not sign as it stands.
var ErrBadAttestationSignature = errors.New("the attestation's signature is not the node's signature of this fingerprint")

// VerifyAttestation checks that a.Signature is pub's signature of a's
// message: that the node signed this fingerprint, and nobody changed it since.
func VerifyAttestation(pub ed25519.PublicKey, a *idlegrid.Attestation) error {
	if len(pub) != ed25519.PublicKeySize {
		return errors.New("not an ed25519 public key")
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(a.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, a.Message(), sig) {
		return ErrBadAttestationSignature
	}
	return nil
}
