package wire

import (
	"time"

	"github.com/idlegrid/idlegrid"
)

// InferenceStats is the answer of GET /v1/inference/stats.
type InferenceStats struct {
	Models []ModelStats `json:"models"`
	// Breakers are the circuit breakers that have tripped since the
	// gateway started; one that never has is closed and not listed.
	Breakers []BreakerStats `json:"breakers"`
	// Waiting is, per model, how many requests wait now for one of its
	// providers to have room; a model none wait for is not listed.
	Waiting map[string]int `json:"waiting"`
	// Providers are the nodes serving each model now, with the load and
	// record routing reads, by model then node.
	Providers []ProviderLoad `json:"providers"`
}

// ProviderLoad is one node serving one model, as the gateway's routing
// sees it now: the requests it has there, those the node's model server
// last said wait in its queue (null when it does not say, or said over
// 10 s ago), the load they make over its max concurrency, and the moving
// averages of its time to first token (milliseconds), completion tokens a
// second and share of requests answered (0 for the first two: not
// measured yet), and its circuit breaker's state.
type ProviderLoad struct {
	NodeID          string  `json:"node_id"`
	NodeName        string  `json:"node_name"`
	Model           string  `json:"model"`
	InFlight        int64   `json:"in_flight"`
	MaxConcurrency  int     `json:"max_concurrency"`
	Queued          *int64  `json:"queued"`
	Load            float64 `json:"load"`
	TTFTMS          float64 `json:"ttft_ms"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	SuccessRate     float64 `json:"success_rate"`
	Breaker         string  `json:"breaker"` // closed, open or half-open
	// TextCompletionsSkippedUntil, when set, is when text completions
	// (POST /v1/completions) may go to the provider again: it answered
	// one 404, as a chat-only model server does.
	TextCompletionsSkippedUntil *time.Time `json:"text_completions_skipped_until,omitempty"`
	// ResponsesSkippedUntil is the same for responses (POST
	// /v1/responses), which a model server from before the Responses
	// API answers 404.
	ResponsesSkippedUntil *time.Time `json:"responses_skipped_until,omitempty"`
}

// ModelStats is what renters see of a model's recent requests: latency
// and time to first token at the median and the 95th percentile, the
// median completion tokens per second, and what a million tokens cost on
// average. Times are in milliseconds.
type ModelStats struct {
	Model            string          `json:"model"`
	Requests         int64           `json:"requests"` // since the gateway started
	Window           int             `json:"window"`   // requests the figures cover
	LatencyP50MS     float64         `json:"latency_p50_ms"`
	LatencyP95MS     float64         `json:"latency_p95_ms"`
	TTFTP50MS        float64         `json:"ttft_p50_ms"`
	TTFTP95MS        float64         `json:"ttft_p95_ms"`
	TokensPerSecond  float64         `json:"tokens_per_second"`
	MicrosPerMTokens idlegrid.Micros `json:"micros_per_mtokens"` // charged per million tokens, prompt and completion together
}

// BreakerStats is one node's circuit breaker for one model: its state now
// and its moves since the gateway started. NodeName is the node's name
// while it is online, empty once it is gone. Trips counts each opening,
// from closed or from a failed half-open trial; HalfOpens each cooldown
// that ended with a trial let through; Closes each return to closed, by a
// trial or a late answer that succeeded.
type BreakerStats struct {
	NodeID    string `json:"node_id"`
	NodeName  string `json:"node_name"`
	Model     string `json:"model"`
	State     string `json:"state"` // closed, open or half-open
	Trips     int64  `json:"trips"`
	HalfOpens int64  `json:"half_opens"`
	Closes    int64  `json:"closes"`
}

// InferenceUsageList is the answer of GET /v1/inference/usage.
type InferenceUsageList struct {
	Data []*idlegrid.InferenceUsage `json:"data"`
}

// ConversationUsage is the answer of GET /v1/inference/conversations: what
// the caller's conversations hold, all together, and the most they may
// (null: no bound).
type ConversationUsage struct {
	Object   string `json:"object"` // "conversation.usage"
	Items    int64  `json:"items"`
	Chars    int64  `json:"chars"`
	MaxItems *int64 `json:"max_items"`
	MaxChars *int64 `json:"max_chars"`
}
