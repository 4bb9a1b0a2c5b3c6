package gateway

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/idlegrid/idlegrid"
)

// A provider's queue at its model server. The gateway counts its own
// requests in flight at each provider, but the model server may also be
// busy with others' (its owner's, another gateway's) and hold requests in
// its own queue. The agent reads how many wait there from the server's
// metrics and says so in two places: in each answer
// (idlegrid.ModelQueueHeader), which counts for queueFresh, and in each
// heartbeat (NoteQueues), which counts until the heartbeat after next is
// due, so that a provider the gateway has not called lately is known too.
// Routing counts the latest report into the provider's load while it
// holds.

// queueFresh is how long a reported queue depth counts. A provider
// reported busy gets fewer requests, and so fewer fresh reports: after
// this its queue is taken as empty again until an answer says otherwise.
const queueFresh = 10 * time.Second

// maxQueueDepth bounds a reported depth, so that a wild report cannot
// overflow the load.
const maxQueueDepth = 1 << 20

// noteQueue records the queue depth in an answer's header: a count, or
// nothing when the agent does not know it, which forgets the last.
func (h *healthBook) noteQueue(u *upstream, header string) {
	n, err := strconv.ParseInt(header, 10, 64)
	if header == "" || err != nil || n < 0 {
		u.queuedUntil.Store(0)
		return
	}
	u.setQueue(n, h.clock.Now().Add(queueFresh))
}

// setQueue records a report of n waiting, which holds until until.
func (u *upstream) setQueue(n int64, until time.Time) {
	u.queued.Store(min(n, maxQueueDepth))
	u.queuedUntil.Store(until.UnixNano())
}

// NoteQueues records the queues that node nodeID's agent reported in a
// heartbeat, each holding for validFor: those of the models the catalog
// lists the node serving. The others (a model the catalog does not know
// yet) are left for the next heartbeat, so that an agent cannot grow the
// gateway's memory with names.
func (g *Gateway) NoteQueues(nodeID string, queues []idlegrid.ModelQueue, validFor time.Duration) {
	until := g.health.clock.Now().Add(validFor)
	for _, q := range queues {
		key := providerKey(nodeID, q.Model)
		if q.Queued >= 0 && g.catalog.lists(key) {
			g.health.of(key).setQueue(q.Queued, until)
		}
	}
}

// reported is the requests waiting at u's model server by its last
// report, and whether that report is fresh at now.
func (u *upstream) reported(now time.Time) (int64, bool) {
	if now.UnixNano() > u.queuedUntil.Load() {
		return 0, false
	}
	return u.queued.Load(), true
}

// queue is the requests waiting at u's model server by its last fresh
// report at now; 0 when unknown or stale.
func (u *upstream) queue(now time.Time) int64 {
	n, _ := u.reported(now)
	return n
}

// load is pr as routing sees it at now, for the statistics.
func (h *healthBook) load(pr *provider, now time.Time) ProviderLoad {
	up := h.of(pr.key)
	ttft, tps, ok, state := up.snapshot()
	inflight := up.inflight.Load()
	l := ProviderLoad{NodeID: pr.NodeID, NodeName: pr.NodeName, Model: pr.Model.Name, InFlight: inflight, MaxConcurrency: pr.Model.MaxConcurrency,
		TTFTMS: ttft, TokensPerSecond: tps, SuccessRate: ok, Breaker: state.String()}
	q, fresh := up.reported(now)
	if fresh {
		l.Queued = &q
	}
	l.Load = loadOf(inflight, q, pr.Model.MaxConcurrency)
	l.TextCompletionsSkippedUntil = skippedUntil(&up.noTextUntil, now)
	l.ResponsesSkippedUntil = skippedUntil(&up.noResponsesUntil, now)
	return l
}

// skippedUntil is when an endpoint's skip (upstream.skipUntil) ends, or
// nil when it is not skipped at now.
func skippedUntil(until *atomic.Int64, now time.Time) *time.Time {
	ns := until.Load()
	if ns <= now.UnixNano() {
		return nil
	}
	t := time.Unix(0, ns).UTC()
	return &t
}

// loadOf is a provider's load: the requests it has in flight and those
// waiting at its model server, over its max concurrency.
func loadOf(inflight, queued int64, maxConcurrency int) float64 {
	return float64(inflight+queued) / float64(max(maxConcurrency, 1))
}
