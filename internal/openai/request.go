package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/idlegrid/idlegrid"
)

// MaxPrefixBytes is how much of a prompt's start the sticky-routing hash
// covers: enough for a system prompt and the first turn, whose KV cache a
// model server can reuse.
const MaxPrefixBytes = 4096

// Request is what the gateway needs to know about a renter's request. The
// body itself stays as sent, apart from what Upstream changes.
type Request struct {
	Endpoint Endpoint
	Model    string
	Stream   bool
	// IncludeUsage is whether the renter asked for usage in the stream
	// (stream_options.include_usage); the gateway asks the model server
	// for it either way. A Responses stream always carries it (in its
	// response.completed event).
	IncludeUsage bool
	// MaxTokens is the completion's cap: the larger of max_tokens and
	// max_completion_tokens, since a model server may honour either (vLLM's
	// completions know only max_tokens), or a response's
	// max_output_tokens; the charge is capped by it; 0 when the renter set
	// none.
	MaxTokens int64
	// Choices is how many completions the request asks for: n (1 unless
	// set) for each prompt of a completions batch (a list of strings or of
	// token-ID lists), which the model server answers one by one.
	Choices int64
	// PromptTokens estimates the prompt's tokens (EstimateTokens over its
	// text), for reservations and for metering when the model server
	// reports no usage.
	PromptTokens int64
	// PrefixHash identifies the prompt's first MaxPrefixBytes, for sticky
	// routing; 0 when the prompt is empty.
	PrefixHash uint64
	// Provider is the request's own "provider" object, the same routing
	// object an API key may carry as its default (WithDefaults); nil when
	// absent.
	Provider *idlegrid.Routing
	// PreviousResponseID is the kept response a Responses API request
	// continues (previous_response_id); "" for none (conversation.go).
	PreviousResponseID string
	// Conversation is the kept conversation a Responses API request
	// continues and adds to (its conversation field, an ID or an object
	// with one); "" for none.
	Conversation string
	// Store is whether a Responses API request's response is to be kept
	// (store: true unless false).
	Store bool
	// Background is whether a Responses API request is to run in the
	// background, its response polled (background: true).
	Background bool
	// Truncate is whether a Responses API request says truncation auto:
	// a conversation too long to send whole is sent its latest items
	// (the gateway leaves out the oldest), and the model server may
	// truncate it further to its context window.
	Truncate bool
	// References is how many item_reference items a Responses API
	// request's input holds, which the gateway resolves to the items they
	// name (Continue) before any provider is sent it.
	References int

	body     []byte
	fields   map[string]json.RawMessage
	messages int // a chat's messages; 0 for other endpoints
	media    int // a chat's image, audio and video parts
	// besides is the JSON bytes of what else the model server makes into
	// prompt tokens: the body's fields other than the prompt and the
	// sampling parameters (tools, response_format…), and a chat's tool
	// calls. Only the reservation counts them (ReservePromptTokens).
	besides int
}

// MaxBatchPrompts is the most prompts one completions request may batch,
// as OpenAI's API allows.
const MaxBatchPrompts = 2048

// ParseRequest reads a request body for endpoint e. A body that is not a
// request of that endpoint is an EINVALID error naming the field.
func ParseRequest(e Endpoint, body []byte) (*Request, error) {
	r := &Request{Endpoint: e, body: body}
	if err := json.Unmarshal(body, &r.fields); err != nil || r.fields == nil {
		return nil, idlegrid.Invalid("body", "must be a JSON object: %v", jsonProblem(err))
	}
	if err := r.parseCommon(); err != nil {
		return nil, err
	}
	var prompt promptText
	var err error
	field := promptFields[e]
	switch e {
	case ChatCompletions:
		err = prompt.messages(r.fields[field])
	case Completions, Embeddings:
		err = prompt.prompt(field, r.fields[field])
	case Responses:
		err = r.parseResponse(&prompt)
	default:
		return nil, idlegrid.Invalid("endpoint", "unknown endpoint %q", e)
	}
	if err != nil {
		return nil, err
	}
	if e == Completions {
		if prompt.batch > MaxBatchPrompts {
			return nil, idlegrid.Invalid(field, "at most %d prompts in one request, got %d", MaxBatchPrompts, prompt.batch)
		}
		r.Choices *= int64(max(prompt.batch, 1))
	}
	r.PromptTokens = prompt.tokens()
	r.messages, r.media, r.References = prompt.nMessages, prompt.media, prompt.references
	r.besides = prompt.besides + besidesBytes(r.fields, field)
	if len(prompt.prefix) > 0 {
		h := fnv.New64a()
		h.Write([]byte(r.Model))
		h.Write(prompt.prefix)
		r.PrefixHash = h.Sum64() | 1 // never 0
	}
	return r, nil
}

// promptFields is the field that holds each endpoint's prompt.
var promptFields = map[Endpoint]string{ChatCompletions: "messages", Completions: "prompt", Embeddings: "input", Responses: "input"}

// notPrompt are the request fields a model server makes no prompt tokens
// of: the gateway's own, and the sampling and output parameters.
var notPrompt = map[string]bool{
	"model": true, "provider": true, "stream": true, "stream_options": true, "n": true,
	"max_tokens": true, "max_completion_tokens": true, "temperature": true, "top_p": true,
	"seed": true, "stop": true, "user": true, "logprobs": true, "top_logprobs": true,
	"presence_penalty": true, "frequency_penalty": true, "logit_bias": true,
	// A response's (its instructions are read as prompt text).
	"max_output_tokens": true, "instructions": true, "store": true, "metadata": true, "include": true,
	"truncation": true, "parallel_tool_calls": true, "service_tier": true, "safety_identifier": true,
	"prompt_cache_key": true, "background": true, "previous_response_id": true, "conversation": true,
}

// besidesBytes is the JSON bytes of the fields other than the prompt (at
// field) that may become prompt tokens: tools, response_format, and any
// field the gateway does not know, which it counts to be safe.
func besidesBytes(fields map[string]json.RawMessage, field string) int {
	n := 0
	for name, raw := range fields {
		if name != field && !notPrompt[name] {
			n += len(raw)
		}
	}
	return n
}

// typeProblem says what was wrong with a field's JSON, without Go's names.
func typeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "got a JSON " + te.Value
	}
	return "malformed JSON"
}

// jsonProblem says what was wrong with a value's JSON (nil: it was
// null), without Go's names: the JSON type it was, or where it broke.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case err == nil:
		return "got null"
	case errors.As(err, &te):
		return "got a JSON " + te.Value
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, se)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func (r *Request) parseCommon() error {
	if err := decodeField(r.fields, "model", &r.Model); err != nil {
		return err
	} else if r.Model == "" {
		return idlegrid.Invalid("model", "required: the model to run, e.g. one that GET /v1/models lists")
	} else if len(r.Model) > 256 {
		return idlegrid.Invalid("model", "at most 256 characters")
	}
	if err := decodeField(r.fields, "stream", &r.Stream); err != nil {
		return err
	}
	if r.Stream && r.Endpoint == Embeddings {
		return idlegrid.Invalid("stream", "embeddings cannot be streamed")
	}
	var so struct {
		IncludeUsage bool `json:"include_usage"`
	}
	if err := decodeField(r.fields, "stream_options", &so); err != nil {
		return err
	}
	r.IncludeUsage = so.IncludeUsage || r.Endpoint == Responses
	for _, f := range maxTokenFields(r.Endpoint) {
		var n *int64
		if err := decodeField(r.fields, f, &n); err != nil {
			return err
		} else if n == nil {
			continue
		} else if *n < 1 || *n > 10_000_000 {
			return idlegrid.Invalid(f, "must be between 1 and 10000000")
		}
		r.MaxTokens = max(r.MaxTokens, *n)
	}
	var n *int64
	if err := decodeField(r.fields, "n", &n); err != nil {
		return err
	} else if n != nil && r.Endpoint == Responses {
		return idlegrid.Invalid("n", "not a field of the Responses API, which answers one response a request; send a request for each")
	} else if r.Choices = 1; n != nil {
		if *n < 1 || *n > 128 {
			return idlegrid.Invalid("n", "must be between 1 and 128")
		}
		r.Choices = *n
	}
	return r.parseProvider()
}

// maxTokenFields are the fields that cap an endpoint's completion.
func maxTokenFields(e Endpoint) []string {
	if e == Responses {
		return []string{"max_output_tokens"}
	}
	return []string{"max_tokens", "max_completion_tokens"}
}

func (r *Request) parseProvider() error {
	if !present(r.fields, "provider") {
		return nil
	}
	p, err := idlegrid.ParseRouting("provider", r.fields["provider"])
	if err != nil {
		return err
	}
	r.Provider = p
	return nil
}

// present reports whether fields has name, and not as null.
func present(fields map[string]json.RawMessage, name string) bool {
	raw, ok := fields[name]
	return ok && string(raw) != "null"
}

// decodeField decodes fields[name] into v, when present and not null.
func decodeField(fields map[string]json.RawMessage, name string, v any) error {
	if !present(fields, name) {
		return nil
	}
	if err := json.Unmarshal(fields[name], v); err != nil {
		return idlegrid.Invalid(name, "has the wrong type: %s", typeProblem(err))
	}
	return nil
}

// Upstream returns the body to send to a model server: the renter's, less
// the gateway's own "provider" field, with a streamed request asking for
// usage in its last chunk, which metering needs, and a response's store
// false (the provider keeps no copy of the renter's conversation, which
// no later request could reach: each may go to another provider), and
// neither previous_response_id, conversation nor background (the
// gateway's: it sends the conversation whole, Continue, and runs a
// background response itself, waiting for the whole answer). A
// request that needs none of these is sent byte for byte as it came; the
// changes are spliced into the body (SetField, DeleteField), so its other
// fields keep their bytes and order.
func (r *Request) Upstream() ([]byte, error) {
	_, hasProvider := r.fields["provider"]
	_, hasPrevious := r.fields["previous_response_id"]
	_, hasBackground := r.fields["background"]
	_, hasConversation := r.fields["conversation"]
	hasPrevious = hasPrevious && r.Endpoint == Responses
	hasBackground = hasBackground && r.Endpoint == Responses
	hasConversation = hasConversation && r.Endpoint == Responses
	addUsage := r.Stream && !r.IncludeUsage
	unstore := r.Endpoint == Responses && string(r.fields["store"]) != "false"
	if !hasProvider && !hasPrevious && !hasBackground && !hasConversation && !addUsage && !unstore {
		return r.body, nil
	}
	body := r.body
	var err error
	for own, has := range map[string]bool{"provider": hasProvider, "previous_response_id": hasPrevious, "background": hasBackground, "conversation": hasConversation} {
		if !has {
			continue
		}
		if body, err = DeleteField(body, own); err != nil {
			return nil, err
		}
	}
	if unstore {
		if body, err = SetField(body, "store", []byte("false")); err != nil {
			return nil, err
		}
	}
	if addUsage {
		so := map[string]json.RawMessage{}
		if present(r.fields, "stream_options") {
			if err := json.Unmarshal(r.fields["stream_options"], &so); err != nil {
				return nil, idlegrid.Invalid("stream_options", "%s", jsonProblem(err))
			}
		}
		so["include_usage"] = json.RawMessage("true")
		b, err := json.Marshal(so)
		if err != nil {
			return nil, err
		}
		if body, err = SetField(body, "stream_options", b); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// Body returns the request's body as the renter sent it.
func (r *Request) Body() []byte { return r.body }
