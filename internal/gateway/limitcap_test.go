package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/gateway"
	"github.com/idlegrid/idlegrid/internal/metricstest"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// TestGateway_chargeCappedAtSpendLimit: a key whose request reserved
// little within its spend limit, and whose model server then reports far
// more usage (within what the request could honestly have used), is
// charged no more than its limit left; the cap is counted, and the next
// request is refused.
func TestGateway_chargeCappedAtSpendLimit(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	f := mustFixture(t, func(c *gateway.Config) { c.Metrics = reg })
	up := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 4))
	f.waitProviders(t, testModel, 1)
	ctx := context.Background()
	const limit = idlegrid.Micros(1000)
	l := limit
	if _, err := client.New(f.URL, f.RenterKey).SetKeyLimit(ctx, f.RenterKeyID, &l); err != nil {
		t.Fatal(err)
	}
	up.set(faultGreedy)
	body := `{"model":"llama-test","max_tokens":5,"messages":[{"role":"user","content":"Say hello."}]}`
	req, err := openai.ParseRequest(openai.ChatCompletions, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if usage := idlegrid.Micros(10 * req.MostPromptTokens(len(body))); usage <= limit { // what the usage is capped to (usagecap_test.go)
		t.Fatalf("the prompt's cap costs %d, not over the limit of %d: the test proves nothing", usage, limit)
	}
	postAnswer(t, f, openai.ChatCompletions, body)
	mustSync(t, f)
	us, err := f.Store.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: f.RenterID})
	if err != nil || len(us) != 1 {
		t.Fatalf("usage records %v (%v), want one", us, err)
	}
	if u := us[0]; u.ChargeMicros != limit || u.FeeMicros != limit/10 {
		t.Errorf("charged %d with a fee of %d, want the limit left, %d, and its fee", u.ChargeMicros, u.FeeMicros, limit)
	}
	from, to := idlegrid.MonthOf(time.Now())
	s, err := f.Store.MonthSpend(ctx, idlegrid.SpendFilter{AccountID: f.RenterID, KeyID: f.RenterKeyID, From: from, To: to})
	if err != nil || s.Used() > limit {
		t.Errorf("the key spent %d this month (%v), over its limit of %d", s.Used(), err, limit)
	}
	if n := metricstest.Value(t, reg, "idlegrid_inference_charges_capped_total", map[string]string{"reason": "spend_limit"}); n != 1 {
		t.Errorf("idlegrid_inference_charges_capped_total{reason=spend_limit} = %v, want 1", n)
	}
	p := &pair{fixture: f, A: up}
	if _, _, err := p.chat(t, withMaxTokens); apiError(t, err).StatusCode != 402 {
		t.Errorf("a request at the limit: %s, want 402", describe(err))
	}
}
