// Package wire holds the JSON bodies of the /v1 HTTP API that are not
// domain types themselves: request envelopes, list wrappers and the error
// body. Both sides of the wire use it (internal/httpapi answers with these
// types, the public client decodes them), so the two cannot drift apart.
//
// It imports nothing but the domain package, so the agent and the client
// stay free of the server's dependencies.
package wire

import (
	"time"

	"github.com/idlegrid/idlegrid"
)

// HeaderIdempotencyKey makes a retried money-moving call (a top-up, a
// payout request, a payout settled or rejected) a no-op, and a job's
// submission sent again answer with the job the first one made.
const HeaderIdempotencyKey = "Idempotency-Key"

// HeaderIdempotentReplayed is "true" on the answer to a submission sent
// again with its Idempotency-Key: the job is the one the first made.
const HeaderIdempotentReplayed = "Idempotent-Replayed"

// ErrorBody is every error answer:
//
//	{"error":{"code":"invalid","field":"job.gpus","message":"job.gpus: must be between 1 and 16"}}
//
// Message is the whole caller-safe text, field included, so that a person
// reading raw JSON needs nothing else. An input with several fields at
// fault lists each in problems, the first being the error's own field:
//
//	{"error":{"code":"invalid","field":"job.gpus","message":"job.gpus: must be between 1 and 16; job.tier: …",
//	  "problems":[{"field":"job.gpus","message":"job.gpus: must be between 1 and 16"},{"field":"job.tier","message":"job.tier: …"}]}}
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of an ErrorBody.
type ErrorDetail struct {
	Code     string         `json:"code"`
	Field    string         `json:"field,omitempty"`
	Message  string         `json:"message"`
	Problems []ErrorProblem `json:"problems,omitempty"` // when more than one field is at fault
}

// ErrorProblem is one field at fault; Message starts with the field, as
// ErrorDetail's does.
type ErrorProblem struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Health answers GET /v1/healthz.
type Health struct {
	OK       bool `json:"ok"`
	Protocol int  `json:"protocol"` // the agent protocol version the server speaks
}

// CreateAccountRequest is the body of POST /v1/accounts.
type CreateAccountRequest struct {
	Name string        `json:"name"`
	Role idlegrid.Role `json:"role"`
}

// CreateAccountResponse carries the new account, its first API key and that
// key's secret, which is shown only this once.
type CreateAccountResponse struct {
	Account *idlegrid.Account `json:"account"`
	APIKey  *idlegrid.APIKey  `json:"api_key"`
	Secret  string            `json:"secret"`
}

// Accounts answers GET /v1/accounts.
type Accounts struct {
	Accounts []*idlegrid.Account `json:"accounts"`
}

// Me answers GET /v1/me: the caller's account, its fields at the top
// level so that a client that decodes an idlegrid.Account still reads it,
// and the API key calling with its access, which says what the key may do
// of what the account's role allows (a dashboard hides what it may not).
type Me struct {
	*idlegrid.Account
	KeyID     string          `json:"key_id,omitempty"`
	KeyAccess idlegrid.Access `json:"key_access,omitempty"`
}

// CreateAPIKeyRequest is the body of POST /v1/keys.
type CreateAPIKeyRequest struct {
	Name   string          `json:"name"`
	Access idlegrid.Access `json:"access,omitempty"` // "": all
}

// CreateAPIKeyResponse carries the new key and its secret, shown only once.
type CreateAPIKeyResponse struct {
	APIKey *idlegrid.APIKey `json:"api_key"`
	Secret string           `json:"secret"`
}

// APIKeys answers GET /v1/keys.
type APIKeys struct {
	APIKeys []*idlegrid.APIKey `json:"api_keys"`
}

// CreateJoinTokenRequest is the body of POST /v1/join-tokens.
type CreateJoinTokenRequest struct {
	Name       string `json:"name"`
	MaxUses    int    `json:"max_uses"`    // 0: unlimited until it expires
	TTLSeconds int64  `json:"ttl_seconds"` // how long the token may be used
}

// CreateJoinTokenResponse carries the new token and its secret, shown only once.
type CreateJoinTokenResponse struct {
	JoinToken *idlegrid.JoinToken `json:"join_token"`
	Secret    string              `json:"secret"`
}

// JoinTokens answers GET /v1/join-tokens.
type JoinTokens struct {
	JoinTokens []*idlegrid.JoinToken `json:"join_tokens"`
}

// Nodes answers GET /v1/nodes.
type Nodes struct {
	Nodes []*idlegrid.Node `json:"nodes"`
	// FreeGPUs is, by node ID, how many of its GPUs a job could take now
	// (its window open, no lease holding them); a node the market does not
	// hold now (lost, in quarantine) is left out.
	FreeGPUs map[string]int `json:"free_gpus"`
}

// Jobs answers GET /v1/jobs.
type Jobs struct {
	Jobs []*idlegrid.Job `json:"jobs"`
}

// Leases answers GET /v1/leases.
type Leases struct {
	Leases []*idlegrid.Lease `json:"leases"`
}

// LeaseDetail answers GET /v1/leases/{id}: the lease and its history.
type LeaseDetail struct {
	Lease  *idlegrid.Lease        `json:"lease"`
	Events []*idlegrid.LeaseEvent `json:"events"`
}

// Logs answers GET /v1/leases/{id}/logs.
type Logs struct {
	Lines []idlegrid.LogLine `json:"lines"`
}

// TopUpRequest is the body of POST /v1/accounts/{id}/topup. The
// Idempotency-Key header is required with it.
type TopUpRequest struct {
	AmountMicros idlegrid.Micros `json:"amount_micros"`
}

// RegistryLoginRequest is the body of PUT /v1/registry-logins/{registry}.
type RegistryLoginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// RegistryLogins answers GET /v1/registry-logins.
type RegistryLogins struct {
	Logins []*idlegrid.RegistryLogin `json:"logins"`
}

// Transfers answers GET /v1/transfers.
type Transfers struct {
	Transfers []*idlegrid.Transfer `json:"transfers"`
}

// Explanation answers GET /v1/jobs/{id}/explain: why a queued job waits.
// It mirrors market.Explanation field for field, so that the client need
// not import the engine; TestWire_MatchesEngine keeps the two in step.
type Explanation struct {
	JobID          string         `json:"job_id"`
	Nodes          int            `json:"nodes"`
	Fits           int            `json:"fits"`
	Rejections     map[string]int `json:"rejections"`
	Summary        string         `json:"summary"`
	CheapestAsks   []AskQuote     `json:"cheapest_asks"`
	Reservation    *Reservation   `json:"reservation,omitempty"`
	EstimatedStart time.Time      `json:"estimated_start,omitzero"`
	EstimateNote   string         `json:"estimate_note"`
	Advice         []string       `json:"advice,omitempty"`
}

// AskQuote is one node's ask in an Explanation.
type AskQuote struct {
	NodeID              string          `json:"node_id"`
	NodeName            string          `json:"node_name"`
	Region              string          `json:"region"`
	GPUModel            string          `json:"gpu_model"`
	AskMicrosPerGPUHour idlegrid.Micros `json:"ask_micros_per_gpu_hour"`
	Reliability         float64         `json:"reliability"`
	Score               float64         `json:"score"`
	Blocker             string          `json:"blocker,omitempty"`
}

// Reservation is the GPUs held for a waiting gold or silver job.
type Reservation struct {
	JobID      string         `json:"job_id"`
	Start      time.Time      `json:"start"`
	Nodes      []ReservedNode `json:"nodes"`
	Preempting bool           `json:"preempting,omitempty"`
}

// ReservedNode is one node's share of a Reservation.
type ReservedNode struct {
	NodeID string `json:"node_id"`
	GPUs   int    `json:"gpus"`
}

// MarketStat answers GET /v1/market, one per GPU model and region.
type MarketStat struct {
	GPUModel     string                            `json:"gpu_model"`
	Region       string                            `json:"region"`
	SupplyGPUs   int                               `json:"supply_gpus"`
	FreeGPUs     int                               `json:"free_gpus"`
	QueuedJobs   int                               `json:"queued_jobs"`
	QueuedGPUs   int                               `json:"queued_gpus"`
	FillRate     float64                           `json:"fill_rate"`
	Prices       []PricePoint                      `json:"prices"`
	SuggestedAsk map[idlegrid.Tier]idlegrid.Micros `json:"suggested_ask_micros_per_gpu_hour"`
}

// PricePoint is one clearing price.
type PricePoint struct {
	At                    time.Time       `json:"at"`
	Tier                  idlegrid.Tier   `json:"tier"`
	PriceMicrosPerGPUHour idlegrid.Micros `json:"price_micros_per_gpu_hour"`
	GPUs                  int             `json:"gpus"`
	JobID                 string          `json:"job_id"`
}
