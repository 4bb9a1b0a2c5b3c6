package wire

import "github.com/idlegrid/idlegrid"

// PayoutRequest is the body of POST /v1/payouts, sent with an
// Idempotency-Key header.
type PayoutRequest struct {
	AmountMicros idlegrid.Micros `json:"amount_micros"`
}

// ResolvePayoutRequest is the body of POST /v1/payouts/{id}/settle (Reason
// is the payment's reference) and POST /v1/payouts/{id}/reject (why),
// sent with an Idempotency-Key header.
type ResolvePayoutRequest struct {
	Reason string `json:"reason"`
}

// Payouts answers GET /v1/payouts.
type Payouts struct {
	Payouts []*idlegrid.Payout `json:"payouts"`
}

// Notices answers GET /v1/notices.
type Notices struct {
	Notices []*idlegrid.Notice `json:"notices"`
}

// SpendLimitRequest is the body of PUT /v1/accounts/{id}/spend-limit and
// PUT /v1/keys/{id}/spend-limit: the most the scope may spend in a calendar
// month (UTC).
type SpendLimitRequest struct {
	LimitMicros idlegrid.Micros `json:"limit_micros"`
}

// SpendLimits answers GET /v1/spend-limits: what the account spent this
// month, and its limits with what each scope used.
type SpendLimits struct {
	Month  string                       `json:"month"`
	Spend  idlegrid.Spend               `json:"spend"`
	Limits []*idlegrid.SpendLimitStatus `json:"limits"`
}

// Statement formats of GET /v1/statements.
const (
	FormatJSON = "json"
	FormatCSV  = "csv"
)
