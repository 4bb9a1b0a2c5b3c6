package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// waitingRoom holds the requests that found every provider they may use at
// its max_concurrency, per model, until one of them has room. A request
// that leaves a provider wakes the model's waiters; each plans again, and
// those that still find no room wait on. So a burst above a model's
// capacity queues in the gateway for up to QueueTimeout, bounded by
// MaxQueue per model, instead of being refused.
type waitingRoom struct {
	mu     sync.Mutex
	models map[string]*queue
	// waiters counts every model's waiting requests, so that a request
	// leaving a provider while none wait (the usual case) takes no lock.
	// A waiter counts itself before it plans, and a leaving request frees
	// its slot before it looks: either the waiter's plan sees the slot, or
	// the leaving request sees the waiter and wakes it.
	waiters atomic.Int64
}

// queue is one model's waiting requests.
type queue struct {
	waiting int
	freed   chan struct{} // closed, and replaced, when a provider of the model has room again
}

func (w *waitingRoom) of(model string) *queue {
	if w.models == nil {
		w.models = map[string]*queue{}
	}
	q := w.models[model]
	if q == nil {
		q = &queue{freed: make(chan struct{})}
		w.models[model] = q
	}
	return q
}

// enter joins model's queue, unless limit requests wait already; it
// returns the channel that the next freed slot closes.
func (w *waitingRoom) enter(model string, limit int) (<-chan struct{}, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.of(model)
	if q.waiting >= limit {
		return nil, false
	}
	q.waiting++
	w.waiters.Add(1)
	return q.freed, true
}

// next is the channel the next freed slot of model closes, for a waiter
// that woke and must wait again.
func (w *waitingRoom) next(model string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.of(model).freed
}

func (w *waitingRoom) leave(model string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.of(model)
	w.waiters.Add(-1)
	if q.waiting--; q.waiting == 0 {
		delete(w.models, model)
	}
}

// freed wakes model's waiters, if any: a request left one of its providers.
func (w *waitingRoom) freed(model string) {
	if w.waiters.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.models[model]; q != nil {
		close(q.freed)
		q.freed = make(chan struct{})
	}
}

// depth is how many requests wait for each model now.
func (w *waitingRoom) depth() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.models))
	for m, q := range w.models {
		out[m] = q.waiting
	}
	return out
}

// saturated reports whether every provider of the plan is at its
// max_concurrency by this gateway's own count: order puts those last, so
// the first decides. A queue at the model servers does not count: waiting
// here would not shorten it.
func saturated(plan []*candidate) bool { return len(plan) > 0 && plan[0].full }

// waitForRoom plans the request again each time a provider of its model
// frees a slot, until a plan has a provider with room, QueueTimeout passes,
// or the renter goes away. With QueueTimeout negative it does not wait.
// A request that waited takes its slot at the first provider of its plan
// as it leaves the room, so that the waiters one freed slot wakes do not
// all go for it; it returns that candidate as held, and its request must
// leave it (Gateway.leave).
func (g *Gateway) waitForRoom(ctx context.Context, req *openai.Request, all []*provider, plan []*candidate) (_ []*candidate, held *candidate, _ error) {
	if !saturated(plan) || g.cfg.QueueTimeout < 0 {
		return plan, nil, nil
	}
	freed, ok := g.waiting.enter(req.Model, g.cfg.MaxQueue)
	if !ok {
		return nil, nil, retryAfter(idlegrid.Errorf(idlegrid.ETOOMANY,
			"every provider of model %q is at capacity and %d requests wait already; retry shortly", req.Model, g.cfg.MaxQueue), time.Second)
	}
	defer g.waiting.leave(req.Model)
	timeout := time.NewTimer(g.cfg.QueueTimeout)
	defer timeout.Stop()
	// Providers that join, reconnect or lose their session free no slot:
	// a waiter also looks again every replanEvery.
	replan := time.NewTicker(replanEvery)
	defer replan.Stop()
	for {
		// Planned after taking the channel, so that a slot freed since the
		// last plan is seen or wakes it.
		plan, why := g.plan(req, all, g.cfg.MaxAttempts)
		if len(plan) == 0 {
			return nil, nil, g.unavailable(g.noProvider(req.Model, len(all), why), all)
		}
		if c := plan[0]; !saturated(plan) && c.up.take(int64(c.Model.MaxConcurrency)) {
			return plan, c, nil
		}
		select {
		case <-freed:
		case <-replan.C:
			ps, err := g.catalog.providers(ctx, req.Model)
			if err != nil {
				return nil, nil, err
			}
			all = ps
		case <-timeout.C:
			return nil, nil, retryAfter(idlegrid.Errorf(idlegrid.ETOOMANY,
				"every provider of model %q stayed at capacity for %s; retry shortly", req.Model, g.cfg.QueueTimeout), time.Second)
		case <-ctx.Done():
			return nil, nil, idlegrid.Errorf(idlegrid.EUNAVAILABLE, "request cancelled")
		}
		freed = g.waiting.next(req.Model)
	}
}

// replanEvery is how often a waiting request plans again without being
// woken.
const replanEvery = time.Second

// take counts a request in at u if it has fewer than limit in flight.
func (u *upstream) take(limit int64) bool {
	for {
		n := u.inflight.Load()
		if n >= limit {
			return false
		}
		if u.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}
