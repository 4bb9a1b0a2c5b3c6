// Package openai holds the parts of the OpenAI HTTP API's wire format that
// the gateway reads and writes: the request fields that route and meter a
// call (model, stream, max tokens, the prompt, the OpenRouter-style
// "provider" object), usage, the error body, the model list, and the
// server-sent events of a streamed answer.
//
// A request is never decoded into a full model of the API: ParseRequest
// keeps every field it does not need as the renter sent it, so that a field
// added to the API tomorrow still reaches the model server.
package openai

// Endpoint names an OpenAI-compatible endpoint the gateway serves, as the
// path after /v1/.
type Endpoint string

const (
	ChatCompletions Endpoint = "chat/completions"
	Completions     Endpoint = "completions"
	Embeddings      Endpoint = "embeddings"
	// Responses is OpenAI's Responses API. The gateway keeps its answers
	// and sends each provider the whole conversation, so that no provider
	// keeps one (Request.Upstream sends store false; conversation.go).
	Responses Endpoint = "responses"
)

// Usage is the usage field of an answer (and of a stream's last chunk).
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// ErrorBody is OpenAI's error format.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of an ErrorBody. Code is the machine-readable
// reason; Param names the request field at fault.
type ErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// Error types, as OpenAI names them.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypePermission     = "permission_error"
	TypeNotFound       = "not_found_error"
	TypeRateLimit      = "rate_limit_error"
	TypeQuota          = "insufficient_quota"
	TypeServer         = "server_error"
	TypeUnavailable    = "service_unavailable"
)

// Model is one entry of GET /v1/models, with the gateway's own extension:
// the cheapest prices and the number of providers serving it.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "model"
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// Pricing is the range of prices among the healthy providers, per
	// million tokens, in micros.
	Pricing   *ModelPricing `json:"pricing,omitempty"`
	Providers int           `json:"providers"`
}

// ModelPricing is the cheapest price of a model per million tokens.
type ModelPricing struct {
	InputMicrosPerMTokens  int64 `json:"input_micros_per_mtokens"`
	OutputMicrosPerMTokens int64 `json:"output_micros_per_mtokens"`
}

// ModelList is the answer of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"` // "list"
	Data   []Model `json:"data"`
}
