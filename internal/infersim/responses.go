package infersim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid/internal/backoff"
)

// The simulated server's Responses API (POST /v1/responses), as vLLM
// serves it: one message of filler words, whole, or streamed as the
// events that open the message, its text's deltas, and the events that
// close it, the last with the usage. It keeps no response (store is
// ignored), as vLLM does by default.

// responseInput is a response's input as the simulated server counts it:
// a string, or a list of items: messages (a role and content, a string or
// a list of parts) and tool calls' outputs; other items count nothing.
type responseInput struct{ tokens int }

func (in *responseInput) UnmarshalJSON(b []byte) error {
	var text string
	if json.Unmarshal(b, &text) == nil {
		in.tokens = countWords(text)
		return nil
	}
	var items []struct {
		Role    string         `json:"role"`
		Type    string         `json:"type"`
		Content messageContent `json:"content"`
		Output  messageContent `json:"output"`
	}
	if err := json.Unmarshal(b, &items); err != nil {
		return errors.New("input must be a string or a list of input items")
	}
	for _, it := range items {
		in.tokens += it.Content.tokens + it.Output.tokens
	}
	return nil
}

// respond answers a response, whole or streamed.
func (p *provider) respond(w http.ResponseWriter, r *http.Request, req *chatRequest, fault string, prompt, completion int, ttft, decode time.Duration) bool {
	switch fault {
	case fault429, fault500, faultStall:
		return p.whole(w, r, req, fault, prompt, completion, 0) // its error, as for a chat
	}
	id := p.answerID(req)
	if !req.Stream {
		if !backoff.Sleep(r.Context(), ttft+decode) {
			return false
		}
		if fault == faultDrop {
			panic(http.ErrAbortHandler)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, req.responseJSON(id, words(completion), prompt, completion))
		return true
	}
	return p.streamResponse(w, r, req, fault, id, prompt, completion, ttft, decode)
}

// streamResponse streams a response: its opening events at ttft, its
// text's deltas spread evenly over decode, then the closing events.
func (p *provider) streamResponse(w http.ResponseWriter, r *http.Request, req *chatRequest, fault, id string, prompt, completion int, ttft, decode time.Duration) bool {
	if !backoff.Sleep(r.Context(), ttft) {
		return false
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	seq := 0
	event := func(typ, fields string) {
		fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, fields)
		seq++
	}
	item := `"item_id":` + strconv.Quote(messageID(id)) + `,"output_index":0,"content_index":0`
	event("response.created", `"response":`+req.responseJSON(id, "", 0, -1))
	event("response.output_item.added", `"output_index":0,"item":{"id":`+strconv.Quote(messageID(id))+`,"type":"message","role":"assistant","status":"in_progress","content":[]}`)
	event("response.content_part.added", item+`,"part":{"type":"output_text","text":"","annotations":[]}`)
	chunks := min(completion, maxStreamChunks)
	for i := range chunks {
		if i > 0 && !backoff.Sleep(r.Context(), decode/time.Duration(chunks-1)) {
			return false
		}
		n := completion/chunks + boolInt(i < completion%chunks)
		event("response.output_text.delta", item+`,"delta":`+strconv.Quote(words(n)))
		if rc.Flush() != nil {
			return false
		}
		if fault == faultDrop && i == chunks/2 {
			panic(http.ErrAbortHandler)
		}
	}
	text := strconv.Quote(words(completion))
	event("response.output_text.done", item+`,"text":`+text)
	event("response.content_part.done", item+`,"part":{"type":"output_text","text":`+text+`,"annotations":[]}`)
	event("response.output_item.done", `"output_index":0,"item":`+messageItem(id, words(completion)))
	end := "response.completed"
	if req.finishReason() == "length" {
		end = "response.incomplete"
	}
	event(end, `"response":`+req.responseJSON(id, words(completion), prompt, completion))
	return true
}

// responseJSON is the response object: its message of text, finished or
// cut at the request's limit, and its usage; a completion of -1 is one
// still in progress, with no output yet.
func (r *chatRequest) responseJSON(id, text string, prompt, completion int) string {
	status, output, usage := "in_progress", "[]", "null"
	if completion >= 0 {
		status, output = "completed", "["+messageItem(id, text)+"]"
		usage = fmt.Sprintf(`{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d}`, prompt, completion, prompt+completion)
	}
	incomplete := "null"
	if completion >= 0 && r.finishReason() == "length" {
		status, incomplete = "incomplete", `{"reason":"max_output_tokens"}`
	}
	return fmt.Sprintf(`{"id":%q,"object":"response","created_at":%d,"model":%q,"status":%q,"incomplete_details":%s,"output":%s,"usage":%s,"store":false}`,
		id, r.created, r.Model, status, incomplete, output, usage)
}

// messageItem is the assistant's message of text, as an output item of the
// response id.
func messageItem(id, text string) string {
	return fmt.Sprintf(`{"id":%q,"type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":%q,"annotations":[]}]}`, messageID(id), text)
}

// messageID is the ID of the message of the response id: its own, as a
// client that sends the output items back as input (a conversation) finds
// each one's.
func messageID(id string) string { return "msg_" + strings.TrimPrefix(id, "resp_") }
