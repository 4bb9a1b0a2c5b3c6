package gateway_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/gateway"
)

func TestGateway_routing(t *testing.T) {
	p := mustPair(t, nil) // alpha: eu-west, EU, 10/20; beta: us-east, US, 30/60
	a, b := p.NodeA.NodeID, p.NodeB.NodeID
	provider := func(prefs map[string]any) option.RequestOption { return option.WithJSONSet("provider", prefs) }
	for _, tt := range []struct {
		name  string
		prefs map[string]any
		want  string
	}{
		{"cheapest", map[string]any{"sort": "price"}, a},
		{"region", map[string]any{"region": []string{"us-east"}}, b},
		{"data residency", map[string]any{"data_residency": []string{"EU"}}, a},
		{"only", map[string]any{"only": []string{b}}, b},
		{"ignore", map[string]any{"sort": "price", "ignore": []string{a}}, b},
		{"order", map[string]any{"sort": "price", "order": []string{b}}, b},
		{"max price", map[string]any{"max_price": map[string]any{"prompt": 20, "completion": "25"}}, a},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for range 3 {
				_, resp, err := p.chat(t, provider(tt.prefs))
				if err != nil {
					t.Fatal(describe(err))
				}
				if got := resp.Header.Get("X-Idlegrid-Node"); got != tt.want {
					t.Errorf("served by %s, want %s", got, tt.want)
				}
			}
		})
	}
	t.Run("sticky prefix", func(t *testing.T) {
		var first string
		for i := range 6 {
			_, resp, err := p.chat(t)
			if err != nil {
				t.Fatal(describe(err))
			}
			got := resp.Header.Get("X-Idlegrid-Node")
			if i == 0 {
				first = got
			} else if got != first {
				t.Errorf("request %d with the same prompt went to %s, the first to %s", i, got, first)
			}
		}
	})
}

// TestGateway_modelServerQueue checks that a provider whose model server
// holds a queue (others' requests, which the gateway does not count) gets
// no more requests once an answer has said so, though it is the cheaper
// and the renter sorts by price. The heartbeats' reports are off, so that
// only the answers say it.
func TestGateway_modelServerQueue(t *testing.T) {
	p := mustPair(t, nil) // alpha: 10/20, max_concurrency 8; beta: 30/60, 8
	p.Server.ReportQueuesTo(nil)
	p.A.Waiting.Store(16)
	read := p.A.MetricsReads.Load()
	eventually(t, "alpha's agent to read its metrics", func() string {
		if p.A.MetricsReads.Load() < read+2 { // a read begun after the Store has ended
			return "not yet"
		}
		return ""
	})
	for i := range 6 {
		_, resp, err := p.chat(t, cheapestFirst)
		if err != nil {
			t.Fatal(describe(err))
		}
		if got := resp.Header.Get("X-Idlegrid-Node"); i > 0 && got != p.NodeB.NodeID {
			t.Errorf("request %d went to %s, whose model server has 16 waiting; want %s", i, got, p.NodeB.NodeID)
		}
	}
	if n := p.A.Served.Load(); n != 1 {
		t.Errorf("alpha served %d requests, want only the first (before the gateway knew its queue)", n)
	}
	// A renter has the whole answer before its handler counts the
	// provider's request done (the answer goes out before it is metered).
	mustSync(t, p.fixture)
	st, err := client.New(p.URL, p.RenterKey).InferenceStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	loads := map[string]gateway.ProviderLoad{}
	for _, l := range st.Providers {
		loads[l.NodeID] = l
	}
	a, b := loads[p.NodeA.NodeID], loads[p.NodeB.NodeID]
	if len(st.Providers) != 2 || a.Queued == nil || *a.Queued != 16 || a.Load != 2 || a.MaxConcurrency != 8 || a.Breaker != "closed" || a.NodeName != "alpha" {
		t.Errorf("stats show alpha as %+v (queued %v), want 16 queued at its model server, load 2", a, a.Queued)
	}
	// Non-streamed answers measure throughput, not time to first byte,
	// which comes with their last.
	if b.Queued == nil || *b.Queued != 0 || b.InFlight != 0 || b.Load != 0 || b.TTFTMS != 0 || b.TokensPerSecond <= 0 || b.SuccessRate != 1 {
		t.Errorf("stats show beta as %+v (queued %v), want none queued or in flight, and its throughput measured", b, b.Queued)
	}
}

// TestGateway_modelServerQueueHeartbeat checks that the gateway learns a
// model server's queue from its agent's heartbeats, before it has sent the
// provider a request: the cheaper provider, whose server holds 16
// waiting, gets none.
func TestGateway_modelServerQueueHeartbeat(t *testing.T) {
	p := mustPair(t, nil) // alpha: 10/20, max_concurrency 8; beta: 30/60, 8
	p.A.Waiting.Store(16)
	rc := client.New(p.URL, p.RenterKey)
	eventually(t, "a heartbeat to report alpha's queue", func() string {
		st, err := rc.InferenceStats(context.Background())
		if err != nil {
			return err.Error()
		}
		for _, l := range st.Providers {
			if l.NodeID == p.NodeA.NodeID && l.Queued != nil && *l.Queued == 16 {
				return ""
			}
		}
		return fmt.Sprintf("stats: %+v", st.Providers)
	})
	if n := p.A.Served.Load() + p.B.Served.Load(); n != 0 {
		t.Fatalf("the providers served %d requests before any was sent", n)
	}
	for i := range 4 {
		_, resp, err := p.chat(t, cheapestFirst)
		if err != nil {
			t.Fatal(describe(err))
		}
		if got := resp.Header.Get("X-Idlegrid-Node"); got != p.NodeB.NodeID {
			t.Errorf("request %d went to %s, whose model server has 16 waiting; want %s", i, got, p.NodeB.NodeID)
		}
	}
}

// TestGateway_concurrentStreams runs more streams at once than alpha's
// max_concurrency (8): the rest spill over to beta, and every one is
// charged exactly once, at the price of the node that served it.
func TestGateway_concurrentStreams(t *testing.T) {
	p := mustPair(t, nil)
	const n = 12
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			text, err := p.stream(t, cheapestFirst)
			if err == nil && text != "Hello from alpha." && text != "Hello from beta." {
				err = &idlegrid.Error{Code: idlegrid.EINTERNAL, Message: "got " + text}
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(describe(err))
	}
	mustSync(t, p.fixture)
	ctx := context.Background()
	bal, err := p.Admin.Balance(ctx, p.RenterID)
	if err != nil {
		t.Fatal(err)
	}
	us, err := p.Store.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: p.RenterID, Limit: 100})
	if err != nil || len(us) != n {
		t.Fatalf("%d usage records (%v), want %d", len(us), err, n)
	}
	var charged idlegrid.Micros
	for _, u := range us {
		want := idlegrid.Micros(wantCharge) // alpha's price
		if u.NodeID == p.NodeB.NodeID {
			want = 7*30 + 5*60
		}
		if u.ChargeMicros != want {
			t.Errorf("request on %s charged %d, want %d", u.NodeID, u.ChargeMicros, want)
		}
		charged += u.ChargeMicros
	}
	if want := 100*idlegrid.MicrosPerUnit - charged; bal.Available != want {
		t.Errorf("renter available = %d after %d streams, want %d", bal.Available, n, want)
	}
	if sum, err := p.Store.LedgerSum(ctx); err != nil || sum != 0 {
		t.Errorf("ledger sums to %d (%v)", sum, err)
	}
}

// TestGateway_usageAsSeenByProvider: a request's usage names the renter's
// key to the renter, and not to the provider that served it.
func TestGateway_usageAsSeenByProvider(t *testing.T) {
	p := mustPair(t, nil)
	if _, _, err := p.chat(t, cheapestFirst); err != nil {
		t.Fatal(describe(err))
	}
	mustSync(t, p.fixture)
	ctx := context.Background()
	mine, err := client.New(p.URL, p.RenterKey).InferenceUsage(ctx, idlegrid.UsageFilter{})
	if err != nil || len(mine) != 1 || mine[0].KeyID != p.RenterKeyID {
		t.Fatalf("the renter's usage: %+v, %v; want one request naming its key %s", mine, err, p.RenterKeyID)
	}
	served, err := client.New(p.URL, p.providerKey).InferenceUsage(ctx, idlegrid.UsageFilter{})
	if err != nil || len(served) != 1 || served[0].RenterID != p.RenterID || served[0].KeyID != "" {
		t.Fatalf("the provider's usage: %+v, %v; want the request, its renter named, not the renter's key", served, err)
	}
}
