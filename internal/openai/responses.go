package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idlegrid/idlegrid"
)

// The Responses API (POST /v1/responses), as the gateway serves it. The
// gateway keeps responses itself and continues a conversation from one
// (conversation.go) or from a kept conversation (its conversation field),
// and runs a background response itself, to be polled (background.go in
// internal/gateway); an item_reference names an item it keeps (the
// gateway resolves it). What else OpenAI keeps it does not: prompt
// templates. It refuses those, saying how to send the same request whole,
// and asks the provider to keep nothing (Request.Upstream sends store
// false).

// parseResponse reads a response request's prompt (its instructions and
// its input) and what it asks of the kept responses.
func (r *Request) parseResponse(p *promptText) error {
	if err := r.unkept(); err != nil {
		return err
	}
	if err := decodeField(r.fields, "previous_response_id", &r.PreviousResponseID); err != nil {
		return err
	} else if len(r.PreviousResponseID) > 256 {
		return idlegrid.Invalid("previous_response_id", "at most 256 characters: the ID of a response POST /v1/responses answered")
	}
	if err := r.parseConversation(); err != nil {
		return err
	}
	if err := r.parseTruncation(); err != nil {
		return err
	}
	store := true
	if err := decodeField(r.fields, "store", &store); err != nil {
		return err
	}
	r.Store = store
	if err := decodeField(r.fields, "background", &r.Background); err != nil {
		return err
	} else if r.Background && !r.Store {
		return idlegrid.Invalid("background", "needs store true: a background response is read back from where it is kept (GET /v1/responses/{id})")
	}
	var instructions string
	if err := decodeField(r.fields, "instructions", &instructions); err != nil {
		return err
	}
	if instructions != "" {
		p.nMessages++ // a system message
		p.add(instructions)
		p.mark("\x00")
	}
	return p.responseInput(r.fields["input"])
}

// parseConversation reads a response request's conversation: its ID, or
// an object with one.
func (r *Request) parseConversation() error {
	if !present(r.fields, "conversation") {
		return nil
	}
	if raw := bytes.TrimSpace(r.fields["conversation"]); raw[0] == '{' {
		var c struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return idlegrid.Invalid("conversation.id", "has the wrong type: %s", typeProblem(err))
		} else if c.ID == "" {
			return idlegrid.Invalid("conversation.id", "required: the ID of a conversation POST /v1/conversations answered")
		}
		r.Conversation = c.ID
	} else if err := json.Unmarshal(raw, &r.Conversation); err != nil {
		return idlegrid.Invalid("conversation", "must be a conversation's ID, or an object with its id")
	}
	switch {
	case r.Conversation == "" || len(r.Conversation) > 256:
		return idlegrid.Invalid("conversation", "must be the ID of a conversation POST /v1/conversations answered (1 to 256 characters)")
	case r.PreviousResponseID != "":
		return idlegrid.Invalid("conversation", "cannot be given with previous_response_id: a response continues either a conversation or an earlier response")
	}
	return nil
}

// parseTruncation reads a response request's truncation: auto, or
// disabled (as when absent).
func (r *Request) parseTruncation() error {
	var truncation string
	if err := decodeField(r.fields, "truncation", &truncation); err != nil {
		return err
	}
	switch truncation {
	case "", "disabled":
	case "auto":
		r.Truncate = true
	default:
		return idlegrid.Invalid("truncation", "must be auto or disabled, got %q", truncation)
	}
	return nil
}

// unkept refuses the fields of a response request that need what the
// gateway does not keep.
func (r *Request) unkept() error {
	if present(r.fields, "prompt") {
		return idlegrid.Invalid("prompt", "not supported: prompt templates are not kept; send the template's text in instructions and input")
	}
	return nil
}

// responseInput reads a response's input: a string, or a list of items.
// A message (an item with a role) counts as a chat message does; a tool
// call's output as text; any other item (a tool call, a reasoning item)
// by its JSON bytes, as a chat's tool calls do.
func (p *promptText) responseInput(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return idlegrid.Invalid("input", "required: a string, or a list of input items")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return idlegrid.Invalid("input", "%s", jsonProblem(err))
		}
		p.nMessages++
		p.add(s)
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return idlegrid.Invalid("input", "must be a string or a list of input items")
	} else if len(items) == 0 {
		return idlegrid.Invalid("input", "must not be empty")
	}
	for i, item := range items {
		if err := p.responseItem(fmt.Sprintf("input[%d]", i), item); err != nil {
			return err
		}
	}
	return nil
}

// responseItem reads one item of a response's input.
func (p *promptText) responseItem(field string, raw json.RawMessage) error {
	var it struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Output  json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(raw, &it); err != nil {
		return idlegrid.Invalid(field, "must be an input item: an object with a type, or a message with a role and content")
	}
	switch {
	case it.Type == "item_reference":
		var ref struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &ref) != nil || ref.ID == "" || len(ref.ID) > 256 {
			return idlegrid.Invalid(field+".id", "required: the ID of the item referred to (1 to 256 characters)")
		}
		p.references++
	case it.Role != "":
		p.nMessages++
		p.mark(it.Role)
		p.mark("\x00")
		if err := p.content(field+".content", it.Content); err != nil {
			return err
		}
		p.mark("\x00")
	case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
		return p.content(field+".output", it.Output)
	case it.Type == "":
		return idlegrid.Invalid(field+".type", "required: the item's type, or a role for a message")
	default:
		p.besides += len(raw)
	}
	return nil
}

// responseAnswer is the part of a Responses API answer, whole or one
// event of its stream, that metering reads.
type responseAnswer struct {
	Type     string          `json:"type"` // an event's; "" for a whole answer
	Delta    json.RawMessage `json:"delta"`
	Usage    *responseUsage  `json:"usage"`
	Output   []responseItem  `json:"output"`
	Response *struct {
		Usage *responseUsage `json:"usage"`
	} `json:"response"` // a stream's last event's: the whole response, usage and all
}

// responseItem is an output item of a response: a message's text parts,
// a reasoning item's, or a tool call's arguments.
type responseItem struct {
	Arguments string `json:"arguments"`
	Content   []struct {
		Text string `json:"text"`
	} `json:"content"`
}

// responseUsage is a response's usage, as the Responses API names it.
type responseUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// addResponse meters a whole response, or one event of a streamed one. Of
// a stream it reads the text of the *.delta events (its text, reasoning
// and tool calls' arguments as generated) and the usage of the last
// event (response.completed, response.incomplete or response.failed);
// the events that repeat the text whole (*.done, the last one) add
// nothing, or an honest stream's text would count several times over
// towards the most it may be charged (Request.MostCompletionTokens).
func (m *Metered) addResponse(payload []byte) {
	var a responseAnswer
	if json.Unmarshal(payload, &a) != nil {
		m.GeneratedBytes += len(payload) // unread, so all of it may be text
		return
	}
	switch {
	case a.Type == "":
		m.GeneratedBytes += keyText(payload, "output")
		m.responseUsage(a.Usage)
		for _, it := range a.Output {
			m.CompletionBytes += len(it.Arguments)
			for _, c := range it.Content {
				m.CompletionBytes += len(c.Text)
			}
		}
	case strings.HasSuffix(a.Type, ".delta") && !strings.Contains(a.Type, "audio"):
		m.GeneratedBytes += keyText(payload, "delta")
		var s string
		if json.Unmarshal(a.Delta, &s) == nil {
			m.CompletionBytes += len(s)
		}
	case a.Type == "response.completed" || a.Type == "response.incomplete" || a.Type == "response.failed":
		m.Done = true
		if a.Response != nil {
			m.responseUsage(a.Response.Usage)
		}
	}
}

// responseUsage takes u, when given, as the answer's usage.
func (m *Metered) responseUsage(u *responseUsage) {
	if u != nil {
		m.Usage = &Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
	}
}

// CheckItem checks raw, one item of a conversation's items
// (/v1/conversations), as a response's input item is checked; field names
// it in the error. A conversation keeps items whole: an item_reference is
// refused.
func CheckItem(field string, raw json.RawMessage) error {
	var p promptText
	if err := p.responseItem(field, raw); err != nil {
		return err
	} else if p.references > 0 {
		return idlegrid.Invalid(field+".type", "a conversation keeps items whole: send the item an item_reference names, not the reference")
	}
	return nil
}
