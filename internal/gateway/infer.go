package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// Why an attempt was given up, as the cause of its context.
var (
	errFirstByte = errors.New("no first byte in time")
	errStalled   = errors.New("the answer stalled")
)

// bufPool holds the buffers answers are copied through.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// exchange is one renter request on its way through the gateway.
type exchange struct {
	g      *Gateway
	id     string
	req    *openai.Request
	caller *idlegrid.Caller
	start  time.Time
	res    *reservation
	body   []byte     // what goes upstream
	held   *candidate // counted in at its provider already (waitForRoom)
	sole   bool       // the model has one provider: nothing tells its errors from the request's (judgeErrors)
	kept   *keeping   // a Responses API request's: the response it keeps (kept.go); nil for other endpoints
	failed bool       // the response came back failed, for the model server's own error, not the request's (openai.ServerFailed)
}

// infer serves one of the inference endpoints.
func (g *Gateway) infer(e openai.Endpoint) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *apiKey) error {
		g.active.Enter()
		x, rt, err := g.prepare(w, r, c, e)
		if err != nil {
			g.active.Leave()
			return err
		}
		if x.kept != nil && x.kept.background {
			return g.startBackground(w, r, x, rt) // it leaves, and ends the reservation, when its run ends
		}
		defer g.active.Leave()
		defer x.res.done()
		defer x.kept.end()
		return x.send(w, r, rt, nil)
	}
}

// route is where a request may go: the model's providers, and the plan
// of those to try, in order.
type route struct {
	all  []*provider
	plan []*candidate
}

// prepare reads a request, parses it (continuing a kept conversation),
// plans its route and admits it by its key's rate, concurrency and money:
// an exchange ready to send, holding its reservation.
func (g *Gateway) prepare(w http.ResponseWriter, r *http.Request, c *apiKey, e openai.Endpoint) (_ *exchange, _ route, err error) {
	start := time.Now()
	if c.Role != idlegrid.RoleRenter || c.NodeID != "" {
		return nil, route{}, idlegrid.Errorf(idlegrid.EFORBIDDEN, "only renter accounts may run inference: it is charged to the renter's balance")
	}
	body, err := readBody(w, r, g.cfg.MaxBodyBytes)
	if err != nil {
		return nil, route{}, err
	}
	req, err := openai.ParseRequest(e, body)
	if err != nil {
		return nil, route{}, err
	}
	var kept *keeping
	if e == openai.Responses {
		if req, kept, err = g.continued(r.Context(), c.AccountID, requestID(w), req); err != nil {
			return nil, route{}, err
		}
		defer func() {
			if err != nil {
				kept.end()
			}
		}()
	}
	if req.Provider, err = c.routingOf(req.Provider); err != nil { // the key's owner set where its requests may go
		return nil, route{}, err
	}
	all, err := g.catalog.providers(r.Context(), req.Model)
	if err != nil {
		return nil, route{}, err
	}
	plan, why := g.plan(req, all, g.cfg.MaxAttempts)
	if len(plan) == 0 {
		return nil, route{}, g.unavailable(g.noProvider(req.Model, len(all), why), all)
	}
	// The key's rate, concurrency and money first: a request they refuse
	// takes no place in the waiting room.
	res, err := g.budgets.admit(r.Context(), c.Caller, g.worstCost(req, plan))
	if err != nil {
		return nil, route{}, err
	}
	x := &exchange{g: g, id: requestID(w), req: req, caller: c.Caller, start: start, res: res, sole: len(all) == 1, kept: kept}
	return x, route{all: all, plan: plan}, nil
}

// send waits for room at a provider of the route, tells ready (when not
// nil) it has some, and runs the exchange.
func (x *exchange) send(w http.ResponseWriter, r *http.Request, rt route, ready func()) error {
	g := x.g
	plan, held, err := g.waitForRoom(r.Context(), x.req, rt.all, rt.plan)
	if err != nil {
		x.res.release(0)
		return err
	}
	if ready != nil {
		ready()
	}
	up, err := x.req.Upstream()
	if err != nil {
		g.leave(held, x.req.Model)
		x.res.release(0)
		return err
	}
	x.body, x.held = up, held
	return x.run(w, r, plan)
}

// requestID is the ID withKey gave the request.
func requestID(w http.ResponseWriter) string { return w.Header().Get("X-Request-Id") }

// worstCost is what the request may cost at the dearest provider it may
// reach: its prompt (openai.Request.ReservePromptTokens), and its
// max_tokens (or ReserveOutputTokens) for each of the n completions it
// asks for.
func (g *Gateway) worstCost(req *openai.Request, plan []*candidate) idlegrid.Micros {
	out := req.MaxTokens
	if out == 0 {
		out = g.cfg.ReserveOutputTokens
	}
	out *= max(req.Choices, 1)
	if req.Endpoint == openai.Embeddings {
		out = 0
	}
	var worst idlegrid.Micros
	for _, c := range plan {
		worst = max(worst, c.Model.Cost(req.ReservePromptTokens(), out))
	}
	return worst
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, idlegrid.Errorf(idlegrid.ETOOLARGE, "the request body is over %d bytes", limit)
	} else if err != nil {
		return nil, idlegrid.Errorf(idlegrid.EINVALID, "could not read the request body: %v", err)
	}
	return b, nil
}

// attemptError is why one provider did not answer.
type attemptError struct {
	node     string
	status   int // the provider's HTTP status; 0 when it never answered
	msg      string
	timedOut bool // no first byte within the wait (firstByteWait)
}

func (e *attemptError) Error() string {
	if e.status != 0 {
		return fmt.Sprintf("node %s answered %d: %s", e.node, e.status, e.msg)
	}
	return fmt.Sprintf("node %s: %s", e.node, e.msg)
}

// run tries the plan's providers in order until one answers, and passes
// its answer on. A provider that fails before the renter has had a byte
// is replaced by the next one.
func (x *exchange) run(w http.ResponseWriter, r *http.Request, plan []*candidate) error {
	g := x.g
	var failures []*attemptError
	var erred []*candidate // answered 500 or timed out: judged once the request's outcome is known (judgeErrors)
	attempts := 0
	for _, c := range plan {
		held := c == x.held
		x.held = nil
		if r.Context().Err() != nil || !g.health.allow(c.up) {
			if held {
				g.leave(c, x.req.Model)
			}
			if r.Context().Err() != nil {
				break
			}
			continue
		}
		attempts++
		if !held {
			c.up.inflight.Add(1)
		}
		a, fail := x.open(r.Context(), c)
		if fail != nil {
			g.leave(c, x.req.Model)
			if r.Context().Err() != nil {
				g.health.release(c.up)
				break
			}
			if !x.noteFailure(c, fail) {
				erred = append(erred, c)
			}
			if fail.status == http.StatusNotFound {
				g.catalog.invalidate() // the node no longer serves the model
			}
			g.log.Info("gateway: provider failed; trying the next", "request", x.id, "model", x.req.Model, "err", fail)
			failures = append(failures, fail)
			continue
		}
		x.judgeErrors(erred, true)
		x.deliver(w, r, c, a, attempts)
		g.leave(c, x.req.Model)
		return nil
	}
	x.judgeErrors(erred, false)
	x.res.release(0)
	if r.Context().Err() != nil {
		return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "request cancelled")
	}
	ps := make([]*provider, len(plan))
	for i, c := range plan {
		ps[i] = c.provider
	}
	if len(failures) == 0 {
		return g.unavailable(idlegrid.Errorf(idlegrid.EUNAVAILABLE, "every provider of model %q is cut off after failing; retry in a while", x.req.Model), ps)
	}
	return g.unavailable(allFailed(x.req, failures), ps)
}

// noteFailure records in c's provider's health and in the metrics an
// attempt that failed before the first byte, and reports whether it did:
//
//   - a 429 is back-pressure, not a failure (healthBook.busy);
//   - a 404 to /v1/completions or /v1/responses, which a model server
//     need not serve (chat-only ones do not, nor those that predate the
//     Responses API) and an offer does not say, is the endpoint not
//     served there: it is released, and the next requests of the
//     endpoint skip the provider for a while, or a renter's requests for
//     it would cut every provider of the model off for everyone (a 404 to
//     an endpoint every provider serves, or says it serves, is its
//     failure: the model gone; so is one whose message speaks of the
//     model, "The model `x` does not exist", whatever the endpoint);
//   - a timeout of a prompt over LargePromptTokens is the prompt's
//     slowness, not the provider's, and is released, as is one of a
//     whole answer asked to be long (max_tokens of LargeAnswerTokens or
//     more);
//   - a 500, or any other timeout, is left to judgeErrors (false);
//   - anything else counts against the provider's breaker.
func (x *exchange) noteFailure(c *candidate, fail *attemptError) (noted bool) {
	g := x.g
	switch {
	case fail.status == http.StatusTooManyRequests:
		g.health.busy(c.up)
		g.metrics.failures.WithLabelValues("busy").Inc()
	case fail.status == http.StatusNotFound && (x.req.Endpoint == openai.Completions || x.req.Endpoint == openai.Responses) && !fail.namesModel():
		g.health.release(c.up)
		g.health.notServing(c.up, x.req.Endpoint)
		g.metrics.failures.WithLabelValues("not_served").Inc()
	case fail.timedOut && x.req.ReservePromptTokens() > g.cfg.LargePromptTokens:
		g.health.release(c.up)
		g.metrics.failures.WithLabelValues("large_prompt").Inc()
	case fail.timedOut && !x.req.Stream && x.req.MaxTokens >= g.cfg.LargeAnswerTokens:
		g.health.release(c.up)
		g.metrics.failures.WithLabelValues("large_answer").Inc()
	case fail.status == http.StatusInternalServerError || fail.timedOut:
		return false
	default:
		g.health.failure(c.up)
		g.metrics.failures.WithLabelValues("failed").Inc()
	}
	return true
}

// judgeErrors settles, once the request has its outcome, the attempts of
// the providers that answered it 500 (the model server's own error in
// handling it) or gave no first byte in time. When another provider
// answered the request, each is its provider's failure. When the model
// has no other provider, nothing tells the two apart: it is a failure
// that opens the breaker only once two renters' requests have failed
// (healthBook.failureFor). Else the request may be at fault (a prompt
// every model server chokes on, a chat template that throws, or one that
// has them generate to the end of their context, say) and they are
// released, or a renter's requests, sent to each provider in turn
// (provider.only, allow_fallbacks false) or to all, could cut every
// provider of a model off for everyone.
func (x *exchange) judgeErrors(erred []*candidate, answered bool) {
	g := x.g
	for _, c := range erred {
		switch {
		case answered:
			g.health.failure(c.up)
		case x.sole:
			g.health.failureFor(c.up, x.caller.AccountID)
		default:
			g.health.release(c.up)
			g.metrics.failures.WithLabelValues("request").Inc()
			continue
		}
		g.metrics.failures.WithLabelValues("failed").Inc()
	}
}

// leave counts a request out of c's provider, and wakes the requests
// waiting for room at one of the model's providers. A nil c is none.
func (g *Gateway) leave(c *candidate, model string) {
	if c == nil {
		return
	}
	c.up.inflight.Add(-1)
	g.waiting.freed(model)
}

// soonestTrial is how long until the first of the providers' open
// breakers lets a request through; 0 when none is open.
func (g *Gateway) soonestTrial(ps []*provider) time.Duration {
	soonest := time.Duration(0)
	for _, p := range ps {
		if d := g.health.cooldownLeft(g.health.of(p.key)); d > 0 && (soonest == 0 || d < soonest) {
			soonest = d
		}
	}
	return soonest
}

// unavailable marks err, when the breakers of some of ps are open, as worth
// retrying once the first of them lets a trial through.
func (g *Gateway) unavailable(err error, ps []*provider) error {
	if idlegrid.ErrorCode(err) != idlegrid.EUNAVAILABLE {
		return err
	}
	if d := g.soonestTrial(ps); d > 0 {
		return retryAfter(err, d)
	}
	return err
}

// allFailed is the renter's error when every provider tried failed: at
// capacity, each of them, it is a 429 to retry shortly; each answering
// 404, it is a 404 (the endpoint or the model is not served there, which
// a retry does not mend); else a 503.
func allFailed(req *openai.Request, fs []*attemptError) error {
	busy, notServed := true, true
	msgs := make([]string, len(fs))
	for i, f := range fs {
		busy = busy && f.status == http.StatusTooManyRequests
		notServed = notServed && f.status == http.StatusNotFound
		msgs[i] = f.Error()
	}
	switch {
	case busy:
		return retryAfter(idlegrid.Errorf(idlegrid.ETOOMANY, "every provider of model %q tried is at capacity; retry shortly", req.Model), time.Second)
	case notServed:
		return idlegrid.Errorf(idlegrid.ENOTFOUND, "no provider of model %q tried serves POST /v1/%s for it: %s", req.Model, req.Endpoint, strings.Join(msgs, "; "))
	}
	return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "%d providers of model %q failed: %s", len(fs), req.Model, strings.Join(msgs, "; "))
}

// answer is a provider's answer that has begun: its status, and the first
// bytes of its body (all of it, when it is not a stream or is an error).
type answer struct {
	resp     *http.Response
	first    []byte
	complete bool          // first is the whole body
	ttft     time.Duration // from sending to the first byte
	ctx      context.Context
	cancel   context.CancelCauseFunc
	stall    *time.Timer
	buf      *[]byte
}

// firstByteWait is how long a provider may take to the first byte of
// req's answer: AnswerTimeout for a whole (non-streamed) answer; for a
// stream, FirstByteTimeout and FirstBytePerKTokens for each thousand
// tokens of its prompt's estimate, at most MaxFirstByteTimeout.
func (g *Gateway) firstByteWait(req *openai.Request) time.Duration {
	if !req.Stream {
		return g.cfg.AnswerTimeout
	}
	base, perK := g.cfg.FirstByteTimeout, g.cfg.FirstBytePerKTokens
	room := max(g.cfg.MaxFirstByteTimeout-base, 0)
	tokens := req.ReservePromptTokens()
	if tokens/1000 >= int64(room/perK) { // and no overflow below
		return base + room
	}
	return base + time.Duration(tokens)*perK/1000
}

// open sends the request to c's node and waits for its first byte, for at
// most firstByteWait. A non-streamed answer, or an error, is read whole,
// so that a provider that fails half-way through one is still replaced.
func (x *exchange) open(parent context.Context, c *candidate) (*answer, *attemptError) {
	g := x.g
	fail := func(status int, format string, args ...any) *attemptError {
		return &attemptError{node: c.NodeID, status: status, msg: fmt.Sprintf(format, args...)}
	}
	rt, ok := g.cfg.Nodes.Dial(c.NodeID)
	if !ok {
		return nil, fail(0, "no live session")
	}
	ctx, cancel := context.WithCancelCause(parent)
	wait := g.firstByteWait(x.req)
	firstByte := time.AfterFunc(wait, func() { cancel(errFirstByte) })
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://node"+idlegrid.InferencePath+string(x.req.Endpoint), bytes.NewReader(x.body))
	if err != nil {
		firstByte.Stop()
		cancel(nil)
		return nil, fail(0, "%v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idlegrid.ModelHeader, c.Model.Name)
	if x.req.Stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	sent := time.Now()
	a := &answer{ctx: ctx, cancel: cancel}
	a.resp, err = rt.RoundTrip(req)
	if err == nil {
		g.health.noteQueue(c.up, a.resp.Header.Get(idlegrid.ModelQueueHeader))
		err = a.readFirst(x.req.Stream, g.cfg.MaxAnswerBytes)
	}
	firstByte.Stop()
	if err != nil {
		a.close()
		if cause := context.Cause(ctx); cause == errFirstByte {
			f := fail(0, "no first byte within %v", wait)
			f.timedOut = true
			return nil, f
		}
		return nil, fail(0, "%v", err)
	}
	a.ttft = time.Since(sent)
	if st := a.resp.StatusCode; st >= 400 && retryable(st) {
		msg := upstreamMessage(a.first)
		a.close()
		return nil, fail(st, "%s", msg)
	}
	if !a.complete { // a whole answer has nothing left to stall
		a.stall = time.AfterFunc(g.cfg.StallTimeout, func() { cancel(errStalled) })
	}
	return a, nil
}

// readFirst reads the first chunk of a stream, or the whole of any other
// answer.
func (a *answer) readFirst(stream bool, limit int64) error {
	if !stream || a.resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(io.LimitReader(a.resp.Body, limit+1))
		if err != nil {
			return fmt.Errorf("the answer broke off: %w", err)
		} else if int64(len(b)) > limit {
			return fmt.Errorf("the answer is over %d bytes", limit)
		} else if len(b) == 0 && a.resp.StatusCode == http.StatusOK {
			return errors.New("an empty answer")
		}
		a.first, a.complete = b, true
		return nil
	}
	a.buf = bufPool.Get().(*[]byte)
	for {
		n, err := a.resp.Body.Read(*a.buf)
		if n > 0 {
			a.first = (*a.buf)[:n]
			return nil
		}
		if errors.Is(err, io.EOF) {
			return errors.New("the stream ended before its first event")
		} else if err != nil {
			return fmt.Errorf("the stream broke off before its first event: %w", err)
		}
	}
}

// read reads the next piece of a streamed answer, keeping the stall timer
// off while data flows.
func (a *answer) read(p []byte, stall time.Duration) (int, error) {
	n, err := a.resp.Body.Read(p)
	if n > 0 {
		a.stall.Reset(stall)
	}
	return n, err
}

func (a *answer) close() {
	if a.stall != nil {
		a.stall.Stop()
	}
	if a.resp != nil {
		a.resp.Body.Close()
	}
	a.cancel(nil)
	if a.buf != nil {
		bufPool.Put(a.buf)
		a.buf = nil
	}
}

// namesModel reports whether e's message speaks of the model: a 404 that
// does is the model not served (vLLM's "The model `x` does not exist",
// the agent's "this node does not serve model"), not the endpoint (Go's
// and FastAPI's "Not Found", the agent's "no such inference endpoint").
func (e *attemptError) namesModel() bool {
	return strings.Contains(strings.ToLower(e.msg), "model")
}

// retryable reports whether a provider's error status means another
// provider may do better: it is busy, broken, no longer serves the model,
// or refuses the gateway itself (401, 403, 407: the agent's credentials
// for its model server, which are the provider's, never the renter's). A
// renter's 401 passed on would read as a wrong API key to its SDK, and
// count against the renter's address as a failed login.
func retryable(status int) bool {
	switch status {
	case http.StatusNotFound, http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired:
		return true
	}
	return status >= 500
}

// upstreamMessage is the message of an OpenAI error body, or its start.
func upstreamMessage(body []byte) string {
	var e openai.ErrorBody
	if decodeJSON(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
