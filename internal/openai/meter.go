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
	var m Metered
	m.add(body)
	return m
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
