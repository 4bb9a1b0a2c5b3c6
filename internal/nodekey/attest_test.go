package nodekey_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

func TestVerifyAttestation(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signed := func() *idlegrid.Attestation {
		a := &idlegrid.Attestation{
			NodeID: "node_1", SignedAt: time.UnixMilli(1_800_000_000_000),
			Fingerprint: idlegrid.FingerprintOf([]idlegrid.GPU{{UUID: "GPU-a", Model: "H100-80GB", VRAMMB: 81920, VBIOSVersion: "96.00.74.00.01"}}),
		}
		nodekey.SignAttestation(priv, a)
		return a
	}
	tests := []struct {
		name   string
		tamper func(a *idlegrid.Attestation)
		key    ed25519.PublicKey
		ok     bool
	}{
		{"Valid", func(*idlegrid.Attestation) {}, pub, true},
		{"OtherKey", func(*idlegrid.Attestation) {}, otherPub, false},
		{"VBIOSChanged", func(a *idlegrid.Attestation) { a.Fingerprint.GPUs[0].VBIOSVersion = "96.00.99.00.01" }, pub, false},
		{"ModelChanged", func(a *idlegrid.Attestation) { a.Fingerprint.GPUs[0].Model = "T4" }, pub, false},
		{"OtherNode", func(a *idlegrid.Attestation) { a.NodeID = "node_2" }, pub, false},
		{"OtherTime", func(a *idlegrid.Attestation) { a.SignedAt = a.SignedAt.Add(time.Millisecond) }, pub, false},
		{"GarbageSignature", func(a *idlegrid.Attestation) { a.Signature = "not base64!" }, pub, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := signed()
			tt.tamper(a)
			err := nodekey.VerifyAttestation(tt.key, a)
			if got := err == nil; got != tt.ok {
				t.Fatalf("VerifyAttestation ok = %v (%v), want %v", got, err, tt.ok)
			}
			if err != nil && tt.key != nil && len(tt.key) == ed25519.PublicKeySize && !errors.Is(err, nodekey.ErrBadAttestationSignature) {
				t.Fatalf("err = %v, want ErrBadAttestationSignature", err)
			}
		})
	}
}
