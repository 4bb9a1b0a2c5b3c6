package openai

import (
	"bytes"
	"encoding/json"
)

// Metered is what an answer says about its own size: the model server's
// usage, when it gave one, and the bytes of text it generated, for an
// estimate when it did not.
type Metered struct {
	Usage           *Usage
	CompletionBytes int
	Bytes           int  // the answer's bytes as relayed, events and all
	Chunks          int  // events with data, for a stream
	Done            bool // a stream's "data: [DONE]" arrived
}

// Tokens returns the answer's prompt and completion tokens: the model
// server's usage when it gave one, else estimates from promptTokens and
// the text generated. upstream says which.
func (m *Metered) Tokens(promptTokens int64) (in, out int64, upstream bool) {
	if m.Usage != nil {
		return max(m.Usage.PromptTokens, 0), max(m.Usage.CompletionTokens, 0), true
	}
	return promptTokens, EstimateTokens(m.CompletionBytes), false
}

// MeterAnswer reads a whole (non-streamed) answer.
func MeterAnswer(body []byte) Metered {
	m := Metered{Bytes: len(body)}
	m.add(body)
	return m
}

// What a chat template and a tokenizer may add to the bytes of a request
// and of its answer, in tokens. The byte-level tokenizers of today's open
// models (Llama's, Qwen's, Mistral's) make at most one token of each byte
// of text, so an honest prompt is at most the bytes of the body sent
// upstream plus its chat template's tokens, and an honest completion at
// most the bytes relayed plus the tokens that decode to none.
const (
	// templateTokens is what a template may add once a request: a default
	// system prompt, a preamble to the tools, the start of the sequence,
	// the assistant's header.
	templateTokens = 256
	// messageTemplateTokens is what it may add to each message: its role
	// header and end-of-turn markers.
	messageTemplateTokens = 16
	// silentTokens is what a completion may have that decodes to no
	// bytes: its end of sequence, special tokens the server strips.
	silentTokens = 16
	// mediaTokens is what one image, audio or video part may take, which
	// its bytes in the request (a URL, say) do not bound: the most an
	// image takes in today's open vision models (Qwen2.5-VL's 16,384 at
	// its largest resolution).
	mediaTokens = 16384
)

// MostPromptTokens is the most prompt tokens the request can honestly
// take when sent upstream as sent bytes.
func (r *Request) MostPromptTokens(sent int) int64 {
	return int64(sent) + templateTokens + int64(r.messages)*messageTemplateTokens + int64(r.media)*mediaTokens
}

// ReservePromptTokens is what a budget reserves for the request's prompt:
// the estimate of its text, the estimate of the rest of the body that
// becomes prompt tokens (tools, response_format, a chat's tool calls:
// their JSON bytes / BytesPerToken), and each image, audio or video part
// at the most it may take, since those may cost twenty times the
// estimate.
func (r *Request) ReservePromptTokens() int64 {
	return r.PromptTokens + EstimateTokens(r.besides) + int64(r.media)*(mediaTokens-MediaTokens)
}

// MostCompletionTokens is the most completion tokens an honest answer to
// the request can have when it relayed bytes: no more than max_tokens for
// each of the n completions, when the request set max_tokens.
func (r *Request) MostCompletionTokens(relayed int) int64 {
	choices := max(r.Choices, 1)
	most := int64(relayed) + silentTokens*choices
	if r.MaxTokens > 0 {
		most = min(most, r.MaxTokens*choices)
	}
	return most
}

func (m *Metered) add(payload []byte) {
	var a answer
	if json.Unmarshal(payload, &a) != nil {
		return
	}
	if a.Usage != nil {
		m.Usage = a.Usage
	}
	for _, c := range a.Choices {
		m.CompletionBytes += len(c.Text)
		if c.Message != nil {
			m.CompletionBytes += textLen(c.Message.Content)
		}
		if c.Delta != nil {
			m.CompletionBytes += textLen(c.Delta.Content) + len(c.Delta.Reasoning)
		}
	}
}

// textLen is the length of a content field: a string, or a list of parts.
func textLen(raw json.RawMessage) int {
	if len(raw) == 0 || raw[0] != '"' {
		return 0
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0
	}
	return len(s)
}

// StreamMeter reads a stream of server-sent events as it passes through,
// in pieces of any size, and meters it. It never holds more than one
// unfinished line.
type StreamMeter struct {
	Metered
	line []byte // the unfinished line
}

// maxLine bounds the unfinished line a StreamMeter keeps; a longer one is
// dropped from metering (it still passes through).
const maxLine = 1 << 20

// Write reads p, the next bytes of the stream. It never fails.
func (s *StreamMeter) Write(p []byte) (int, error) {
	n := len(p)
	s.Bytes += n
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(s.line)+len(p) <= maxLine {
				s.line = append(s.line, p...)
			}
			break
		}
		if len(s.line) > 0 {
			s.line = append(s.line, p[:i]...)
			s.event(s.line)
			s.line = s.line[:0]
		} else {
			s.event(p[:i])
		}
		p = p[i+1:]
	}
	return n, nil
}

var dataPrefix = []byte("data:")

// event reads one line of the stream.
func (s *StreamMeter) event(line []byte) {
	line = bytes.TrimRight(line, "\r")
	payload, ok := bytes.CutPrefix(line, dataPrefix)
	if !ok {
		return
	}
	payload = bytes.TrimSpace(payload)
	if bytes.Equal(payload, []byte("[DONE]")) {
		s.Done = true
		return
	}
	s.Chunks++
	s.add(payload)
}
