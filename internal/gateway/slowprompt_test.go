package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/gateway"
)

// TestGateway_largePromptTimeoutIsNoFailure: a stream of a prompt over
// LargePromptTokens that gets no first byte in time goes on to the next
// provider, but its timeout does not count against the slow provider's
// circuit breaker nor its success rate: the prompt is slow, not the
// provider. A small prompt's timeout still does.
func TestGateway_largePromptTimeoutIsNoFailure(t *testing.T) {
	p := mustPair(t, func(c *gateway.Config) {
		c.FirstByteTimeout, c.FirstBytePerKTokens = time.Second, time.Nanosecond // alpha's first byte never comes
		c.LargePromptTokens, c.BreakerFailures = 1000, 1
	})
	p.A.set(faultSlowFirst)
	stream := func(prompt string) string {
		c := p.sdk(p.RenterKey)
		s := c.Chat.Completions.NewStreaming(context.Background(), chatParams(prompt), cheapestFirst)
		var text strings.Builder
		for s.Next() {
			for _, ch := range s.Current().Choices {
				text.WriteString(ch.Delta.Content)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(describe(err))
		}
		return text.String()
	}
	if got := stream(strings.Repeat("long ", 2000)); got != "Hello from beta." {
		t.Fatalf("a large prompt: %q, want beta's answer after alpha timed out", got)
	}
	if n := p.A.Calls.Load(); n != 1 {
		t.Fatalf("alpha got %d calls, want 1", n)
	}
	if got := mustBreakers(t, p.fixture); len(got) != 0 {
		t.Errorf("breakers = %+v after a large prompt timed out, want none tripped", got)
	}
	if a := providerLoad(t, p, p.NodeA.NodeID); a.SuccessRate != 1 || a.Breaker != "closed" {
		t.Errorf("alpha's record %+v, want a success rate of 1 and its breaker closed", a)
	}
	if got := stream("Hi"); got != "Hello from beta." {
		t.Fatalf("a small prompt: %q, want beta's answer after alpha timed out", got)
	}
	if got := mustBreakers(t, p.fixture); len(got) != 1 || got[0].NodeID != p.NodeA.NodeID || got[0].Trips != 1 {
		t.Errorf("breakers = %+v after a small prompt timed out, want alpha's tripped", got)
	}
}

// TestGateway_ttftFromStreamsOnly: the time to first byte the latency
// sort reads is measured on streams only: a non-streamed answer's first
// byte comes with its last, and would count its length as latency.
func TestGateway_ttftFromStreamsOnly(t *testing.T) {
	p := mustPair(t, nil)
	only := func(node string) any { return map[string]any{"only": []string{node}} }
	if _, _, err := p.chat(t, option.WithJSONSet("provider", only(p.NodeA.NodeID))); err != nil {
		t.Fatal(describe(err))
	}
	if _, err := p.stream(t, option.WithJSONSet("provider", only(p.NodeB.NodeID))); err != nil {
		t.Fatal(describe(err))
	}
	mustSync(t, p.fixture)
	if a := providerLoad(t, p, p.NodeA.NodeID); a.TTFTMS != 0 || a.SuccessRate != 1 {
		t.Errorf("alpha, which answered a non-streamed request: %+v, want no time to first byte measured, a success", a)
	}
	if b := providerLoad(t, p, p.NodeB.NodeID); b.TTFTMS <= 0 {
		t.Errorf("beta, which answered a stream: %+v, want its time to first byte measured", b)
	}
}

// providerLoad is node's record in GET /v1/inference/stats.
func providerLoad(tb testing.TB, p *pair, node string) gateway.ProviderLoad {
	tb.Helper()
	st, err := client.New(p.URL, p.RenterKey).InferenceStats(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range st.Providers {
		if l.NodeID == node {
			return l
		}
	}
	tb.Fatalf("no provider %s in %+v", node, st.Providers)
	return gateway.ProviderLoad{}
}

// TestGateway_longAnswerTimeoutIsNoFailure: a non-streamed request asked
// for a long answer (max_tokens over LargeAnswerTokens) that gets none
// within AnswerTimeout goes on to the next provider without counting
// against the slow one; one capped at a few tokens still does.
func TestGateway_longAnswerTimeoutIsNoFailure(t *testing.T) {
	p := mustPair(t, func(c *gateway.Config) {
		c.AnswerTimeout, c.BreakerFailures = time.Second, 1 // alpha's answer never comes
	})
	p.A.set(faultSlowFirst)
	chat := func(opts ...option.RequestOption) string {
		got, _, err := p.chat(t, append(opts, cheapestFirst)...)
		if err != nil {
			t.Fatal(describe(err))
		}
		return got.Choices[0].Message.Content
	}
	if got := chat(option.WithJSONSet("max_tokens", 8192)); got != "Hello from beta." {
		t.Fatalf("max_tokens 8192: %q, want beta's answer after alpha timed out", got)
	}
	if got := mustBreakers(t, p.fixture); len(got) != 0 {
		t.Errorf("breakers = %+v after a long answer timed out, want none tripped", got)
	}
	if got := chat(option.WithJSONSet("max_tokens", 16)); got != "Hello from beta." {
		t.Fatalf("max_tokens 16: %q, want beta's answer after alpha timed out", got)
	}
	if got := mustBreakers(t, p.fixture); len(got) != 1 || got[0].NodeID != p.NodeA.NodeID {
		t.Errorf("breakers = %+v after a short answer timed out, want alpha's tripped", got)
	}
}
