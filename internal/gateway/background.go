package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// Background responses: a Responses API request with background true is
// answered at once with its response queued, kept (kept.go), and run by
// the gateway in a goroutine of its own, as any request is run, but for
// the answer, which goes into the kept response instead of to the renter:
// the renter polls it (GET /v1/responses/{id}: queued, in_progress, then
// completed, incomplete, failed or cancelled) and may cancel it (POST
// /v1/responses/{id}/cancel).
//
// A run holds its response: every BackgroundHeartbeat it renews the
// response's HeldUntil, three heartbeats ahead. One still queued or in
// progress after its hold ran on a server that stopped (a crash), and the
// first server to read it records it failed (settle). Every write of a
// run, its heartbeat's included, is made over the object it stored last,
// so a run that finds its response changed by another server (cancelled,
// recorded failed, deleted) stops within a heartbeat and keeps nothing
// more (lose): of two writers, one wins, whichever server each runs on.
// A run also ends within backgroundDeadline. A streamed one logs its
// events for the renter to follow and resume (streamlog.go).
//
// Goroutines: each run is the gateway's (backgroundRuns), and each run's
// heartbeat its run's (holdWhileRunning); Close cancels the runs still
// running and waits for them to record how they ended.

// Why a background run was cancelled, as its context's cause.
var (
	errCancelled     = errors.New("cancelled by the renter")
	errGatewayClosed = errors.New("the server stopped before the response was done")
)

// backgroundDeadline is the longest a background response may run: the
// wait for room, every attempt's whole answer, and the write that keeps
// it, with a minute to spare.
func (g *Gateway) backgroundDeadline() time.Duration {
	return max(g.cfg.QueueTimeout, 0) + time.Duration(g.cfg.MaxAttempts)*g.cfg.AnswerTimeout + keepTimeout + time.Minute
}

// backgroundRuns are the background responses running in this gateway,
// by response ID.
type backgroundRuns struct {
	mu      sync.Mutex
	running map[string]*backgroundRun
	closed  bool
	wg      sync.WaitGroup
}

type backgroundRun struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// start runs fn in a goroutine of its own, as the run of response id,
// with a context that ends at deadline, when the run is cancelled, or
// when the gateway closes; false, running nothing, once it has closed.
func (b *backgroundRuns) start(id string, deadline time.Duration, fn func(ctx context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	if b.running == nil {
		b.running = map[string]*backgroundRun{}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	run := &backgroundRun{cancel: cancel, done: make(chan struct{})}
	b.running[id] = run
	b.wg.Go(func() {
		defer b.finish(id, run)
		ctx, stop := context.WithTimeout(ctx, deadline)
		defer stop()
		fn(ctx)
	})
	return true
}

func (b *backgroundRuns) finish(id string, run *backgroundRun) {
	b.mu.Lock()
	delete(b.running, id)
	b.mu.Unlock()
	run.cancel(nil)
	close(run.done)
}

// cancel cancels the run of response id, when it runs here, and waits at
// most wait for it to end; false when it does not run here.
func (b *backgroundRuns) cancel(id string, wait time.Duration) bool {
	b.mu.Lock()
	run, ok := b.running[id]
	b.mu.Unlock()
	if !ok {
		return false
	}
	run.cancel(errCancelled)
	select {
	case <-run.done:
	case <-time.After(wait):
	}
	return true
}

// stop cancels the run of response id, when it runs here, with cause,
// and does not wait: the run itself may call it.
func (b *backgroundRuns) stop(id string, cause error) {
	b.mu.Lock()
	run := b.running[id]
	b.mu.Unlock()
	if run != nil {
		run.cancel(cause)
	}
}

// n is how many runs there are.
func (b *backgroundRuns) n() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.running)
}

// runs reports whether response id runs here.
func (b *backgroundRuns) runs(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.running[id]
	return ok
}

// close cancels every run and waits for them to end; no run starts after.
func (b *backgroundRuns) close() {
	b.mu.Lock()
	b.closed = true
	for _, run := range b.running {
		run.cancel(errGatewayClosed)
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// startBackground keeps x's response queued, answers it, and runs x in
// the background. It owns x's reservation and its count among the active
// requests from here on, and ends both when the run ends. A streamed one
// is answered a stream instead: its queued response at once, then its
// run's events, which it logs to be resumed (streamlog.go), as they come.
func (g *Gateway) startBackground(w http.ResponseWriter, r *http.Request, x *exchange, rt route) error {
	k := x.kept
	now := g.cfg.Clock.Now()
	k.queued = x.queuedResponse(now)
	k.stored = k.queued
	kr := &idlegrid.KeptResponse{ID: k.id, RenterID: x.caller.AccountID, Model: x.req.Model, PreviousID: k.previous,
		Input: k.input, Response: k.queued, CreatedAt: now, ExpiresAt: now.Add(g.cfg.ResponseRetention), HeldUntil: now.Add(g.holdFor())}
	if err := g.cfg.Store.KeepResponse(r.Context(), kr); err != nil {
		x.endBackground()
		return err
	}
	out := &relay{}
	if x.req.Stream {
		out.log = newStreamLog(int(g.cfg.MaxAnswerBytes))
		out.log.append(responseEvent("response.created", 0, k.queued))
		g.streams.add(k.id, out.log)
	}
	own := r.Clone(context.Background()) // the run's, which outlives the handler
	if !g.background.start(k.id, g.backgroundDeadline(), func(ctx context.Context) {
		defer k.end()
		defer g.active.Leave()
		defer x.res.done()
		defer x.endStream(out.log)
		defer x.holdWhileRunning(ctx)()
		x.runBackground(ctx, own.WithContext(ctx), rt, out)
	}) {
		x.setBackground("failed", serverFailure(errGatewayClosed))
		x.endStream(out.log)
		x.endBackground()
		if !x.req.Stream {
			return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "the server is stopping; send the request again to another")
		}
	}
	if !x.req.Stream {
		writeRaw(w, http.StatusOK, k.queued)
		return nil
	}
	openStream(w)
	out.log.follow(r.Context(), w, -1, g.cfg.StallTimeout)
	return nil
}

// endBackground ends what startBackground owns, for a run that never
// started.
func (x *exchange) endBackground() {
	x.kept.end()
	x.res.release(0)
	x.res.done()
	x.g.active.Leave()
}

// runBackground runs x, its answer recorded by out, and keeps how it
// ended: the answer itself when there is one (keep), else failed or
// cancelled.
func (x *exchange) runBackground(ctx context.Context, r *http.Request, rt route, out *relay) {
	err := x.send(out, r, rt, func() { x.setBackground("in_progress", nil) })
	switch cause := context.Cause(ctx); {
	case x.kept.settled():
	case errors.Is(cause, errCancelled):
		x.setBackground("cancelled", nil)
	case cause == errGatewayClosed:
		x.setBackground("failed", serverFailure(cause))
	case errors.Is(cause, context.DeadlineExceeded):
		x.setBackground("failed", serverFailure(errors.New("the response took longer than a background response may run")))
	case err != nil:
		x.setBackground("failed", failureOf(err))
	default: // the model server refused it (its error passed on), its stream broke off, or it answered what is no response
		x.setBackground("failed", upstreamFailure(out.status, out.body.Bytes()))
	}
}

// failure is a failed response's error, as the Responses API gives it.
type failure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func serverFailure(err error) *failure { return &failure{"server_error", err.Error()} }

// failureOf is the failure of a run that ended in the gateway's error:
// the renter's request refused (invalid_prompt), a limit hit
// (rate_limit_exceeded), or the providers' failure (server_error).
func failureOf(err error) *failure {
	switch idlegrid.ErrorCode(err) {
	case idlegrid.EINVALID, idlegrid.ETOOLARGE:
		return &failure{"invalid_prompt", err.Error()}
	case idlegrid.ETOOMANY, idlegrid.EPAYMENT:
		return &failure{"rate_limit_exceeded", err.Error()}
	}
	return serverFailure(err)
}

// upstreamFailure is the failure of a run whose model server answered
// status, with body: a 4xx is the request's (a 429 never comes here: it
// sends the request to the next provider, retryable), else the model
// server's; a 200 that gave no response (a stream that broke off) says
// so rather than quote the stream.
func upstreamFailure(status int, body []byte) *failure {
	switch {
	case status >= 400 && status < 500:
		return &failure{"invalid_prompt", upstreamMessage(body)}
	case status == http.StatusOK: // what came was no whole response
		return &failure{"server_error", "the provider's answer broke off, or was no response, before the response was done"}
	}
	return &failure{"server_error", upstreamMessage(body)}
}

// queuedResponse is the response object of x, a background response, as
// it waits for a provider.
func (x *exchange) queuedResponse(now time.Time) json.RawMessage {
	k := x.kept
	b, _ := json.Marshal(map[string]any{
		"object": "response", "created_at": now.Unix(), "status": "queued",
		"model": x.req.Model, "output": []any{}, "error": nil, "incomplete_details": nil, "usage": nil,
	})
	b, _ = openai.Echo(b, k.echoed()) // its ID, store, previous_response_id, conversation, background
	return b
}

// setBackground keeps x's background response as queued but for its
// status, and why it failed (nil: it did not).
func (x *exchange) setBackground(status string, why *failure) {
	k := x.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lost {
		return
	}
	obj, err := openai.SetField(k.queued, "status", []byte(`"`+status+`"`))
	if err == nil && why != nil {
		detail, _ := json.Marshal(why)
		obj, err = openai.SetField(obj, "error", detail)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
		defer cancel()
		err = x.g.cfg.Store.UpdateResponse(ctx, x.caller.AccountID, k.id, k.stored, obj, x.g.cfg.Clock.Now())
	}
	x.wrote(err, obj, "record its state")
}

// keepAnswer keeps obj, the answer of x's background run, over what the
// run stored last.
func (x *exchange) keepAnswer(obj json.RawMessage) {
	k := x.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lost {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	err := x.g.cfg.Store.UpdateResponse(ctx, x.caller.AccountID, k.id, k.stored, obj, x.g.cfg.Clock.Now())
	x.wrote(err, obj, "keep its answer")
	k.done = err == nil
}

// wrote takes the outcome of a write of x's background response, made
// over what its run stored last, with k.mu held: the object now stored
// (nil for a write that changed only the hold), or why not. A write that
// another came before, or that finds the response gone, loses the run;
// any other failure is logged.
func (x *exchange) wrote(err error, obj json.RawMessage, what string) {
	k := x.kept
	switch idlegrid.ErrorCode(err) {
	case "":
		if obj != nil {
			k.stored = obj
		}
	case idlegrid.ECONFLICT, idlegrid.ENOTFOUND:
		x.lose()
	default:
		x.g.log.Error("gateway: a background response's run could not "+what, "request", x.id, "response", k.id, "err", err)
		x.g.metrics.notKept.Inc()
	}
}

// lose stops x's background run, whose response another write changed
// first (a cancel that a server not running it took; a server that found
// its hold run out and recorded it failed) or deleted, with k.mu held. The
// run keeps nothing more; the response stays as that write left it.
func (x *exchange) lose() {
	x.kept.lost = true
	x.g.metrics.runsLost.Inc()
	x.g.log.Info("gateway: a background response was changed or deleted elsewhere while it ran; its run stops", "request", x.id, "response", x.kept.id)
	x.g.background.stop(x.kept.id, errCancelled)
}

// holdFor is how far ahead a run holds its response: three heartbeats,
// so that one late or failed renewal does not lose it.
func (g *Gateway) holdFor() time.Duration { return 3 * g.cfg.BackgroundHeartbeat }

// holdWhileRunning renews the hold of x's background response every
// heartbeat, in a goroutine of its own, until ctx ends or the func it
// returns is called, which waits for it to stop.
func (x *exchange) holdWhileRunning(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		beat := time.NewTicker(x.g.cfg.BackgroundHeartbeat)
		defer beat.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-beat.C:
				x.renewHold()
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// renewHold holds x's background response for holdFor from now, while
// it is queued or in progress as its run stored it last.
func (x *exchange) renewHold() {
	k := x.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done || k.lost || !unfinished(k.stored) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), keepTimeout)
	defer cancel()
	now := x.g.cfg.Clock.Now()
	err := x.g.cfg.Store.HoldResponse(ctx, x.caller.AccountID, k.id, k.stored, now.Add(x.g.holdFor()), now)
	x.wrote(err, nil, "renew its hold")
}

// presented is kr's response object as the renter reads it: an orphaned
// one reads as failed, since the server that ran it stopped.
func (g *Gateway) presented(kr *idlegrid.KeptResponse) json.RawMessage {
	if !g.orphaned(kr) {
		return kr.Response
	}
	obj, err := openai.SetField(kr.Response, "status", []byte(`"failed"`))
	if err == nil {
		detail, _ := json.Marshal(serverFailure(errGatewayClosed))
		obj, err = openai.SetField(obj, "error", detail)
	}
	if err != nil {
		return kr.Response
	}
	return obj
}

// orphaned reports whether kr is a background response still queued or
// in progress that no run holds: its hold ran out, and it does not run
// here.
func (g *Gateway) orphaned(kr *idlegrid.KeptResponse) bool {
	held := kr.HeldUntil
	if held.IsZero() { // kept before holds: held as long as a run may take
		held = kr.CreatedAt.Add(g.backgroundDeadline())
	}
	return unfinished(kr.Response) && g.cfg.Clock.Now().After(held) && !g.background.runs(kr.ID)
}

// settle records kr failed when it is orphaned, so that a run that was
// only late (its heartbeats held up past its hold) finds its response
// changed at its next write and stops, rather than turning a failed
// response completed. It returns kr as it is now.
func (g *Gateway) settle(ctx context.Context, c *apiKey, kr *idlegrid.KeptResponse) (*idlegrid.KeptResponse, error) {
	if !g.orphaned(kr) {
		return kr, nil
	}
	kr, won, err := g.rewrite(ctx, c, kr, g.presented(kr))
	if won {
		g.log.Warn("gateway: a background response lost its run (its server stopped); recorded failed", "response", kr.ID)
		g.metrics.orphans.Inc()
	}
	return kr, err
}

// unfinished reports whether a response object is queued or in progress.
func unfinished(obj []byte) bool {
	st := gjson.GetBytes(obj, "status").Str
	return st == "queued" || st == "in_progress"
}

// answerRecorder takes a background run's answer: its status, and the
// start of its body, for the message of an error.
type answerRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *answerRecorder) Header() http.Header {
	if a.header == nil {
		a.header = http.Header{}
	}
	return a.header
}

func (a *answerRecorder) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *answerRecorder) Write(p []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	a.body.Write(p[:min(len(p), max(64<<10-a.body.Len(), 0))])
	return len(p), nil
}

// relay is a background run's writer: it records the answer
// (answerRecorder) and, for a streamed response, logs its events to be
// followed (log). It never fails the run's writes, and never waits on a
// renter.
type relay struct {
	answerRecorder
	log *streamLog // nil: the response is not streamed
}

// Write records p, and logs it when the answer is a stream's (a model
// server's error is recorded only: endStream says how the run ended).
func (l *relay) Write(p []byte) (int, error) {
	l.answerRecorder.Write(p)
	if l.log != nil && l.status == http.StatusOK {
		l.log.append(p)
	}
	return len(p), nil
}

// Flush does nothing: the log's followers flush what they write.
func (l *relay) Flush() {}
