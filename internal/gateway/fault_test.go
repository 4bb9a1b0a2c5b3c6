package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gateway"
)

// pair is a fixture with two providers of testModel: a (cheaper, so that
// sort=price tries it first) and b.
type pair struct {
	*fixture
	A, B         *mock
	NodeA, NodeB *testAgent
}

func mustPair(tb testing.TB, tune func(*gateway.Config)) *pair {
	tb.Helper()
	f := mustFixture(tb, tune)
	p := &pair{fixture: f, A: mustMock(tb, "alpha"), B: mustMock(tb, "beta")}
	p.NodeA = f.startAgent(tb, "alpha", "eu-west", "EU", p.A.model(testModel, "10", "20", 8))
	p.NodeB = f.startAgent(tb, "beta", "us-east", "US", p.B.model(testModel, "30", "60", 8))
	f.waitProviders(tb, testModel, 2)
	return p
}

// cheapestFirst asks the gateway to try the cheaper provider, a, first.
var cheapestFirst = option.WithJSONSet("provider", map[string]any{"sort": "price"})

func (p *pair) chat(tb testing.TB, opts ...option.RequestOption) (*oai.ChatCompletion, *http.Response, error) {
	tb.Helper()
	var resp *http.Response
	c := p.sdk(p.RenterKey)
	got, err := c.Chat.Completions.New(context.Background(), chatParams("Hi"), append(opts, option.WithResponseInto(&resp))...)
	return got, resp, err
}

// stream reads a whole stream and returns its text and error.
func (p *pair) stream(tb testing.TB, opts ...option.RequestOption) (string, error) {
	tb.Helper()
	c := p.sdk(p.RenterKey)
	s := c.Chat.Completions.NewStreaming(context.Background(), chatParams("Hi"), opts...)
	var text strings.Builder
	for s.Next() {
		for _, ch := range s.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	return text.String(), s.Err()
}

func TestGateway_failover(t *testing.T) {
	for _, tt := range []struct {
		fault  string
		stream bool
	}{
		{fault500, false}, {fault500, true},
		{fault429, false}, {fault429, true},
		{faultSlowFirst, false}, {faultSlowFirst, true},
		{fault401, false}, {fault401, true}, // the provider's credentials, not the renter's
	} {
		name := tt.fault
		if tt.stream {
			name += "/stream"
		}
		t.Run(name, func(t *testing.T) {
			p := mustPair(t, func(c *gateway.Config) {
				c.FirstByteTimeout, c.AnswerTimeout = 5*time.Second, 5*time.Second // long enough for beta on a loaded machine; alpha's slow first byte never comes
			})
			p.A.set(tt.fault)
			var text string
			var err error
			if tt.stream {
				text, err = p.stream(t, cheapestFirst)
			} else {
				var got *oai.ChatCompletion
				if got, _, err = p.chat(t, cheapestFirst); err == nil {
					text = got.Choices[0].Message.Content
				}
			}
			if err != nil || text != "Hello from beta." {
				t.Fatalf("got %q, %v; want beta's answer after alpha failed", text, describe(err))
			}
			if p.A.Calls.Load() != 1 || p.A.Served.Load() != 0 {
				t.Errorf("alpha got %d calls and served %d; want 1 failed call", p.A.Calls.Load(), p.A.Served.Load())
			}
			mustSync(t, p.fixture)
			us, err := p.Store.ListInferenceUsage(context.Background(), idlegrid.UsageFilter{AccountID: p.RenterID, Limit: 10})
			if err != nil || len(us) != 1 {
				t.Fatalf("usage records %v, %v; want one", us, err)
			}
			if u := us[0]; u.NodeID != p.NodeB.NodeID || u.Attempts != 2 || u.ChargeMicros != 7*30+5*60 {
				t.Errorf("usage = %+v; want beta, 2 attempts, beta's price", u)
			}
		})
	}
}

func TestGateway_allProvidersFail(t *testing.T) {
	p := mustPair(t, nil)
	t.Run("busy", func(t *testing.T) {
		p.A.set(fault429)
		p.B.set(fault429)
		_, _, err := p.chat(t)
		if e := apiError(t, err); e.StatusCode != 429 || e.Type != "rate_limit_error" || e.Response.Header.Get("Retry-After") != "1" {
			t.Errorf("got %d %s (%s), Retry-After %q; want 429 rate_limit_error, retry after 1 s",
				e.StatusCode, e.Type, e.Message, e.Response.Header.Get("Retry-After"))
		}
	})
	t.Run("broken", func(t *testing.T) {
		p.A.set(fault500)
		p.B.set(fault500)
		_, _, err := p.chat(t)
		if e := apiError(t, err); e.StatusCode != 503 || !strings.Contains(e.Message, "CUDA out of memory") {
			t.Errorf("got %d %s (%s), want 503 naming the providers' errors", e.StatusCode, e.Type, e.Message)
		}
	})
	t.Run("refuse the gateway", func(t *testing.T) {
		// A model server refusing the agent's credentials is the
		// providers' fault: never a 401 that the renter's SDK reads as a
		// wrong key, nor one that counts as the renter's failed login.
		p.A.set(fault401)
		p.B.set(fault401)
		for i := range 35 {
			_, _, err := p.chat(t)
			e := apiError(t, err)
			if e.StatusCode != 503 || i == 0 && !strings.Contains(e.Message, "Incorrect API key") {
				t.Fatalf("request %d: got %d %s (%s), want 503 (the first naming the providers' refusals; later ones, their open breakers)",
					i, e.StatusCode, e.Type, e.Message)
			}
		}
	})
	t.Run("no fallbacks", func(t *testing.T) {
		p.A.set(fault500)
		p.B.set(faultNone)
		calls := p.B.Calls.Load()
		_, _, err := p.chat(t, option.WithJSONSet("provider", map[string]any{"sort": "price", "allow_fallbacks": false}))
		if e := apiError(t, err); e.StatusCode != 503 || p.B.Calls.Load() != calls {
			t.Errorf("got %d (%s), beta called %d times; want 503 and no fallback", e.StatusCode, e.Message, p.B.Calls.Load()-calls)
		}
	})
	mustSync(t, p.fixture)
	if bal, err := p.Admin.Balance(context.Background(), p.RenterID); err != nil || bal.Available != 100*idlegrid.MicrosPerUnit {
		t.Errorf("balance %+v (%v): failed requests must cost nothing", bal, err)
	}
}

func TestGateway_circuitBreaker(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	p := mustPair(t, func(c *gateway.Config) {
		c.Clock, c.BreakerFailures, c.BreakerCooldown = clock, 2, time.Minute
	})
	p.A.set(fault500)
	for i := range 2 {
		if _, _, err := p.chat(t, cheapestFirst); err != nil {
			t.Fatalf("request %d: %v (beta should have answered)", i, err)
		}
	}
	if got := p.A.Calls.Load(); got != 2 {
		t.Fatalf("alpha got %d calls, want 2 before its breaker opens", got)
	}
	t.Run("stats count the trip", func(t *testing.T) {
		want := []gateway.BreakerStats{{NodeID: p.NodeA.NodeID, NodeName: "alpha", Model: testModel, State: "open", Trips: 1}}
		if got := mustBreakers(t, p.fixture); !slices.Equal(got, want) {
			t.Errorf("breakers = %+v, want %+v", got, want)
		}
	})
	t.Run("open: alpha is skipped", func(t *testing.T) {
		for range 3 {
			if _, _, err := p.chat(t, cheapestFirst); err != nil {
				t.Fatal(err)
			}
		}
		if got := p.A.Calls.Load(); got != 2 {
			t.Errorf("alpha got %d calls, want none while its breaker is open", got-2)
		}
	})
	t.Run("half-open: one trial, which closes it", func(t *testing.T) {
		p.A.set(faultNone)
		clock.advance(time.Minute)
		got, resp, err := p.chat(t, cheapestFirst)
		if err != nil || got.Choices[0].Message.Content != "Hello from alpha." {
			t.Fatalf("trial: %v, %v; want alpha to answer", got, err)
		}
		if n := resp.Header.Get("X-Idlegrid-Node"); n != p.NodeA.NodeID {
			t.Errorf("served by %s, want alpha", n)
		}
		// The renter has the whole answer before the gateway counts the
		// trial done (the answer goes out first): until then a request
		// goes elsewhere, as the half-open breaker allows one trial.
		mustSync(t, p.fixture)
		if _, _, err := p.chat(t, cheapestFirst); err != nil || p.A.Served.Load() != 2 {
			t.Errorf("after the trial alpha served %d, want 2 (%v)", p.A.Served.Load(), err)
		}
		want := []gateway.BreakerStats{{NodeID: p.NodeA.NodeID, NodeName: "alpha", Model: testModel, State: "closed", Trips: 1, HalfOpens: 1, Closes: 1}}
		if got := mustBreakers(t, p.fixture); !slices.Equal(got, want) {
			t.Errorf("breakers = %+v, want %+v", got, want)
		}
	})
}

// TestGateway_modelGone: a node that answers 404 for a model the catalog
// says it serves no longer serves it. The request goes to the next
// provider, and the gateway reads the catalog again at the next request,
// not when it ages out; a request that went well leaves it be.
func TestGateway_modelGone(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	var reads atomic.Int64
	p := mustPair(t, func(c *gateway.Config) {
		c.Clock, c.Store = clock, &catalogReads{Store: c.Store, n: &reads}
	})
	ask := func(want string) int64 {
		t.Helper()
		before := reads.Load()
		got, _, err := p.chat(t, cheapestFirst)
		if err != nil || got.Choices[0].Message.Content != want {
			t.Fatalf("got %v, %v; want %q", got, describe(err), want)
		}
		return reads.Load() - before
	}
	if n := ask("Hello from alpha."); n != 0 {
		t.Fatalf("a request alpha answered read the catalog %d times, want none: it has not aged", n)
	}
	p.A.set(faultGone)
	if n := ask("Hello from beta."); n != 0 {
		t.Fatalf("the request alpha refused read the catalog %d times, want none until the next", n)
	}
	if n := ask("Hello from beta."); n != 1 {
		t.Errorf("the request after alpha's 404 read the catalog %d times, want once", n)
	}
}

// TestGateway_endpointNotServed: model servers that serve no
// /v1/completions (chat-only ones) answer it 404. The renter gets a 404
// naming the endpoint, which SDKs do not retry, the next text completions
// skip those providers, and their breakers stay shut: requests for an
// endpoint nobody serves must not cut the model's providers off for
// everyone's chats. A chat's 404 still counts.
func TestGateway_endpointNotServed(t *testing.T) {
	p := mustPair(t, func(c *gateway.Config) { c.BreakerFailures = 2 })
	p.A.set(faultChatOnly)
	p.B.set(faultChatOnly)
	c := p.sdk(p.RenterKey)
	for i := range 3 {
		_, err := c.Completions.New(context.Background(), oai.CompletionNewParams{
			Model: testModel, Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once upon")},
		})
		if err == nil {
			t.Fatalf("completion %d: answered by model servers that serve none", i)
		}
		e := apiError(t, err)
		if e.StatusCode != http.StatusNotFound || e.Type != "not_found_error" || !strings.Contains(e.Message, "/v1/completions") {
			t.Fatalf("completion %d: %d %s (%s), want 404 not_found_error naming /v1/completions", i, e.StatusCode, e.Type, e.Message)
		}
	}
	if a, b := p.A.Calls.Load(), p.B.Calls.Load(); a != 1 || b != 1 {
		t.Errorf("the model servers got %d and %d requests, want 1 each: each provider is tried, then skipped", a, b)
	}
	if got := mustBreakers(t, p.fixture); len(got) != 0 {
		t.Errorf("breakers = %+v, want none tripped", got)
	}
	if got, _, err := p.chat(t, cheapestFirst); err != nil || got.Choices[0].Message.Content != "Hello from alpha." {
		t.Errorf("a chat after them: %v, %s; want alpha's answer", got, describe(err))
	}
	// A 404 to a chat, which every provider serves, is still a failure:
	// the model gone from its server.
	p.A.set(faultGone)
	for range 2 {
		p.chat(t, cheapestFirst)
	}
	if got := mustBreakers(t, p.fixture); len(got) != 1 || got[0].NodeID != p.NodeA.NodeID || got[0].State != "open" {
		t.Errorf("breakers after alpha answered two chats 404 = %+v, want alpha's open", got)
	}
}

// TestGateway_textCompletionsSkipChatOnly: a provider that answered a
// text completion 404 is skipped by the next ones for a while, so that
// they reach the providers that serve them, though the request may try
// only one (MaxAttempts 1); after the while it is tried again.
func TestGateway_textCompletionsSkipChatOnly(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	p := mustPair(t, func(c *gateway.Config) { c.Clock, c.MaxAttempts = clock, 1 })
	p.A.set(faultChatOnly) // alpha is the cheaper, tried first
	c := p.sdk(p.RenterKey)
	complete := func() (string, error) {
		got, err := c.Completions.New(context.Background(), oai.CompletionNewParams{
			Model: testModel, Prompt: oai.CompletionNewParamsPromptUnion{OfString: oai.String("Once upon")},
		}, cheapestFirst)
		if err != nil {
			return "", err
		}
		return got.Choices[0].Text, nil
	}
	if _, err := complete(); err == nil || apiError(t, err).StatusCode != http.StatusNotFound {
		t.Fatalf("the first completion, tried at chat-only alpha alone: %v, want a 404", describe(err))
	}
	for i := range 2 {
		if got, err := complete(); err != nil || got != "Hello from beta." {
			t.Fatalf("completion %d after alpha's 404: %q, %v; want beta's answer", i, got, describe(err))
		}
	}
	if got := p.A.Calls.Load(); got != 1 {
		t.Errorf("alpha got %d requests, want 1: skipped once it answered 404", got)
	}
	want := clock.Now().Add(10 * time.Minute)
	for _, l := range mustStats(t, p.fixture).Providers {
		if skipped := l.TextCompletionsSkippedUntil; (l.NodeID == p.NodeA.NodeID) != (skipped != nil) || skipped != nil && !skipped.Equal(want) {
			t.Errorf("GET /v1/inference/stats: %s's text completions skipped until %v, want %v for alpha alone", l.NodeName, skipped, want)
		}
	}
	clock.advance(11 * time.Minute)
	complete()
	if got := p.A.Calls.Load(); got != 2 {
		t.Errorf("alpha got %d requests 11 minutes on, want 2: tried again", got)
	}
}

// catalogReads counts the gateway's reads of its catalog: the nodes that
// serve models.
type catalogReads struct {
	idlegrid.Store
	n *atomic.Int64
}

func (c *catalogReads) ListNodes(ctx context.Context, f idlegrid.NodeFilter) ([]*idlegrid.Node, error) {
	if f.ServesModels {
		c.n.Add(1)
	}
	return c.Store.ListNodes(ctx, f)
}

// A provider at its concurrency answers 429. That is back-pressure from a
// provider that works: the request goes to the next provider, and the
// busy one's breaker stays closed however often it says so.
func TestGateway_busyIsNoFailure(t *testing.T) {
	p := mustPair(t, func(c *gateway.Config) { c.BreakerFailures = 2 })
	p.A.set(fault429)
	answer := func() string {
		got, _, err := p.chat(t, cheapestFirst)
		if err != nil {
			return describe(err)
		}
		return got.Choices[0].Message.Content
	}
	for i := range 4 {
		if got := answer(); got != "Hello from beta." {
			t.Fatalf("request %d: %s; want beta's answer", i, got)
		}
	}
	if got := p.A.Calls.Load(); got != 4 {
		t.Errorf("alpha got %d calls, want all 4: a busy provider is tried first again", got)
	}
	if got := mustBreakers(t, p.fixture); len(got) != 0 {
		t.Errorf("breakers = %+v, want none tripped", got)
	}
	p.A.set(faultNone)
	if got := answer(); got != "Hello from alpha." {
		t.Errorf("once alpha has room: %s; want alpha's answer", got)
	}
}

// When every provider's breaker is open the renter is told when to retry:
// when the first of them lets a trial through.
func TestGateway_retryAfterBreakers(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	p := mustPair(t, func(c *gateway.Config) {
		c.Clock, c.BreakerFailures, c.BreakerCooldown = clock, 1, time.Minute
	})
	p.A.set(fault401) // each provider's own fault (a 500 from both would be the request's: TestGateway_requestAtFault)
	p.B.set(fault401)
	_, _, err := p.chat(t)
	if e := apiError(t, err); e.StatusCode != 503 || e.Response.Header.Get("Retry-After") != "60" {
		t.Errorf("both failing: %d (%s), Retry-After %q; want 503, retry after 60 s", e.StatusCode, e.Message, e.Response.Header.Get("Retry-After"))
	}
	clock.advance(20 * time.Second)
	_, _, err = p.chat(t)
	if e := apiError(t, err); e.StatusCode != 503 || e.Response.Header.Get("Retry-After") != "40" || !strings.Contains(e.Message, "circuit breaker open") {
		t.Errorf("both cut off: %d (%s), Retry-After %q; want 503 naming the breakers, retry after 40 s",
			e.StatusCode, e.Message, e.Response.Header.Get("Retry-After"))
	}
	if calls := p.A.Calls.Load() + p.B.Calls.Load(); calls != 2 {
		t.Errorf("the providers got %d calls, want 2: none while their breakers are open", calls)
	}
}

// TestGateway_requestAtFault: a request the model servers answer 500, or
// give no first byte in time, none answering it, may be at fault (a
// prompt they all choke on), not them: their breakers stay shut however
// often a renter sends it, to all providers or to one at a time
// (allow_fallbacks false), so that it cannot cut the model off for
// everyone. A provider that fails a request another answers still fails.
func TestGateway_requestAtFault(t *testing.T) {
	for _, fault := range []string{fault500, faultSlowFirst} {
		t.Run(fault, func(t *testing.T) {
			p := mustPair(t, func(c *gateway.Config) {
				c.BreakerFailures, c.FirstByteTimeout, c.AnswerTimeout = 2, time.Second, time.Second // long enough for beta on a loaded machine
			})
			defer p.A.free()
			defer p.B.free()
			p.A.set(fault)
			p.B.set(fault)
			for i := range 3 {
				_, _, err := p.chat(t, cheapestFirst)
				if e := apiError(t, err); e.StatusCode != 503 {
					t.Fatalf("request %d: %d %s (%s), want 503", i, e.StatusCode, e.Type, e.Message)
				}
			}
			if a, b := p.A.Calls.Load(), p.B.Calls.Load(); a != 3 || b != 3 {
				t.Errorf("the model servers got %d and %d requests, want 3 each: no breaker opened", a, b)
			}
			if got := mustBreakers(t, p.fixture); len(got) != 0 {
				t.Errorf("breakers = %+v, want none tripped", got)
			}
			p.B.set(faultNone)
			alphaOnly := option.WithJSONSet("provider", map[string]any{"sort": "price", "allow_fallbacks": false})
			for i := range 3 {
				got, _, err := p.chat(t, alphaOnly)
				if err == nil {
					t.Fatalf("request %d to the cheapest alone: answered %q, want alpha's failure (beta answers only once alpha is cut off)", i, got.Choices[0].Message.Content)
				}
				if e := apiError(t, err); e.StatusCode != 503 {
					t.Fatalf("request %d to alpha alone: %d %s, want 503", i, e.StatusCode, e.Message)
				}
			}
			if got := mustBreakers(t, p.fixture); len(got) != 0 {
				t.Errorf("breakers after requests alpha alone was asked and failed = %+v, want none tripped", got)
			}
			for i := range 2 {
				if got, _, err := p.chat(t, cheapestFirst); err != nil || got.Choices[0].Message.Content != "Hello from beta." {
					t.Fatalf("request %d with beta mended: %v, %s; want beta's answer", i, got, describe(err))
				}
			}
			if got := mustBreakers(t, p.fixture); len(got) != 1 || got[0].NodeID != p.NodeA.NodeID || got[0].State != "open" {
				t.Errorf("breakers after alpha failed two requests beta answered = %+v, want alpha's open", got)
			}
		})
	}
}

// TestGateway_soleProviderAtFault: the 500s of a model's only provider,
// which the renter's request may have caused as well as the provider,
// open its breaker only once two renters' requests have failed, so that
// one renter cannot cut the model off for everyone.
func TestGateway_soleProviderAtFault(t *testing.T) {
	for _, fault := range []string{fault500, faultSlowFirst} {
		t.Run(fault, func(t *testing.T) {
			f, up := mustSolo(t, func(c *gateway.Config) {
				c.BreakerFailures, c.FirstByteTimeout, c.AnswerTimeout = 2, 200*time.Millisecond, time.Second
			})
			defer up.free()
			up.set(fault)
			first, second := f.sdk(f.RenterKey), f.sdk(f.mustRenter(t, "second"))
			chat := func(c oai.Client) error {
				_, err := c.Chat.Completions.New(context.Background(), chatParams("Hi"), option.WithMaxRetries(0))
				return err
			}
			for i := range 3 {
				if e := apiError(t, chat(first)); e.StatusCode != 503 {
					t.Fatalf("request %d: %d %s, want 503", i, e.StatusCode, e.Message)
				}
			}
			if got := mustBreakers(t, f); len(got) != 0 {
				t.Fatalf("breakers after one renter's failed requests = %+v, want none tripped", got)
			}
			if e := apiError(t, chat(second)); e.StatusCode != 503 {
				t.Fatalf("the second renter's request: %d %s, want 503", e.StatusCode, e.Message)
			}
			if got := mustBreakers(t, f); len(got) != 1 || got[0].State != "open" {
				t.Fatalf("breakers after two renters' failed requests = %+v, want alpha's open", got)
			}
			calls := up.Calls.Load()
			if e := apiError(t, chat(first)); e.StatusCode != 503 || up.Calls.Load() != calls || !strings.Contains(e.Message, "circuit breaker open") {
				t.Errorf("with the breaker open: %d %s, %d calls; want 503 naming the open breaker, and none", e.StatusCode, e.Message, up.Calls.Load()-calls)
			}
		})
	}
}

// mustBreakers reads the breakers GET /v1/inference/stats lists.
func mustBreakers(tb testing.TB, f *fixture) []gateway.BreakerStats {
	tb.Helper()
	return mustStats(tb, f).Breakers
}

// mustStats reads GET /v1/inference/stats.
func mustStats(tb testing.TB, f *fixture) gateway.StatsResponse {
	tb.Helper()
	var st gateway.StatsResponse
	c := f.sdk(f.RenterKey)
	if err := c.Get(context.Background(), "inference/stats", nil, &st); err != nil {
		tb.Fatal(err)
	}
	return st
}

func TestGateway_midStream(t *testing.T) {
	for _, fault := range []string{faultStall, faultDrop} {
		t.Run(fault, func(t *testing.T) {
			p := mustPair(t, func(c *gateway.Config) { c.StallTimeout = 300 * time.Millisecond })
			p.A.set(fault)
			text, err := p.stream(t, cheapestFirst)
			if err == nil {
				t.Fatalf("a stream that broke off after its first byte ended without error, with %q", text)
			}
			if fault == faultStall && !strings.Contains(err.Error(), "stalled for over 300ms") {
				t.Errorf("a stalled stream ended with %v; want the gateway's event saying it stalled", err)
			}
			if !strings.HasPrefix("Hello from alpha.", text) || text == "" {
				t.Errorf("got %q before the error; want the start of alpha's answer (no failover after the first byte)", text)
			}
			if p.B.Calls.Load() != 0 {
				t.Errorf("beta was called after alpha's first byte had gone out")
			}
			mustSync(t, p.fixture)
			us, err := p.Store.ListInferenceUsage(context.Background(), idlegrid.UsageFilter{AccountID: p.RenterID, Limit: 1})
			if err != nil || len(us) != 1 {
				t.Fatalf("usage %v, %v", us, err)
			}
			// What was delivered is charged, counted: the usage chunk never came.
			if u := us[0]; u.Source != idlegrid.UsageCounted || u.OutputTokens < 1 || u.OutputTokens > 5 {
				t.Errorf("usage = %+v; want the delivered part, counted", u)
			}
		})
	}
}

func TestGateway_agentDisconnects(t *testing.T) {
	p := mustPair(t, nil)
	if _, _, err := p.chat(t, cheapestFirst); err != nil {
		t.Fatal(err)
	}
	p.NodeA.stop()
	// Until the catalog hears that the node left, its missing session
	// rules it out; either way beta answers.
	for i := range 5 {
		got, resp, err := p.chat(t, cheapestFirst)
		if err != nil || got.Choices[0].Message.Content != "Hello from beta." {
			t.Fatalf("request %d after alpha's agent left: %v, %v", i, got, err)
		}
		if n := resp.Header.Get("X-Idlegrid-Node"); n != p.NodeB.NodeID {
			t.Errorf("served by %s, want beta", n)
		}
	}
	p.waitProviders(t, testModel, 1)
}

func TestGateway_modelHealth(t *testing.T) {
	p := mustPair(t, nil)
	p.A.set(faultDown)
	p.waitProviders(t, testModel, 1) // alpha's agent withdrew the model
	p.A.set(faultNone)
	p.waitProviders(t, testModel, 2)
}

// manualClock is a clock that moves only when told.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// describe is err with the API's message, which the SDK's own text leaves out.
func describe(err error) string {
	var e *oai.Error
	if errors.As(err, &e) {
		return fmt.Sprintf("%d %s: %s", e.StatusCode, e.Type, e.Message)
	}
	return fmt.Sprint(err)
}

// TestGateway_renterStopsReading: a renter that takes a stream's headers
// and then reads no more loses it once a write has waited StallTimeout,
// and the provider's one slot goes to the next request, instead of being
// held for as long as the connection stays open.
func TestGateway_renterStopsReading(t *testing.T) {
	f := mustFixture(t, func(c *gateway.Config) { c.StallTimeout = 500 * time.Millisecond })
	m := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", m.model(testModel, "10", "20", 1))
	f.waitProviders(t, testModel, 1)
	m.set(faultFlood)
	body := strings.NewReader(`{"model":"` + testModel + `","stream":true,"messages":[{"role":"user","content":"Hi"}]}`)
	req, err := http.NewRequest(http.MethodPost, f.URL+"/v1/chat/completions", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.RenterKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the stream: %v, %v; want 200", resp, err)
	}
	defer resp.Body.Close() // unread until the test ends
	m.set(faultNone)
	eventually(t, "the next request to be served", func() string {
		got, _, err := (&pair{fixture: f}).chat(t)
		if err != nil || got.Choices[0].Message.Content != "Hello from alpha." {
			return describe(err) // at capacity until the stalled renter's slot is free
		}
		return ""
	})
}

// TestGateway_answerTypeIsTheGateways: whatever type a provider says its
// answer is, the renter gets JSON, or an event stream for a stream: the
// answer is served from the server's address, where a browser must never
// take it for a page.
func TestGateway_answerTypeIsTheGateways(t *testing.T) {
	f := mustFixture(t, nil)
	m := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", m.model(testModel, "10", "20", 4))
	f.waitProviders(t, testModel, 1)
	m.set(faultHTML)
	for stream, want := range map[bool]string{false: "application/json", true: "text/event-stream"} {
		body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"Hi"}]}`, testModel, stream)
		req, _ := http.NewRequest(http.MethodPost, f.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.RenterKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || got != want {
			t.Errorf("stream %v: %d with Content-Type %q, want 200 with %q", stream, resp.StatusCode, got, want)
		}
	}
}
