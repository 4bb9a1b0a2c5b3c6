package gateway

import (
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// breakerState is where a provider's circuit breaker is.
type breakerState int

const (
	breakerClosed   breakerState = iota // requests flow
	breakerOpen                         // too many failures: no requests until the cooldown ends
	breakerHalfOpen                     // the cooldown ended: one trial request decides
)

func (s breakerState) String() string {
	return [...]string{"closed", "open", "half-open"}[s]
}

// upstream is what the gateway knows of one provider from its own
// requests: in flight now, its circuit breaker, and moving averages of its
// time to first byte, its tokens per second and its success.
type upstream struct {
	inflight    atomic.Int64
	queued      atomic.Int64 // at the model server, as last reported (queuedepth.go)
	queuedUntil atomic.Int64 // unix ns until which that report holds; 0: none
	// noTextUntil and noResponsesUntil are the unix ns until which it is
	// taken to serve no text completions, or no responses (notServing);
	// 0: none.
	noTextUntil, noResponsesUntil atomic.Int64

	mu        sync.Mutex
	state     breakerState
	failures  int       // in a row
	openUntil time.Time // while open
	trial     bool      // the half-open trial is out
	ttftMS    float64   // EWMA; 0: unknown
	tps       float64   // EWMA of completion tokens per second; 0: unknown
	okRate    float64   // EWMA of successes, starting at 1
	moves     breakerMoves
	// failedFor is the renter whose request was the first of the
	// failures in a row that only the request may have caused
	// (failureFor); failedForMore, that another renter's failed too.
	failedFor     string
	failedForMore bool
}

// breakerMoves counts a breaker's changes of state since the gateway
// started: trips (to open from closed or half-open), half-opens (a
// cooldown ended and a trial may go) and closes (a provider that had
// tripped answered again).
type breakerMoves struct {
	trips, halfOpens, closes int64
}

// ewmaWeight is how much one new sample moves a moving average.
const ewmaWeight = 0.2

// healthBook keeps every provider's upstream record.
type healthBook struct {
	clock    idlegrid.Clock
	failures int
	cooldown time.Duration
	m        sync.Map // provider key → *upstream
}

func (h *healthBook) init(c idlegrid.Clock, failures int, cooldown time.Duration) {
	h.clock, h.failures, h.cooldown = c, failures, cooldown
}

func (h *healthBook) of(key string) *upstream {
	if u, ok := h.m.Load(key); ok {
		return u.(*upstream)
	}
	u, _ := h.m.LoadOrStore(key, &upstream{okRate: 1})
	return u.(*upstream)
}

// allow reports whether the breaker lets a request through now: closed,
// or half-open with no trial out yet (this request becomes the trial).
func (h *healthBook) allow(u *upstream) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch u.state {
	case breakerOpen:
		if h.clock.Now().Before(u.openUntil) {
			return false
		}
		u.state, u.trial = breakerHalfOpen, false
		u.moves.halfOpens++
		fallthrough
	case breakerHalfOpen:
		if u.trial {
			return false
		}
		u.trial = true
	}
	return true
}

// usable reports, without taking the trial, whether allow could pass.
func (h *healthBook) usable(u *upstream) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch u.state {
	case breakerOpen:
		return !h.clock.Now().Before(u.openUntil)
	case breakerHalfOpen:
		return !u.trial
	}
	return true
}

// notServedMemory is how long the gateway remembers that a provider
// answered a text completion or a response 404: its model server serves
// none (a chat-only one, or one that predates the Responses API), until
// it is upgraded, say.
const notServedMemory = 10 * time.Minute

// skipUntil is where u keeps until when it is taken not to serve
// endpoint e; nil for the endpoints every provider serves (chats), or
// says it serves (embeddings).
func (u *upstream) skipUntil(e openai.Endpoint) *atomic.Int64 {
	switch e {
	case openai.Completions:
		return &u.noTextUntil
	case openai.Responses:
		return &u.noResponsesUntil
	}
	return nil
}

// notServing records that u answered a request of endpoint e (a text
// completion, POST /v1/completions, or a response, POST /v1/responses)
// 404: the next ones skip it for notServedMemory, so that a request
// tries the providers that may serve it.
func (h *healthBook) notServing(u *upstream, e openai.Endpoint) {
	if until := u.skipUntil(e); until != nil {
		until.Store(h.clock.Now().Add(notServedMemory).UnixNano())
	}
}

// serves reports whether u may serve endpoint e: it has not answered a
// request of it 404 within notServedMemory.
func (h *healthBook) serves(u *upstream, e openai.Endpoint) bool {
	until := u.skipUntil(e)
	return until == nil || h.clock.Now().UnixNano() >= until.Load()
}

// success records a request the provider answered, with its time to first
// byte (0: not measured, as for a non-streamed answer) and its completion
// tokens per second (0: not measured).
func (h *healthBook) success(u *upstream, ttft time.Duration, tps float64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.state != breakerClosed {
		u.moves.closes++
	}
	u.state, u.failures, u.trial = breakerClosed, 0, false
	u.failedFor, u.failedForMore = "", false
	u.okRate = ewma(u.okRate, 1)
	if ttft > 0 {
		u.ttftMS = ewma(u.ttftMS, float64(ttft)/float64(time.Millisecond))
	}
	if tps > 0 {
		u.tps = ewma(u.tps, tps)
	}
}

// failure records a request the provider failed; the breaker opens after
// enough in a row, or at once when the trial of a half-open one fails. A
// failure while it is open already (a request sent before it tripped)
// extends the cooldown but is no new trip.
func (h *healthBook) failure(u *upstream) {
	u.mu.Lock()
	defer u.mu.Unlock()
	h.fail(u, true)
}

// failureFor records a failure that the renter's request may have caused
// as well as the provider (a 500 or no first byte from a model's only
// provider: judgeErrors). It opens a closed breaker only once the
// failures in a row are of two renters' requests at least, so that one
// renter's requests cannot cut the model off for everyone; a half-open
// trial that fails opens it again, as any failure does.
func (h *healthBook) failureFor(u *upstream, renter string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch u.failedFor {
	case "":
		u.failedFor = renter
	case renter:
	default:
		u.failedForMore = true
	}
	h.fail(u, u.failedForMore)
}

// fail counts a failure in u, which the caller holds locked, and opens
// its breaker as failure says; mayTrip false keeps a closed one closed.
func (h *healthBook) fail(u *upstream, mayTrip bool) {
	u.failures++
	u.okRate = ewma(u.okRate, 0)
	open := u.state == breakerHalfOpen || (u.failures >= h.failures && (mayTrip || u.state == breakerOpen))
	if !open {
		return
	}
	if u.state != breakerOpen {
		u.moves.trips++
	}
	u.state, u.openUntil, u.trial = breakerOpen, h.clock.Now().Add(h.cooldown), false
}

// busy records a provider that answered it is at its concurrency (429).
// That is back-pressure from a provider that works, not a failure: it
// neither counts towards opening the breaker nor decides a half-open
// trial, which goes back for another request to take.
func (h *healthBook) busy(u *upstream) { h.release(u) }

// cooldownLeft is how long until u's open breaker lets a trial through;
// 0 when it is not open.
func (h *healthBook) cooldownLeft(u *upstream) time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.state != breakerOpen {
		return 0
	}
	return max(0, u.openUntil.Sub(h.clock.Now()))
}

// release gives back a half-open trial that ended neither way (the renter
// went away), so that another request may try.
func (h *healthBook) release(u *upstream) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.state == breakerHalfOpen {
		u.trial = false
	}
}

// snapshot reads the averages for routing.
func (u *upstream) snapshot() (ttftMS, tps, okRate float64, state breakerState) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ttftMS, u.tps, u.okRate, u.state
}

// breakers returns every breaker that has ever tripped, by node and model.
func (h *healthBook) breakers() []BreakerStats {
	var out []BreakerStats
	h.m.Range(func(k, v any) bool {
		u := v.(*upstream)
		u.mu.Lock()
		st, mv := u.state, u.moves
		u.mu.Unlock()
		if mv.trips == 0 {
			return true
		}
		node, model, _ := strings.Cut(k.(string), "/")
		out = append(out, BreakerStats{NodeID: node, Model: model, State: st.String(),
			Trips: mv.trips, HalfOpens: mv.halfOpens, Closes: mv.closes})
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].NodeID != out[j].NodeID {
			return out[i].NodeID < out[j].NodeID
		}
		return out[i].Model < out[j].Model
	})
	return out
}

// totals are the trips of every breaker since the gateway started, and
// how many breakers are open now.
func (h *healthBook) totals() (trips, open int64) {
	h.m.Range(func(_, v any) bool {
		u := v.(*upstream)
		u.mu.Lock()
		trips += u.moves.trips
		if u.state == breakerOpen {
			open++
		}
		u.mu.Unlock()
		return true
	})
	return trips, open
}

func ewma(old, sample float64) float64 {
	if old == 0 {
		return sample
	}
	return old + ewmaWeight*(sample-old)
}
