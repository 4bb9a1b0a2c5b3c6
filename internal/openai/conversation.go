package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/idlegrid/idlegrid"
)

// A conversation of the Responses API, as the gateway keeps it. OpenAI
// keeps each response (unless the request says store false), and a
// request may continue from one (previous_response_id): the model then
// sees the input and output items of each response of the conversation,
// the first first, before the request's own input; the instructions of
// the earlier ones are not carried over. The gateway keeps the responses
// itself (idlegrid.KeptResponse), since the next request may go to
// another provider, and sends each provider the conversation whole
// (Continue), asking it to keep nothing (Upstream). The response object
// the renter gets names the gateway's ID, and the store and
// previous_response_id the renter sent (Echo), not the provider's.

// InputItems returns the request's own input as a JSON list of input
// items: a list as sent, a string as one user message.
func (r *Request) InputItems() (json.RawMessage, error) {
	raw := bytes.TrimSpace(r.fields["input"])
	if len(raw) > 0 && raw[0] == '[' {
		return raw, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, idlegrid.Invalid("input", "must be a string or a list of input items")
	}
	return json.Marshal([]userMessage{{Role: "user", Content: s}})
}

type userMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Continue returns the request r continues: the same, but for its input,
// which is history (the items of the conversation so far, the first
// first) followed by own, r's own input items (ItemList of InputItems,
// each item_reference replaced by the item it names), and without
// previous_response_id or conversation. r's PreviousResponseID,
// Conversation, Store and Background carry over; its estimates are the
// whole conversation's.
func (r *Request) Continue(history, own []json.RawMessage) (*Request, error) {
	input, err := json.Marshal(append(history[:len(history):len(history)], own...))
	if err != nil {
		return nil, idlegrid.Invalid("input", "an item of the conversation is not JSON: %v", err)
	}
	body, err := SetField(r.body, "input", input)
	if err != nil {
		return nil, err
	}
	for _, field := range []string{"previous_response_id", "conversation"} {
		if body, err = DeleteField(body, field); err != nil {
			return nil, err
		}
	}
	c, err := ParseRequest(r.Endpoint, body)
	if err != nil {
		return nil, err
	}
	c.PreviousResponseID, c.Conversation, c.Store, c.Background = r.PreviousResponseID, r.Conversation, r.Store, r.Background
	return c, nil
}

// ItemList returns the items of list, a JSON list of input items
// (InputItems).
func ItemList(list json.RawMessage) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(list, &items); err != nil {
		return nil, idlegrid.Invalid("input", "must be a string or a list of input items")
	}
	return items, nil
}

// OutputItems returns the output items of a response object.
func OutputItems(response []byte) ([]json.RawMessage, error) {
	out := gjson.GetBytes(response, "output")
	if !out.IsArray() {
		return nil, fmt.Errorf("the response has no list of output items")
	}
	var items []json.RawMessage
	for _, it := range out.Array() {
		items = append(items, json.RawMessage(it.Raw))
	}
	return items, nil
}

// ServerFailed reports whether obj, a response object, failed for the
// model server's own error: status failed, with an error code that is
// not the request's (invalid_prompt, an image the request gave that
// cannot be read), or with none, since a model server that fails without
// saying why gives no reason to blame the request.
func ServerFailed(obj []byte) bool {
	if gjson.GetBytes(obj, "status").Str != "failed" {
		return false
	}
	code := gjson.GetBytes(obj, "error.code").Str
	return !strings.HasPrefix(code, "invalid_") && !strings.Contains(code, "image")
}

// Echoed is what a response object, as a provider answered it, says of
// the renter's request once echoed (Echo): what the provider never saw.
type Echoed struct {
	ID       string // the gateway's, "resp_…"
	Store    bool
	Previous string // previous_response_id; "" for none: null
	// Conversation is the conversation it continued; "" for none: null.
	Conversation string
	// Background: the response runs in the background, and says so.
	Background bool
}

// Echo returns obj, a response object as a provider answered it, with the
// gateway's ID, and the store, previous_response_id, conversation and
// background of the renter's request, which the provider never saw.
func Echo(obj []byte, e Echoed) ([]byte, error) {
	prev, conv := []byte("null"), []byte("null")
	if e.Previous != "" {
		prev, _ = json.Marshal(e.Previous)
	}
	if e.Conversation != "" {
		conv, _ = json.Marshal(map[string]string{"id": e.Conversation})
	}
	quoted, _ := json.Marshal(e.ID)
	out, err := SetField(obj, "id", quoted)
	if err == nil {
		out, err = SetField(out, "store", strconv.AppendBool(nil, e.Store))
	}
	if err == nil {
		out, err = SetField(out, "previous_response_id", prev)
	}
	if err == nil {
		out, err = SetField(out, "conversation", conv)
	}
	if err == nil && e.Background {
		out, err = SetField(out, "background", []byte("true"))
	}
	return out, err
}
