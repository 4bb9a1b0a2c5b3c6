package wire

import "github.com/idlegrid/idlegrid"

// BondRequest is the body of POST /v1/bonds (a provider stakes its own
// payable earnings; ProviderID empty) and of an admin's deposit for a
// provider (ProviderID set), and of POST /v1/bonds/release. Sent with an
// Idempotency-Key header.
type BondRequest struct {
	ProviderID   string          `json:"provider_id,omitempty"`
	AmountMicros idlegrid.Micros `json:"amount_micros"`
}

// Disputes is the answer of GET /v1/disputes.
type Disputes struct {
	Disputes []*idlegrid.Dispute `json:"disputes"`
}

// Verifications is the answer of GET /v1/verifications.
type Verifications struct {
	Verifications []*idlegrid.Verification `json:"verifications"`
}

// ResolveDisputeRequest is the body of POST /v1/disputes/{id}/uphold and
// POST /v1/disputes/{id}/dismiss: why.
type ResolveDisputeRequest struct {
	Resolution string `json:"resolution"`
}
