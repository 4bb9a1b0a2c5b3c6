package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/gateway"
	"github.com/idlegrid/idlegrid/internal/ratelimit"
)

// withMaxTokens caps the completion, which bounds what a request reserves:
// 12 prompt tokens (16 bytes of text, two messages) at 10 and 10
// completion tokens at 20 a million, 320 micros, where the mock's answer
// costs 170.
var withMaxTokens = option.WithJSONSet("max_tokens", 10)

func TestGateway_keyBudget(t *testing.T) {
	f := mustFixture(t, func(c *gateway.Config) { c.FirstByteTimeout = time.Minute })
	up := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 8))
	f.waitProviders(t, testModel, 1)
	ctx := context.Background()
	limit := idlegrid.Micros(900) // three reservations are over it; three charges and a reservation are not
	if _, err := client.New(f.URL, f.RenterKey).SetKeyLimit(ctx, f.RenterKeyID, &limit); err != nil {
		t.Fatal(err)
	}
	p := &pair{fixture: f, A: up}

	t.Run("in-flight spend is reserved", func(t *testing.T) {
		up.set(faultSlowFirst)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { p.stream(t, withMaxTokens) }) // they fail once freed; only their reservations matter
		}
		eventually(t, "two requests at the model server", func() string {
			if up.Calls.Load() < 2 {
				return "fewer"
			}
			return ""
		})
		_, err := p.stream(t, withMaxTokens)
		if e := apiError(t, err); e.StatusCode != 402 || e.Type != "insufficient_quota" {
			t.Errorf("a third request with two in flight: %d %s (%s), want 402 insufficient_quota", e.StatusCode, e.Type, e.Message)
		}
		up.free()
		wg.Wait()
		mustSync(t, f) // their handlers may still be running after their callers returned: wait for the reservations to go
		up.set(faultNone)
	})
	t.Run("spend adds up to the limit", func(t *testing.T) {
		served := 0
		for range 10 {
			if _, _, err := p.chat(t, withMaxTokens); err != nil {
				if e := apiError(t, err); e.StatusCode != 402 {
					t.Fatalf("request %d: %v", served, err)
				}
				t.Logf("request %d refused: %v", served, err)
				break
			}
			served++
			// Each charge written and released before the next request
			// reads the store: a read that overlaps the meter's commit
			// counts the charge twice until the next read (on the safe
			// side, budget.go), which would refuse the fourth.
			mustSync(t, f)
		}
		// 170 each; the fifth would find 680 spent and 320 to reserve, over 900.
		if served != 4 {
			t.Errorf("served %d requests under a limit of 900, want 4", served)
		}
		mustSync(t, f)
		var spent idlegrid.Micros
		now := time.Now()
		for _, in := range []time.Time{now.AddDate(0, -1, 0), now} { // this month, and the last should the test span midnight of its end
			from, to := idlegrid.MonthOf(in)
			s, err := f.Store.MonthSpend(ctx, idlegrid.SpendFilter{AccountID: f.RenterID, KeyID: f.RenterKeyID, From: from, To: to})
			if err != nil {
				t.Fatal(err)
			}
			spent += s.ChargedMicros
		}
		if spent != 4*wantCharge {
			t.Errorf("the key spent %d, want %d", spent, 4*wantCharge)
		}
	})
}

func TestGateway_keyLimits(t *testing.T) {
	clock := &manualClock{now: time.Now()}
	f := mustFixture(t, func(c *gateway.Config) {
		c.Clock, c.KeyRequestsPerSecond, c.KeyBurst, c.KeyConcurrency = clock, 1, 2, 1
		c.FirstByteTimeout = time.Minute
	})
	up := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 8))
	f.waitProviders(t, testModel, 1)
	p := &pair{fixture: f, A: up}

	t.Run("rate", func(t *testing.T) {
		for i := range 2 {
			if _, _, err := p.chat(t); err != nil {
				t.Fatalf("request %d within the burst: %v", i, err)
			}
		}
		_, _, err := p.chat(t)
		if e := apiError(t, err); e.StatusCode != 429 || e.Type != "rate_limit_error" || e.Response.Header.Get("Retry-After") != "1" {
			t.Errorf("beyond the burst: %d %s, Retry-After %q; want 429 rate_limit_error, retry after 1 s (a token a second)",
				e.StatusCode, e.Type, e.Response.Header.Get("Retry-After"))
		}
		clock.advance(time.Second)
		if _, _, err := p.chat(t); err != nil {
			t.Errorf("a second later: %v", err)
		}
	})
	t.Run("concurrency holds while a stream runs", func(t *testing.T) {
		clock.advance(time.Hour) // a full bucket
		release := stallAStream(t, p, up)
		_, err := p.stream(t)
		if e := apiError(t, err); e.StatusCode != 429 || e.Response.Header.Get("Retry-After") != "1" {
			t.Errorf("a second stream with one running: %d (%s), Retry-After %q; want 429, retry after 1 s",
				e.StatusCode, e.Message, e.Response.Header.Get("Retry-After"))
		}
		release()
	})
}

// TestGateway_accountLimits: the gateway's requests that run no model
// (here conversations, kept responses and the model list) spend from the
// account's bucket of API requests, which the API's own requests share;
// over it they get a 429 in OpenAI's format, naming the account, with
// Retry-After. Model requests are limited per key instead, and another
// account has its own bucket.
func TestGateway_accountLimits(t *testing.T) {
	f, up := mustSolo(t, func(c *gateway.Config) { c.AccountLimits = ratelimit.New(0.01, 5) }) // a token every 100 s
	ctx := context.Background()
	key := f.mustRenter(t, "scripted") // a full bucket: the fixture's renter spent its own waiting for the provider
	sdk, api := f.sdk(key), client.New(f.URL, key)
	conv, err := sdk.Conversations.New(ctx, conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(describe(err))
	}
	if _, err := api.ListJobs(ctx, idlegrid.JobFilter{}); err != nil { // the API's: the same bucket
		t.Fatal(err)
	}
	if _, err := sdk.Conversations.Get(ctx, conv.ID); err != nil {
		t.Fatal(describe(err))
	}
	if _, err := sdk.Models.List(ctx); err != nil {
		t.Fatal(describe(err))
	}
	p := &pair{fixture: f, A: up}
	for i := range 3 { // model requests spend none of it
		if _, _, err := p.chat(t, option.WithAPIKey(key)); err != nil {
			t.Fatalf("chat %d: %v", i, err)
		}
	}
	if _, err := sdk.Conversations.Items.List(ctx, conv.ID, conversations.ItemListParams{}); err != nil {
		t.Fatalf("the fifth request of a burst of 5: %v", describe(err))
	}
	_, err = sdk.Conversations.Get(ctx, conv.ID)
	if e := apiError(t, err); e.StatusCode != 429 || e.Type != "rate_limit_error" || e.Response.Header.Get("Retry-After") == "" ||
		!strings.Contains(e.Message, "account acct_") {
		t.Errorf("the sixth: %d %s (%s), Retry-After %q; want 429 rate_limit_error naming the account, with Retry-After",
			e.StatusCode, e.Type, e.Message, e.Response.Header.Get("Retry-After"))
	}
	_, err = sdk.Responses.Get(ctx, "resp_none", responses.ResponseGetParams{})
	if e := apiError(t, err); e.StatusCode != 429 {
		t.Errorf("a kept response over the limit: %d, want 429", e.StatusCode)
	}
	if _, err := api.ListJobs(ctx, idlegrid.JobFilter{}); idlegrid.ErrorCode(err) != idlegrid.ETOOMANY {
		t.Errorf("the API's request over the shared limit: %v, want too_many", err)
	}
	if _, _, err := p.chat(t, option.WithAPIKey(key)); err != nil {
		t.Errorf("a chat with the account's bucket empty: %v", err)
	}
	other := f.sdk(f.mustRenter(t, "other"))
	if _, err := other.Conversations.New(ctx, conversations.ConversationNewParams{}); err != nil {
		t.Errorf("another renter: %v", describe(err))
	}
}

// TestGateway_reserveChoices: a request for n completions reserves each
// one's max_tokens: five of 10 tokens at 20 a million, with the prompt,
// come to over 1,000 micros, more than the key may spend, where one fits.
func TestGateway_reserveChoices(t *testing.T) {
	f := mustFixture(t, func(*gateway.Config) {})
	up := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 8))
	f.waitProviders(t, testModel, 1)
	limit := idlegrid.Micros(900) // three reservations are over it; three charges and a reservation are not
	if _, err := client.New(f.URL, f.RenterKey).SetKeyLimit(context.Background(), f.RenterKeyID, &limit); err != nil {
		t.Fatal(err)
	}
	p := &pair{fixture: f, A: up}
	_, _, err := p.chat(t, withMaxTokens, option.WithJSONSet("n", 5))
	if e := apiError(t, err); e.StatusCode != 402 || e.Type != "insufficient_quota" {
		t.Errorf("five completions of 10 tokens under a limit of 1000: %d %s (%s), want 402 insufficient_quota", e.StatusCode, e.Type, e.Message)
	}
	if _, _, err := p.chat(t, withMaxTokens); err != nil {
		t.Errorf("one completion of 10 tokens: %v", err)
	}
}

// TestGateway_limitRefusalSaysWhatFits: a request that may cost more
// than a key's spend limit has left, with nothing of it used yet, is
// refused saying what it may cost, what is left and what to do (lower
// max_tokens, or raise the limit), not that the limit is reached; once it
// is, the refusal says so.
func TestGateway_limitRefusalSaysWhatFits(t *testing.T) {
	f := mustFixture(t, func(*gateway.Config) {})
	up := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 8))
	f.waitProviders(t, testModel, 1)
	limit := idlegrid.Micros(900)
	if _, err := client.New(f.URL, f.RenterKey).SetKeyLimit(context.Background(), f.RenterKeyID, &limit); err != nil {
		t.Fatal(err)
	}
	p := &pair{fixture: f, A: up}
	_, _, err := p.chat(t, withMaxTokens, option.WithJSONSet("n", 5))
	e := apiError(t, err)
	if e.StatusCode != 402 || strings.Contains(e.Message, "reached") || !strings.Contains(e.Message, "may cost up to") ||
		!strings.Contains(e.Message, "$0.000900 left of") || !strings.Contains(e.Message, "lower max_tokens") ||
		!strings.Contains(e.Message, "idlegrid key limit "+f.RenterKeyID) {
		t.Errorf("a request over a key's untouched limit: %d %q; want 402 saying what it may cost, what is left and what to do", e.StatusCode, e.Message)
	}
	zero := idlegrid.Micros(0)
	if _, err := client.New(f.URL, f.RenterKey).SetKeyLimit(context.Background(), f.RenterKeyID, &zero); err != nil {
		t.Fatal(err)
	}
	mustSync(t, f)
	eventually(t, "the limit of 0 refused as reached", func() string {
		_, _, err := p.chat(t, withMaxTokens)
		if err == nil {
			return "answered: the limit of 0 not read yet"
		}
		if e := apiError(t, err); e.StatusCode != 402 || !strings.Contains(e.Message, "spend limit of this API key reached") {
			return fmt.Sprintf("%d %q", e.StatusCode, e.Message)
		}
		return ""
	})
}

// TestGateway_keyLimitsBeforeTheWaitingRoom: a key at its concurrency
// limit is refused at once, not after a wait in the waiting room for a
// provider at capacity, whose places are for requests that may run.
func TestGateway_keyLimitsBeforeTheWaitingRoom(t *testing.T) {
	f := mustFixture(t, func(c *gateway.Config) {
		c.KeyConcurrency, c.FirstByteTimeout, c.QueueTimeout = 1, time.Minute, time.Minute
	})
	up := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 1)) // one at a time
	f.waitProviders(t, testModel, 1)
	p := &pair{fixture: f, A: up}
	release := stallAStream(t, p, up)
	_, err := p.stream(t) // the provider is full, and so is the key
	if e := apiError(t, err); e.StatusCode != 429 || !strings.Contains(e.Message, "requests in flight, its limit") {
		t.Errorf("a second stream of a key at its limit, its provider full: %d (%s), want 429 naming the key's limit", e.StatusCode, e.Message)
	}
	release()
}

// stallAStream starts a stream that stalls at the model server, and
// returns once it is there: release lets it end, and waits for it.
func stallAStream(t *testing.T, p *pair, up *mock) (release func()) {
	t.Helper()
	up.set(faultStall)
	calls := up.Calls.Load()
	first := make(chan error, 1)
	go func() { _, err := p.stream(t); first <- err }()
	eventually(t, "the first stream to reach the model server", func() string {
		if up.Calls.Load() == calls {
			return "not yet"
		}
		return ""
	})
	return func() {
		up.free()
		<-first
	}
}

// TestGateway_keyConcurrencySequential: a key allowed one request at a
// time that sends its requests one after another, each once it has read
// the last one's answer whole, is never refused for concurrency: the
// gateway frees the key's slot before the answer's last bytes go out,
// not after, when it meters the answer.
func TestGateway_keyConcurrencySequential(t *testing.T) {
	f := mustFixture(t, func(c *gateway.Config) { c.KeyConcurrency = 1 })
	up := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 8))
	f.waitProviders(t, testModel, 1)
	p := &pair{fixture: f, A: up}
	for i := range 150 {
		if _, _, err := p.chat(t); err != nil {
			t.Fatalf("request %d, sent once the last was answered: %v", 2*i, err)
		}
		if _, err := p.stream(t); err != nil {
			t.Fatalf("stream %d, sent once the last was answered: %v", 2*i+1, err)
		}
	}
}
