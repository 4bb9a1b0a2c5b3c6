package infersim

import (
	"encoding/json"
	"errors"
	"strings"
)

// A chat's or text completion's stop sequences, as vLLM honours them: the
// answer ends where the first of them would begin, which it leaves out,
// finished "stop"; the token that held it counts in the usage, as it was
// generated. The filler words seldom hold a stop sequence a client sends,
// so most answers run to their length.

// maxStops is the most stop sequences a request may give, as OpenAI's API
// allows.
const maxStops = 4

// readStop reads the request's stop: a string, or a list of strings.
func (r *chatRequest) readStop() error {
	if len(r.Stop) == 0 || string(r.Stop) == "null" {
		return nil
	}
	var one string
	if json.Unmarshal(r.Stop, &one) == nil {
		r.stops = []string{one}
		return nil
	}
	if err := json.Unmarshal(r.Stop, &r.stops); err != nil {
		return errors.New("stop must be a string or a list of strings")
	}
	if len(r.stops) > maxStops {
		return errors.New("stop may hold at most 4 sequences")
	}
	return nil
}

// cut sets the answer of completion tokens, ended at its first stop
// sequence, and returns the tokens generated: those before the stop and
// the one it begins in.
func (r *chatRequest) cut(completion int) int {
	r.answer = words(completion)
	at := -1
	for _, s := range r.stops {
		if i := strings.Index(r.answer, s); s != "" && i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at < 0 {
		return completion
	}
	r.answer, r.stopped = r.answer[:at], true
	return min(completion, at/len(tokenWord)+1)
}

// part is the text of the answer's n tokens after the first from, as a
// stream sends it: what the stop left of them.
func (r *chatRequest) part(from, n int) string {
	lo := min(from*len(tokenWord), len(r.answer))
	hi := min((from+n)*len(tokenWord), len(r.answer))
	return r.answer[lo:hi]
}
