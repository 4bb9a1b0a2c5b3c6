package idlegrid

import (
	"context"
	"math/bits"
	"regexp"
	"time"
)

// This file holds the nouns of inference: the models a node serves through
// the OpenAI-compatible gateway (internal/gateway), at a price per million
// tokens, and the record of each request the gateway metered.

// TokensPerPriceUnit is the number of tokens a model's price is quoted for:
// prices are per million tokens.
const TokensPerPriceUnit = 1_000_000

// ModelOffer is one model a node serves from a local OpenAI-compatible
// server (vLLM, Ollama, llama.cpp, SGLang, TGI), as its agent advertises it
// while the server answers its health checks.
type ModelOffer struct {
	// Name is what renters ask for in a request's "model", e.g.
	// "llama-3.1-8b-instruct".
	Name                   string `json:"name"`
	InputMicrosPerMTokens  Micros `json:"input_micros_per_mtokens"`  // per million prompt tokens
	OutputMicrosPerMTokens Micros `json:"output_micros_per_mtokens"` // per million completion tokens
	MaxConcurrency         int    `json:"max_concurrency"`           // requests the node serves at once
	ContextTokens          int    `json:"context_tokens,omitempty"`  // the model's context window, when known
	Embeddings             bool   `json:"embeddings,omitempty"`      // serves /v1/embeddings
}

var modelNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`)

// MaxModelsPerNode bounds an offer's model list.
const MaxModelsPerNode = 64

// Validate checks a model offer, naming fields under prefix.
func (m *ModelOffer) Validate(prefix string) error {
	const maxPrice = 10_000 * MicrosPerUnit // per million tokens
	switch {
	case !modelNameRE.MatchString(m.Name):
		return Invalid(prefix+".name", "must be 1-128 letters, digits and . _ : / @ + -, starting with a letter or digit")
	case m.InputMicrosPerMTokens < 0 || m.InputMicrosPerMTokens > maxPrice:
		return Invalid(prefix+".input_micros_per_mtokens", "must be between 0 and %s per million tokens", maxPrice)
	case m.OutputMicrosPerMTokens < 0 || m.OutputMicrosPerMTokens > maxPrice:
		return Invalid(prefix+".output_micros_per_mtokens", "must be between 0 and %s per million tokens", maxPrice)
	case m.MaxConcurrency < 1 || m.MaxConcurrency > 100_000:
		return Invalid(prefix+".max_concurrency", "must be between 1 and 100000")
	case m.ContextTokens < 0:
		return Invalid(prefix+".context_tokens", "must not be negative")
	}
	return nil
}

// validateModels checks an offer's models: each valid, no name twice.
func validateModels(ms []ModelOffer) error {
	if len(ms) > MaxModelsPerNode {
		return Invalid("offer.models", "at most %d models", MaxModelsPerNode)
	}
	seen := map[string]bool{}
	for i := range ms {
		if err := ms[i].Validate("offer.models." + ms[i].Name); err != nil {
			return err
		}
		if seen[ms[i].Name] {
			return Invalid("offer.models", "model %q listed twice", ms[i].Name)
		}
		seen[ms[i].Name] = true
	}
	return nil
}

// TokenCost is what tokens cost at pricePerMTokens, rounded down to the
// micro. It is the one place where a token price meets a token count.
func TokenCost(pricePerMTokens Micros, tokens int64) Micros {
	if pricePerMTokens <= 0 || tokens <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(pricePerMTokens), uint64(tokens))
	if hi >= TokensPerPriceUnit { // the quotient would not fit
		return Micros(1<<63 - 1)
	}
	q, _ := bits.Div64(hi, lo, TokensPerPriceUnit)
	if q > 1<<63-1 {
		return Micros(1<<63 - 1)
	}
	return Micros(q)
}

// PerMTokens is what charged paid for a million tokens, on average over
// tokens, rounded toward zero to the micro: TokenCost turned around, for
// statistics and statements. The product charged × a million is taken in
// 128 bits, since a month of charges ($9.3M and up) times a million does
// not fit in an int64; a quotient that does not fit saturates. It is 0 for
// no tokens.
func PerMTokens(charged Micros, tokens int64) Micros {
	if tokens <= 0 || charged == 0 {
		return 0
	}
	neg, mag := charged < 0, uint64(charged)
	if neg {
		mag = -mag // the magnitude, even for math.MinInt64
	}
	hi, lo := bits.Mul64(mag, TokensPerPriceUnit)
	q := uint64(1<<63 - 1)
	if hi < uint64(tokens) { // else the quotient would not fit
		q, _ = bits.Div64(hi, lo, uint64(tokens))
		q = min(q, 1<<63-1)
	}
	if neg {
		return -Micros(q)
	}
	return Micros(q)
}

// Cost is what a request with in prompt and out completion tokens costs at
// m's prices: each part rounded down to the micro, then added, at most
// the largest Micros (never wrapping to a negative cost).
func (m *ModelOffer) Cost(in, out int64) Micros {
	a, b := TokenCost(m.InputMicrosPerMTokens, in), TokenCost(m.OutputMicrosPerMTokens, out)
	if a > 1<<63-1-b {
		return Micros(1<<63 - 1)
	}
	return a + b
}

// UsageSource says where a request's token counts came from.
type UsageSource string

const (
	UsageUpstream UsageSource = "upstream" // the model server's own usage field
	UsageCounted  UsageSource = "counted"  // estimated by the gateway: the model server gave none
)

// InferenceUsage is the record of one metered gateway request: who asked,
// who served, the tokens, the charge and how fast it went.
type InferenceUsage struct {
	ID         string `json:"id"` // the gateway's request ID
	RenterID   string `json:"renter_id"`
	KeyID      string `json:"key_id"`
	ProviderID string `json:"provider_id"`
	NodeID     string `json:"node_id"`
	Model      string `json:"model"`
	Endpoint   string `json:"endpoint"` // chat/completions, completions or embeddings
	Stream     bool   `json:"stream"`

	InputTokens  int64       `json:"input_tokens"`
	OutputTokens int64       `json:"output_tokens"`
	Source       UsageSource `json:"source"`
	ChargeMicros Micros      `json:"charge_micros"` // what the renter paid
	FeeMicros    Micros      `json:"fee_micros"`    // the platform's share of it

	LatencyMicros int64 `json:"latency_micros"` // request in to last byte out
	TTFTMicros    int64 `json:"ttft_micros"`    // request in to first byte out
	Attempts      int   `json:"attempts"`       // providers tried
	Status        int   `json:"status"`         // HTTP status the renter got

	CreatedAt time.Time `json:"created_at"`
	// TransferID is the ledger posting that charged the request: its own,
	// or its batch's (docs/gateway.md); "" when it was free. The store
	// records it; what the gateway hands the store leaves it empty.
	TransferID string `json:"transfer_id,omitempty"`
}

// Validate checks a usage record before it is stored.
func (u *InferenceUsage) Validate() error {
	switch {
	case u.ID == "":
		return Invalid("inference_usage.id", "required")
	case u.RenterID == "":
		return Invalid("inference_usage.renter_id", "required")
	case u.Model == "":
		return Invalid("inference_usage.model", "required")
	case u.InputTokens < 0 || u.OutputTokens < 0:
		return Invalid("inference_usage.tokens", "must not be negative")
	case u.ChargeMicros < 0 || u.FeeMicros < 0 || u.FeeMicros > u.ChargeMicros:
		return Invalid("inference_usage.charge_micros", "charge and fee must not be negative, and the fee at most the charge")
	case u.CreatedAt.IsZero():
		return Invalid("inference_usage.created_at", "required")
	}
	return nil
}

// InferenceCharge is one metered request as it is stored: its record and
// the transfer of its charge (nil when it costs nothing).
type InferenceCharge struct {
	Usage    *InferenceUsage
	Transfer *Transfer
}

// InferenceStore keeps the gateway's usage records. internal/sqlstore
// implements it beside idlegrid.Store.
type InferenceStore interface {
	// RecordInference stores each charge's record and posts its charge in
	// one transaction: all of them as one posting (ledger.InferenceBatch)
	// when that leaves the balances as posting each would, otherwise each
	// transfer behind a savepoint of its own, so that one that fails does
	// not undo the others. errs[i] is charge i's error (EPAYMENT when the
	// renter's balance cannot cover it). A record whose ID is stored
	// already is not stored again, nor charged, and is no error. Each
	// stored record names the posting that charged it (TransferID).
	RecordInference(ctx context.Context, cs []InferenceCharge) (errs []error)
	// InferenceTotals adds up the requests made in [f.From, f.To) of f's
	// renter, by model, or of f's provider, by node and model (exactly
	// one of the two is set), in that order.
	InferenceTotals(ctx context.Context, f SettlementFilter) ([]*InferenceTotal, error)
	// ListInferenceUsage returns the records f selects, newest first (then
	// by ID). A Before that is not one of the account's records is
	// EINVALID, naming before.
	ListInferenceUsage(ctx context.Context, f UsageFilter) ([]*InferenceUsage, error)
}

// UsageFilter selects an account's metered gateway requests, as renter or
// as provider.
type UsageFilter struct {
	AccountID string
	// Before, when set, lists the records older than this one, in the
	// list's order: the last record of a page asks for the next page.
	Before string
	Limit  int
}

// TransferInference charges a renter for one metered gateway request:
// renter available → provider pending + platform fees.
const TransferInference TransferKind = "inference"

// The gateway's requests to an agent, over the agent's session: POST
// InferencePath + "chat/completions" (or "completions", "embeddings"),
// naming the offered model in the header ModelHeader. The body is the
// renter's request as the model server should see it. The agent's answer
// carries, in ModelQueueHeader, how many requests the model's server held
// waiting when the agent last read its metrics, when it knows.
const (
	InferencePath    = "/agent/v1/inference/"
	ModelHeader      = "X-Idlegrid-Model"
	ModelQueueHeader = "X-Idlegrid-Model-Queue"
)
