package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// Kept responses: the gateway keeps each answer of the Responses API whose
// request did not say store false (idlegrid.KeptResponse), for
// ResponseRetention, so that the renter may continue the conversation
// from it (previous_response_id), read it back (GET /v1/responses/{id}),
// list its input items, and delete it, as with OpenAI. It keeps them in
// the coordinator's store, not at the provider that answered: the next
// request of a conversation may go to another provider, which is sent the
// conversation whole (openai.Request.Continue). A response is kept before
// the renter reads its end, so that a request that continues it at once
// finds it.

// How long responses are kept, and how long a conversation of them may be.
const (
	// DefaultResponseRetention is how long a response is kept: OpenAI's
	// 30 days.
	DefaultResponseRetention = 30 * 24 * time.Hour
	// MaxConversation is the most responses one conversation may chain
	// through previous_response_id.
	MaxConversation = 10_000
	// keepTimeout bounds the write that keeps a response.
	keepTimeout = 10 * time.Second
)

// keeping is what a Responses API request's exchange knows of the
// response it will keep: its ID, and its request's own input (each
// item_reference replaced by its item), store, previous_response_id,
// conversation and background.
type keeping struct {
	id           string
	previous     string
	conversation string          // the conversation it continues and adds to (conversations.go)
	taken        map[string]bool // the IDs of the conversation's items as it began
	unlock       func()          // lets the conversation go, once (convlock.go); nil: nothing to let go
	store        bool
	input        json.RawMessage
	background   bool            // run in the background (background.go)
	queued       json.RawMessage // a background response's object as it waits

	// mu makes a background response's writes one at a time: its run's
	// and its heartbeat's (background.go).
	mu     sync.Mutex
	stored json.RawMessage // a background response's object as its run last stored it
	done   bool            // a background run's answer is kept
	lost   bool            // another write came first (a cancel), or it is gone: the run stops and keeps nothing more
}

// echoed is what k's response object says of its request (openai.Echo).
func (k *keeping) echoed() openai.Echoed {
	return openai.Echoed{ID: k.id, Store: k.store, Previous: k.previous, Conversation: k.conversation, Background: k.background}
}

// answered reports whether k's background run has kept its answer.
func (k *keeping) answered() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.done
}

// settled reports whether k's run has kept its answer or lost its
// response.
func (k *keeping) settled() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.done || k.lost
}

// end lets k's conversation go, once k's response has ended and its items
// are added; its exchange may end it more than once.
func (k *keeping) end() {
	if k != nil && k.unlock != nil {
		k.unlock()
	}
}

// responseID is the ID of the response to request reqID: its digits,
// "resp_…".
func responseID(reqID string) string {
	_, digits, _ := strings.Cut(reqID, "_")
	return "resp_" + digits
}

// continued returns req as it goes upstream: for a response that
// continues a kept one or a kept conversation, the conversation whole, and
// its item_reference items replaced by the items they name
// (openai.Request.Continue); and what the exchange keeps of it.
func (g *Gateway) continued(ctx context.Context, renterID, reqID string, req *openai.Request) (_ *openai.Request, _ *keeping, err error) {
	list, err := req.InputItems()
	if err != nil {
		return nil, nil, err
	}
	k := &keeping{id: responseID(reqID), previous: req.PreviousResponseID, conversation: req.Conversation, store: req.Store, input: list, background: req.Background}
	if req.PreviousResponseID == "" && req.Conversation == "" && req.References == 0 {
		return req, k, nil
	}
	if req.Conversation != "" { // before its items are read: a response running in it adds more
		if err := g.convLocks.lock(ctx, renterID, req.Conversation, k.id); err != nil {
			return nil, nil, err
		}
		k.unlock = sync.OnceFunc(func() { g.convLocks.unlock(renterID, req.Conversation, k.id) })
		defer func() {
			if err != nil {
				k.end()
			}
		}()
	}
	history, field, err := g.history(ctx, renterID, req, k) // before k.input is resolved: a reference to an item of its conversation is refused
	if err != nil {
		return nil, nil, err
	}
	own, err := openai.ItemList(list)
	if err == nil && req.References > 0 {
		if own, err = g.resolve(ctx, renterID, own, history); err == nil {
			k.input, err = json.Marshal(own) // kept as sent: a continuation sends it again
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if req.Conversation != "" { // its input, as it will be added, must fit at least
		if err := g.roomForCount(ctx, renterID, int64(len(own)), int64(utf8.RuneCount(k.input))); err != nil {
			return nil, nil, err
		}
	}
	whole, err := g.fit(req, history, own, field)
	if err != nil {
		return nil, nil, err
	}
	return whole, k, nil
}

// fit returns req continued with history and own (openai.Request.Continue)
// if it comes to no more than a request may be, or, when req says
// truncation auto, with as few of history's oldest items left out as make
// it fit; else ETOOLARGE naming field.
func (g *Gateway) fit(req *openai.Request, history, own []json.RawMessage, field string) (*openai.Request, error) {
	for {
		whole, err := req.Continue(history, own)
		if err != nil {
			return nil, err
		}
		n := int64(len(whole.Body()))
		if n <= g.cfg.MaxBodyBytes {
			return whole, nil
		}
		if !req.Truncate || len(history) == 0 {
			return nil, idlegrid.Errorf(idlegrid.ETOOLARGE, "%s: the conversation so far and this input come to %d bytes, over the %d a request may be; start a new conversation, sending what matters of this one in input, or send truncation auto to leave its oldest items out", field, n, g.cfg.MaxBodyBytes)
		}
		over := n - g.cfg.MaxBodyBytes
		for len(history) > 0 && over > 0 {
			over -= int64(len(history[0]) + 1) // the item and its comma
			history = history[1:]
		}
	}
}

// history returns the items req continues, the first first: those of the
// kept response it names and the ones before it, or of the kept
// conversation it names (noting their IDs in k), or none; and the field
// that named them.
func (g *Gateway) history(ctx context.Context, renterID string, req *openai.Request, k *keeping) ([]json.RawMessage, string, error) {
	switch {
	case req.PreviousResponseID != "":
		history, err := g.conversation(ctx, renterID, req.PreviousResponseID, req.Truncate)
		return history, "previous_response_id", err
	case req.Conversation != "":
		history, err := g.conversationHistory(ctx, renterID, req.Conversation, req.Truncate)
		if err == nil {
			k.taken = itemIDs(history)
			err = clashingItem(k.taken, k.input)
		}
		return history, "conversation", err
	}
	return nil, "input", nil
}

// conversation returns the items of the conversation up to and including
// the renter's kept response id: each response's input items, then its
// output items, the first response first. One too long to send whole is
// refused unless truncate, which leaves its oldest responses out.
func (g *Gateway) conversation(ctx context.Context, renterID, id string, truncate bool) ([]json.RawMessage, error) {
	bound := g.conversationChars()
	chain, err := g.cfg.Store.ResponseChain(ctx, renterID, id, g.cfg.Clock.Now(), MaxConversation, bound)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, idlegrid.Invalid("previous_response_id", "no response %q is kept for this account: %s", id, g.whyGone())
	} else if err != nil {
		return nil, err
	}
	if chain, err = wholeChain(chain, bound, truncate); err != nil {
		return nil, err
	}
	var items []json.RawMessage
	for _, r := range chain {
		if unfinished(g.presented(r)) {
			return nil, idlegrid.Invalid("previous_response_id", "response %s is still running in the background; poll GET /v1/responses/%s until it is done", r.ID, r.ID)
		}
		var in []json.RawMessage
		if err := json.Unmarshal(r.Input, &in); err != nil {
			return nil, fmt.Errorf("kept response %s: its input: %w", r.ID, err)
		}
		out, err := openai.OutputItems(r.Response)
		if err != nil {
			return nil, fmt.Errorf("kept response %s: %w", r.ID, err)
		}
		items = append(append(items, in...), out...)
	}
	return items, nil
}

// wholeChain returns chain, as ResponseChain read it within bound
// characters, if it is the conversation whole: one cut off by the bound or
// by MaxConversation is refused, or, when truncate, returned without the
// oldest responses that the bound leaves out; one whose earlier response
// is gone is refused either way.
func wholeChain(chain []*idlegrid.KeptResponse, bound int64, truncate bool) ([]*idlegrid.KeptResponse, error) {
	switch size, first := keptSize(chain), chain[0]; {
	case size > bound && truncate:
		for ; len(chain) > 0 && size > bound; chain = chain[1:] {
			size -= keptSize(chain[:1])
		}
	case size > bound:
		return nil, idlegrid.Errorf(idlegrid.ETOOLARGE, "previous_response_id: the conversation so far comes to over %d characters kept (its responses as answered, with their input), more than a request may carry; start a new conversation, sending what matters of this one in input, or send truncation auto to leave its oldest items out", bound)
	case first.PreviousID == "":
	case len(chain) >= MaxConversation && truncate:
	case len(chain) >= MaxConversation:
		return nil, idlegrid.Invalid("previous_response_id", "the conversation is over %d responses long; start a new one, sending what matters of this one in input, or send truncation auto to leave its oldest items out", MaxConversation)
	default:
		return nil, idlegrid.Invalid("previous_response_id", "the conversation cannot be continued: response %s, an earlier one of it, was deleted or expired", first.PreviousID)
	}
	return chain, nil
}

// conversationChars bounds what a continuation reads of its conversation:
// the characters of its kept responses and their input, four times the
// body a request may be, so that a conversation far too long to send is
// refused without being read whole into memory. Bodies over MaxBodyBytes
// are refused all the same once built (continued).
func (g *Gateway) conversationChars() int64 { return 4 * g.cfg.MaxBodyBytes }

// keptSize is the bytes of chain's responses and their input, at least
// their characters.
func keptSize(chain []*idlegrid.KeptResponse) (n int64) {
	for _, r := range chain {
		n += int64(len(r.Input) + len(r.Response))
	}
	return n
}

// keep keeps the response obj (as echoed to the renter) when its request
// asked for it to be kept, and notes whether it failed for the model
// server's own error. A failure to keep it is logged and the answer goes
// on: it is the renter's all the same, though it cannot be continued.
func (x *exchange) keep(obj []byte) {
	x.failed = openai.ServerFailed(obj)
	k := x.kept
	switch {
	case k == nil:
		return
	case !k.store:
	case k.background: // kept since it was queued
		if x.keepAnswer(obj); !k.answered() {
			return // another write came first: the run keeps nothing more
		}
	default:
		x.keepWhole(obj)
	}
	if k.conversation != "" {
		x.addToConversation(obj)
		k.end() // before the renter has the answer: its next response finds the conversation free
	}
}

// keepWhole keeps obj, the answer of a request answered whole (not in
// the background), as a new kept response.
func (x *exchange) keepWhole(obj []byte) {
	k, g := x.kept, x.g
	now := g.cfg.Clock.Now()
	r := &idlegrid.KeptResponse{
		ID: k.id, RenterID: x.caller.AccountID, Model: x.req.Model, PreviousID: k.previous,
		Input: k.input, Response: obj, CreatedAt: now, ExpiresAt: now.Add(g.cfg.ResponseRetention),
	}
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	if err := g.cfg.Store.KeepResponse(ctx, r); err != nil {
		g.log.Error("gateway: could not keep a response; it cannot be continued or read back", "request", x.id, "response", k.id, "err", err)
		g.metrics.notKept.Inc()
	}
}

// echo is a whole answer of the Responses API as the renter gets it
// (openai.Echo), kept when asked; any other answer as it came.
func (x *exchange) echo(answer []byte) []byte {
	k := x.kept
	if k == nil {
		return answer
	}
	out, err := openai.Echo(answer, k.echoed())
	if err != nil {
		return answer // not a response object: nothing to keep
	}
	x.keep(out)
	return out
}

// getResponse answers GET /v1/responses/{id}: the renter's kept response,
// as it was answered.
func (g *Gateway) getResponse(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	q, err := checkQuery(r, "stream", "include", "include[]", "include_obfuscation", "starting_after")
	if err != nil {
		return err
	}
	if stream, err := streamAsked(r, q); err != nil {
		return err
	} else if stream {
		return g.resume(w, r, c, q)
	}
	kr, err := g.findResponse(r.Context(), c, r.PathValue("id"))
	if err == nil {
		kr, err = g.settle(r.Context(), c, kr)
	}
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, g.presented(kr))
	return nil
}

// streamAsked reports whether GET /v1/responses/{id} asks for the
// response's events: stream=true in its query, or, as OpenAI's SDKs send
// it, {"stream": true} in its body.
func streamAsked(r *http.Request, q url.Values) (bool, error) {
	if q.Get("stream") == "true" {
		return true, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	if err != nil || len(bytes.TrimSpace(body)) == 0 {
		return false, nil
	}
	var b struct {
		Stream bool `json:"stream"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return false, idlegrid.Invalid("body", "a GET of a response takes no body but a JSON object such as {\"stream\": true}")
	}
	return b.Stream, nil
}

// findResponse returns the caller's kept response id: ENOTFOUND, naming
// it, for none (another renter's included).
func (g *Gateway) findResponse(ctx context.Context, c *apiKey, id string) (*idlegrid.KeptResponse, error) {
	if err := renterOnly(c, "responses"); err != nil {
		return nil, err
	}
	kr, err := g.cfg.Store.FindResponse(ctx, c.AccountID, id, g.cfg.Clock.Now())
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, idlegrid.Errorf(idlegrid.ENOTFOUND, "no response %q is kept for this account: %s", id, g.whyGone())
	}
	return kr, err
}

// deleteResponse answers DELETE /v1/responses/{id}, as OpenAI does; a
// background response still running is cancelled first.
func (g *Gateway) deleteResponse(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	if _, err := checkQuery(r); err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := g.findResponse(r.Context(), c, id); err != nil {
		return err
	}
	g.background.cancel(id, 2*keepTimeout) // a background response deleted need not run on
	if err := g.cfg.Store.DeleteResponse(r.Context(), c.AccountID, id, g.cfg.Clock.Now()); err != nil {
		return err
	}
	writeDeleted(w, id, "response")
	return nil
}

// writeDeleted answers that the object id was deleted, as OpenAI does:
// {"id": …, "object": object, "deleted": true}.
func writeDeleted(w http.ResponseWriter, id, object string) {
	writeJSON(w, http.StatusOK, struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{id, object, true})
}

// cancelResponse answers POST /v1/responses/{id}/cancel, as OpenAI does:
// a background response still running is cancelled, and its object
// answered once the run has ended (a background response that ended
// already is answered as it is); any other response cannot be.
func (g *Gateway) cancelResponse(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	id := r.PathValue("id")
	kr, err := g.findResponse(r.Context(), c, id)
	if err != nil {
		return err
	}
	if !gjson.GetBytes(kr.Response, "background").Bool() {
		return idlegrid.Errorf(idlegrid.EINVALID, "only a response created with background true can be cancelled: response %s was answered whole", id)
	}
	if g.background.cancel(id, 2*keepTimeout) {
		kr, err = g.findResponse(r.Context(), c, id)
	} else if kr, err = g.settle(r.Context(), c, kr); err == nil && unfinished(kr.Response) {
		kr, err = g.cancelElsewhere(r.Context(), c, kr)
	}
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, g.presented(kr))
	return nil
}

// cancelElsewhere cancels kr, a background response queued or in
// progress that no run of this gateway's holds: another server runs it,
// whose run finds it changed at its next heartbeat and stops
// (exchange.lose). It returns the response as it is now: cancelled, or as
// its run moved it on first.
func (g *Gateway) cancelElsewhere(ctx context.Context, c *apiKey, kr *idlegrid.KeptResponse) (*idlegrid.KeptResponse, error) {
	obj, err := openai.SetField(kr.Response, "status", []byte(`"cancelled"`))
	if err != nil {
		return nil, fmt.Errorf("kept response %s: %w", kr.ID, err)
	}
	kr, _, err = g.rewrite(ctx, c, kr, obj)
	return kr, err
}

// rewrite sets kr's response object to obj if it is still as read, and
// returns the response as it is now: obj (won), or as another write left
// it.
func (g *Gateway) rewrite(ctx context.Context, c *apiKey, kr *idlegrid.KeptResponse, obj json.RawMessage) (now *idlegrid.KeptResponse, won bool, err error) {
	switch err := g.cfg.Store.UpdateResponse(ctx, c.AccountID, kr.ID, kr.Response, obj, g.cfg.Clock.Now()); {
	case idlegrid.ErrorCode(err) == idlegrid.ECONFLICT:
		now, err = g.findResponse(ctx, c, kr.ID)
		return now, false, err
	case err != nil:
		return nil, false, err
	}
	moved := *kr
	moved.Response = obj
	return &moved, true, nil
}

// responsesPath answers a path under /v1/responses/ that no route above
// serves: 405 where the path is one of them, 404 otherwise.
func (g *Gateway) responsesPath(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/responses/")
	id, sub, _ := strings.Cut(rest, "/")
	var allowed []string
	switch {
	case id == "":
	case sub == "":
		allowed = []string{http.MethodGet, http.MethodDelete}
	case sub == "input_items":
		allowed = []string{http.MethodGet}
	case sub == "cancel":
		allowed = []string{http.MethodPost}
	}
	NoRoute(w, r, allowed)
}

// whyGone says why a renter's response may not be kept: "… expired
// after 30 days".
func (g *Gateway) whyGone() string {
	const day = 24 * time.Hour
	retention := g.cfg.ResponseRetention.String()
	switch d := g.cfg.ResponseRetention; {
	case d == day:
		retention = "1 day"
	case d%day == 0:
		retention = fmt.Sprintf("%d days", d/day)
	}
	return "it was never kept (store false), was deleted, or expired after " + retention
}

// writeRaw writes b, a JSON value, as the answer.
func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b[:len(b):len(b)], '\n'))
}
