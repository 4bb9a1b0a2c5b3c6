package gateway

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

func mustCandidate(name string, in, out idlegrid.Micros, load, ttft, tps float64) *candidate {
	return &candidate{
		provider: &provider{key: name + "/m", NodeID: name, ProviderID: "prov_" + name, Reliability: 0.9,
			Model: idlegrid.ModelOffer{Name: "m", InputMicrosPerMTokens: in, OutputMicrosPerMTokens: out, MaxConcurrency: 4}},
		load: load, full: load >= 1, ttft: ttft, tps: tps, ok: 1,
	}
}

func names(cs []*candidate) string {
	s := ""
	for i, c := range cs {
		if i > 0 {
			s += ","
		}
		s += c.NodeID
	}
	return s
}

func TestOrder(t *testing.T) {
	fresh := func() []*candidate {
		return []*candidate{
			mustCandidate("cheap-slow", 1, 1, 0, 900, 10),
			mustCandidate("dear-fast", 50, 50, 0, 100, 90),
			mustCandidate("mid-full", 5, 5, 1, 50, 200), // saturated
			mustCandidate("mid", 5, 5, 0.5, 300, 40),
		}
	}
	for _, tt := range []struct {
		name string
		p    idlegrid.Routing
		want string
	}{
		{"price", idlegrid.Routing{Sort: "price"}, "cheap-slow,mid,dear-fast,mid-full"},
		{"latency", idlegrid.Routing{Sort: "latency"}, "dear-fast,mid,cheap-slow,mid-full"},
		{"throughput", idlegrid.Routing{Sort: "throughput"}, "dear-fast,mid,cheap-slow,mid-full"},
		{"default weighs price by load", idlegrid.Routing{}, "cheap-slow,mid,dear-fast,mid-full"},
		{"order goes first", idlegrid.Routing{Sort: "price", Order: []string{"prov_dear-fast", "mid"}}, "dear-fast,mid,cheap-slow,mid-full"},
		{"order goes first, but not one at capacity", idlegrid.Routing{Sort: "price", Order: []string{"mid-full", "prov_dear-fast"}}, "dear-fast,cheap-slow,mid,mid-full"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cs := fresh()
			order(cs, &tt.p, 0)
			if got := names(cs); got != tt.want {
				t.Errorf("order = %s, want %s", got, tt.want)
			}
		})
	}
	t.Run("unmeasured first", func(t *testing.T) {
		for _, sort := range []string{"latency", "throughput"} {
			cs := []*candidate{
				mustCandidate("fast", 1, 1, 0, 100, 90),
				mustCandidate("new-busy", 1, 1, 0.5, 0, 0),
				mustCandidate("new", 1, 1, 0, 0, 0),
			}
			order(cs, &idlegrid.Routing{Sort: sort}, 0)
			if got := names(cs); got != "new,new-busy,fast" {
				t.Errorf("sort=%s: order = %s, want the unmeasured first, the less loaded of them first: new,new-busy,fast", sort, got)
			}
		}
	})
	t.Run("reliability", func(t *testing.T) {
		cs := []*candidate{mustCandidate("flaky", 1, 1, 0, 0, 0), mustCandidate("solid", 2, 2, 0, 0, 0)}
		cs[0].ok = 0.3
		order(cs, &idlegrid.Routing{}, 0)
		if got := names(cs); got != "solid,flaky" {
			t.Errorf("order = %s, want the reliable one first despite its price", got)
		}
	})
	t.Run("sticky prefix", func(t *testing.T) {
		first := map[string]int{}
		for prefix := uint64(1); prefix <= 64; prefix++ {
			var got string
			for range 3 { // the same prefix always lands on the same node
				cs := fresh()
				order(cs, &idlegrid.Routing{}, prefix)
				if got != "" && cs[0].NodeID != got {
					t.Fatalf("prefix %d went to %s, then %s", prefix, got, cs[0].NodeID)
				}
				got = cs[0].NodeID
			}
			first[got]++
		}
		if first["mid-full"] != 0 {
			t.Errorf("a saturated provider was chosen for a prefix")
		}
		if len(first) != 3 {
			t.Errorf("prefixes spread over %v, want all three unsaturated providers", first)
		}
		off := false
		cs := fresh()
		order(cs, &idlegrid.Routing{Sticky: &off}, 12345)
		if names(cs) != "cheap-slow,mid,dear-fast,mid-full" {
			t.Errorf("sticky off still moved a provider: %s", names(cs))
		}
	})
}

// TestOrder_modelServerQueue checks that a provider whose model server
// reports a queue goes after those with room, but before those the
// gateway has filled, and loses its prompt prefixes meanwhile.
func TestOrder_modelServerQueue(t *testing.T) {
	clock := &stepClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	h := &healthBook{}
	h.init(clock, 3, time.Second)
	queued := h.of("queued/m")
	h.noteQueue(queued, "6") // 6 waiting at its model server, max_concurrency 4
	fresh := func() []*candidate {
		q := mustCandidate("queued", 1, 1, 0, 0, 0)
		q.load = float64(queued.queue(clock.Now())) / 4
		return []*candidate{mustCandidate("full", 1, 1, 1, 0, 0), q, mustCandidate("dear", 9, 9, 0.25, 0, 0)}
	}
	cs := fresh()
	order(cs, &idlegrid.Routing{}, 0)
	if got := names(cs); got != "dear,queued,full" {
		t.Errorf("order = %s, want dear,queued,full", got)
	}
	for prefix := uint64(1); prefix <= 32; prefix++ {
		cs := fresh()
		order(cs, &idlegrid.Routing{}, prefix)
		if cs[0].NodeID != "dear" {
			t.Fatalf("prefix %d went to %s, a provider with a queue", prefix, cs[0].NodeID)
		}
	}
	if saturated(fresh()[1:]) {
		t.Errorf("a queue at the model server made the plan saturated: requests would wait in the gateway for a slot it holds free")
	}

	clock.advance(queueFresh + time.Second) // no answer since: the report is stale
	cs = fresh()
	order(cs, &idlegrid.Routing{}, 0)
	if got := names(cs); got != "queued,dear,full" {
		t.Errorf("order after the report went stale = %s, want queued,dear,full", got)
	}
	h.noteQueue(queued, "6")
	h.noteQueue(queued, "") // the agent no longer knows: forget
	if n := queued.queue(clock.Now()); n != 0 {
		t.Errorf("queue after an answer without a depth = %d, want 0", n)
	}
	for _, bad := range []string{"-3", "lots", "1e3"} {
		h.noteQueue(queued, "6")
		h.noteQueue(queued, bad)
		if n := queued.queue(clock.Now()); n != 0 {
			t.Errorf("queue after a report of %q = %d, want 0 (unknown)", bad, n)
		}
	}
	h.noteQueue(queued, "99999999999")
	if n := queued.queue(clock.Now()); n != maxQueueDepth {
		t.Errorf("queue after a wild report = %d, want it capped at %d", n, maxQueueDepth)
	}
}

type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *stepClock) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func TestHealthBook_breaker(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_800_000_000, 0)}
	var h healthBook
	h.init(clock, 3, 30*time.Second)
	u := h.of("n/m")
	state := func() breakerState { _, _, _, s := u.snapshot(); return s }
	for i := range 2 {
		if !h.allow(u) {
			t.Fatalf("closed breaker refused request %d", i)
		}
		h.failure(u)
	}
	h.success(u, time.Millisecond, 10) // a success resets the count
	for range 3 {
		h.allow(u)
		h.failure(u)
	}
	if state() != breakerOpen || h.allow(u) || h.usable(u) {
		t.Fatalf("after 3 failures in a row: state %v, want open and refusing", state())
	}
	clock.advance(30 * time.Second)
	if !h.usable(u) || !h.allow(u) {
		t.Fatal("after the cooldown the breaker must let one trial through")
	}
	if h.allow(u) || h.usable(u) {
		t.Fatal("a half-open breaker let a second request through while the trial is out")
	}
	h.failure(u)
	if state() != breakerOpen || h.allow(u) {
		t.Fatalf("a failed trial must reopen the breaker; state %v", state())
	}
	clock.advance(30 * time.Second)
	h.allow(u)
	h.release(u) // the renter went away: the trial is given back
	if !h.allow(u) {
		t.Fatal("a released trial was not given back")
	}
	h.success(u, time.Millisecond, 0)
	if state() != breakerClosed || !h.allow(u) || !h.allow(u) {
		t.Fatalf("a successful trial must close the breaker; state %v", state())
	}
	// Opened, failed its trial, reopened, half-opened again, closed.
	want := []BreakerStats{{NodeID: "n", Model: "m", State: "closed", Trips: 2, HalfOpens: 2, Closes: 1}}
	if got := h.breakers(); !reflect.DeepEqual(got, want) {
		t.Errorf("breakers() = %+v, want %+v", got, want)
	}
}

func TestHealthBook_breakers(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_800_000_000, 0)}
	var h healthBook
	h.init(clock, 2, 30*time.Second)
	h.of("node_a/org/model-7b") // used, never failing: not listed
	u := h.of("node_b/org/model-7b")
	for range 2 {
		h.allow(u)
		h.failure(u)
	}
	h.failure(u) // a request sent before the trip fails late: no new trip
	want := []BreakerStats{{NodeID: "node_b", Model: "org/model-7b", State: "open", Trips: 1}}
	if got := h.breakers(); !reflect.DeepEqual(got, want) {
		t.Errorf("breakers() = %+v, want %+v", got, want)
	}
}

// TestHealthBook_failureFor: failures that only the request may have
// caused open the breaker once they are of two renters' requests; a
// success starts the count, and the renters, afresh.
func TestHealthBook_failureFor(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_800_000_000, 0)}
	var h healthBook
	h.init(clock, 2, 30*time.Second)
	u := h.of("n/m")
	state := func() breakerState { _, _, _, s := u.snapshot(); return s }
	for range 5 {
		h.failureFor(u, "acct_a")
	}
	if state() != breakerClosed {
		t.Fatalf("after one renter's failures: %v, want closed", state())
	}
	h.success(u, 0, 0)
	h.failureFor(u, "acct_b")
	if state() != breakerClosed {
		t.Fatalf("after a success, the other renter's one failure: %v, want closed (a success forgets acct_a)", state())
	}
	h.failureFor(u, "acct_b")
	h.failureFor(u, "acct_a")
	if state() != breakerOpen {
		t.Fatalf("after two renters' failures in a row: %v, want open", state())
	}
	clock.advance(30 * time.Second)
	h.allow(u)
	h.failureFor(u, "acct_a")
	if state() != breakerOpen {
		t.Errorf("a half-open trial that failed: %v, want open again", state())
	}
}

func TestBudgets_take(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_800_000_000, 0)}
	t.Run("concurrency", func(t *testing.T) {
		var b budgets
		b.init(&Config{Clock: clock, KeyConcurrency: 2})
		_, k := b.of(&idlegrid.Caller{AccountID: "a", KeyID: "k"})
		if first, second := b.take(k), b.take(k); first != nil || second != nil {
			t.Fatal("two requests refused under a concurrency of 2")
		}
		if err := b.take(k); idlegrid.ErrorCode(err) != idlegrid.ETOOMANY {
			t.Fatalf("third request: %v, want too_many", err)
		}
		r := &reservation{b: &b, k: k, a: &accountBudget{}, slotted: true}
		r.done()
		if err := b.take(k); err != nil {
			t.Fatalf("after one finished: %v", err)
		}
	})
	t.Run("rate", func(t *testing.T) {
		var b budgets
		b.init(&Config{Clock: clock, KeyRequestsPerSecond: 2, KeyBurst: 3})
		_, k := b.of(&idlegrid.Caller{AccountID: "a", KeyID: "k"})
		for i := range 3 {
			if err := b.take(k); err != nil {
				t.Fatalf("request %d within the burst: %v", i, err)
			}
		}
		if err := b.take(k); idlegrid.ErrorCode(err) != idlegrid.ETOOMANY {
			t.Fatalf("request beyond the burst: %v, want too_many", err)
		}
		clock.advance(500 * time.Millisecond) // one token back at 2 a second
		if err := b.take(k); err != nil {
			t.Fatalf("after half a second: %v", err)
		}
		if err := b.take(k); idlegrid.ErrorCode(err) != idlegrid.ETOOMANY {
			t.Fatalf("second request after half a second: %v, want too_many", err)
		}
	})
}

// nodeLister is a store whose online nodes are nodes, counting the reads.
type nodeLister struct {
	idlegrid.Store
	nodes []*idlegrid.Node
	reads int
}

func (s *nodeLister) ListNodes(context.Context, idlegrid.NodeFilter) ([]*idlegrid.Node, error) {
	s.reads++
	return s.nodes, nil
}

// The catalog is read again once CatalogTTL has passed on the gateway's
// clock, not on the wall's.
func TestCatalog_ttlOnItsClock(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_800_000_000, 0)}
	store := &nodeLister{nodes: []*idlegrid.Node{{ID: "node_a", State: idlegrid.NodeOnline, Offer: idlegrid.Offer{Models: []idlegrid.ModelOffer{{Name: "org/m"}}}}}}
	var c catalog
	c.init(store, clock, time.Second)
	for range 2 {
		if ps, err := c.providers(context.Background(), "org/m"); err != nil || len(ps) != 1 {
			t.Fatalf("providers = %v, %v; want node_a's", ps, err)
		}
	}
	if store.reads != 1 {
		t.Fatalf("%d reads within the TTL, want 1", store.reads)
	}
	clock.advance(time.Second)
	if _, err := c.providers(context.Background(), "org/m"); err != nil || store.reads != 2 {
		t.Fatalf("after the TTL on the gateway's clock: %d reads (%v), want 2", store.reads, err)
	}
}

// The catalog remembers the models it listed for recentlyServed after
// their last provider left, on the gateway's clock, and forgets them then.
func TestCatalog_lastServed(t *testing.T) {
	clock := &stepClock{now: time.Unix(1_800_000_000, 0)}
	store := &nodeLister{nodes: []*idlegrid.Node{{ID: "node_a", State: idlegrid.NodeOnline, Offer: idlegrid.Offer{Models: []idlegrid.ModelOffer{{Name: "org/m"}}}}}}
	var c catalog
	c.init(store, clock, time.Second)
	if _, err := c.providers(context.Background(), "org/m"); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.lastServed("org/never"); ok {
		t.Error("a model never listed was served lately")
	}
	store.nodes = nil // its node withdrew it
	clock.advance(time.Second)
	if ps, err := c.providers(context.Background(), "org/m"); err != nil || len(ps) != 0 {
		t.Fatalf("providers after the withdrawal = %v, %v; want none", ps, err)
	}
	if ago, ok := c.lastServed("org/m"); !ok || ago != time.Second {
		t.Errorf("lastServed = %v, %v; want listed 1s ago", ago, ok)
	}
	clock.advance(recentlyServed - time.Second)
	if ago, ok := c.lastServed("org/m"); !ok || ago != recentlyServed {
		t.Errorf("lastServed at recentlyServed = %v, %v; want still lately", ago, ok)
	}
	clock.advance(time.Second)
	if _, ok := c.lastServed("org/m"); ok {
		t.Errorf("lastServed after recentlyServed says lately")
	}
	c.providers(context.Background(), "org/m") // a refresh forgets it
	if len(c.served) != 0 {
		t.Errorf("served = %v after recentlyServed, want it forgotten", c.served)
	}
}
