package infersim

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The simulated server's log probabilities, as vLLM gives them when a
// request asks: a chat's logprobs (true) with top_logprobs alternatives
// per token, a text completion's logprobs (the alternatives per token, a
// number). Every token of an answer is tokenWord, at tokenLogprob; its
// alternatives are the token itself and then altWords, each less likely.

// tokenLogprob is the log probability of every token of an answer.
const tokenLogprob = -0.125

// maxTopLogprobs is the most alternatives a token may be given, as
// OpenAI's API allows.
const maxTopLogprobs = 20

// logprobsAsked is what a request asks of log probabilities: whether any,
// and how many alternatives per token.
type logprobsAsked struct {
	on  bool
	top int
}

// readLogprobs reads the request's logprobs (a chat's true or false, a
// text completion's number or null) and top_logprobs (a chat's).
func (r *chatRequest) readLogprobs() error {
	if len(r.Logprobs) == 0 || string(r.Logprobs) == "null" {
		if r.TopLogprobs != nil && *r.TopLogprobs > 0 && !r.text {
			return errors.New("top_logprobs needs logprobs true")
		}
		return nil
	}
	if r.text {
		var n int
		if err := json.Unmarshal(r.Logprobs, &n); err != nil || n < 0 || n > maxTopLogprobs {
			return fmt.Errorf("logprobs must be a number from 0 to %d", maxTopLogprobs)
		}
		r.logprobs = logprobsAsked{on: true, top: n}
		return nil
	}
	var on bool
	if err := json.Unmarshal(r.Logprobs, &on); err != nil {
		return errors.New("logprobs must be true or false")
	}
	top := 0
	if r.TopLogprobs != nil {
		top = *r.TopLogprobs
	}
	switch {
	case top < 0 || top > maxTopLogprobs:
		return fmt.Errorf("top_logprobs must be from 0 to %d", maxTopLogprobs)
	case top > 0 && !on:
		return errors.New("top_logprobs needs logprobs true")
	}
	r.logprobs = logprobsAsked{on: on, top: top}
	return nil
}

// alternative is the k-th likeliest token at a place of an answer (0: the
// token given) and its log probability.
func alternative(k int) (string, float64) {
	if k == 0 {
		return tokenWord, tokenLogprob
	}
	return fmt.Sprintf("alt%d ", k), tokenLogprob - float64(k)
}

// logprobsJSON is the logprobs of a choice of n tokens, the first of them
// the answer's token from: a chat's {"content": [...], "refusal": null},
// or a text completion's tokens, token_logprobs, top_logprobs and
// text_offset; null when the request asked for none.
func (r *chatRequest) logprobsJSON(n, from int) string {
	if !r.logprobs.on {
		return "null"
	}
	if r.text {
		return r.textLogprobs(n, from)
	}
	entries := make([]string, n)
	for i := range entries {
		tops := make([]string, r.logprobs.top)
		for k := range tops {
			tok, lp := alternative(k)
			tops[k] = fmt.Sprintf(`{"token":%q,"logprob":%g,"bytes":%s}`, tok, lp, byteList(tok))
		}
		entries[i] = fmt.Sprintf(`{"token":%q,"logprob":%g,"bytes":%s,"top_logprobs":[%s]}`,
			tokenWord, tokenLogprob, byteList(tokenWord), strings.Join(tops, ","))
	}
	return `{"content":[` + strings.Join(entries, ",") + `],"refusal":null}`
}

// textLogprobs is a text completion's logprobs, in the legacy format:
// text_offset counts from the answer's start.
func (r *chatRequest) textLogprobs(n, from int) string {
	alts := make(map[string]float64, r.logprobs.top)
	for k := range r.logprobs.top {
		tok, lp := alternative(k)
		alts[tok] = lp
	}
	top, _ := json.Marshal(alts) // the same at every token
	tokens, lps, tops, offsets := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i := range n {
		tokens[i], lps[i] = fmt.Sprintf("%q", tokenWord), fmt.Sprintf("%g", tokenLogprob)
		tops[i], offsets[i] = string(top), fmt.Sprint((from+i)*len(tokenWord))
	}
	return fmt.Sprintf(`{"tokens":[%s],"token_logprobs":[%s],"top_logprobs":[%s],"text_offset":[%s]}`,
		strings.Join(tokens, ","), strings.Join(lps, ","), strings.Join(tops, ","), strings.Join(offsets, ","))
}

// byteList is s's UTF-8 bytes as a JSON list of numbers.
func byteList(s string) string {
	parts := make([]string, len(s))
	for i := range len(s) {
		parts[i] = fmt.Sprint(s[i])
	}
	return "[" + strings.Join(parts, ",") + "]"
}
