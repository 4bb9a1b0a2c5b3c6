package openai_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

func TestWithDefaults(t *testing.T) {
	yes, no := true, false
	m := func(v idlegrid.Micros) *idlegrid.Micros { return &v }
	key := &idlegrid.Routing{
		Sort: "price", Region: []string{"eu-west"}, Only: []string{"node_a"}, Sticky: &no,
		MaxPrice: &idlegrid.RoutingMaxPrice{Prompt: m(2_000_000), Completion: m(4_000_000)},
	}
	for _, tt := range []struct {
		name     string
		provider string // the request's own; "null": none
		key      *idlegrid.Routing
		want     *idlegrid.Routing
	}{
		{"no key default", `{"sort":"latency"}`, nil, &idlegrid.Routing{Sort: "latency"}},
		{"neither", `null`, nil, nil},
		{"the key's alone", `null`, key, &idlegrid.Routing{
			Sort: "price", Region: []string{"eu-west"}, Only: []string{"node_a"}, Sticky: &no,
			MaxPrice: &idlegrid.RoutingMaxPrice{Prompt: m(2_000_000), Completion: m(4_000_000)}}},
		{"field by field", `{"sort":"latency","sticky":true,"only":[],"max_price":{"completion":"1.5"}}`, key, &idlegrid.Routing{
			Sort: "latency", Region: []string{"eu-west"}, Only: []string{}, Sticky: &yes,
			MaxPrice: &idlegrid.RoutingMaxPrice{Prompt: m(2_000_000), Completion: m(1_500_000)}}},
		{"an empty max_price keeps the key's", `{"max_price":{}}`, key, &idlegrid.Routing{
			Sort: "price", Region: []string{"eu-west"}, Only: []string{"node_a"}, Sticky: &no,
			MaxPrice: &idlegrid.RoutingMaxPrice{Prompt: m(2_000_000), Completion: m(4_000_000)}}},
		{"a key's empty max_price is none", `{"ignore":["node_b"]}`, &idlegrid.Routing{Sort: "price", MaxPrice: &idlegrid.RoutingMaxPrice{}},
			&idlegrid.Routing{Sort: "price", Ignore: []string{"node_b"}}},
		{"an empty key default", `{"ignore":["node_b"]}`, &idlegrid.Routing{}, &idlegrid.Routing{Ignore: []string{"node_b"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := mustProvider(t, tt.provider)
			before, keyBefore := cmp.Diff(nil, req), cmp.Diff(nil, tt.key)
			got := openai.WithDefaults(req, tt.key)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("WithDefaults (-want +got):\n%s", diff)
			}
			if after := cmp.Diff(nil, req); after != before {
				t.Errorf("WithDefaults changed the request's own routing")
			}
			if after := cmp.Diff(nil, tt.key); after != keyBefore {
				t.Errorf("WithDefaults changed the key's default routing")
			}
		})
	}
}

func TestParseRequest_provider(t *testing.T) {
	for _, tt := range []struct{ provider, field string }{
		{`{"sort":"cheapest"}`, "provider.sort"},
		{`{"sorting":"price"}`, "provider.sorting"},
		{`{"region":"eu-west"}`, "provider.region"},
		{`{"only":["node_a","node_a"]}`, "provider.only[1]"},
		{`{"ignore":[" "]}`, "provider.ignore[0]"},
		{`{"max_price":{"prompt":"1.2345678"}}`, "provider.max_price.prompt"},
		{`{"max_price":{"completion":-1}}`, "provider.max_price.completion"},
		{`{"max_price":{"input":1}}`, "provider.max_price.input"},
		{`["price"]`, "provider"},
	} {
		_, err := openai.ParseRequest(openai.ChatCompletions, []byte(`{"model":"m","messages":[{"role":"user","content":"Hi"}],"provider":`+tt.provider+`}`))
		e, ok := err.(*idlegrid.Error)
		if !ok || e.Code != idlegrid.EINVALID || e.Field != tt.field {
			t.Errorf("provider %s: error %v, want EINVALID on %s", tt.provider, err, tt.field)
		}
	}
}

// TestBinding: a use or read key's routing binds its requests: they may
// narrow its hard constraints, never widen them, and set their own
// preferences.
func TestBinding(t *testing.T) {
	m := func(v idlegrid.Micros) *idlegrid.Micros { return &v }
	key := &idlegrid.Routing{
		Sort: "price", DataResidency: []string{"EU"}, Only: []string{"node_a", "node_b"}, Ignore: []string{"node_x"},
		MaxPrice: &idlegrid.RoutingMaxPrice{Prompt: m(2_000_000)},
	}
	for _, tt := range []struct {
		name, provider string
		want           *idlegrid.Routing
	}{
		{"none of its own", `null`, key},
		{"widening is refused", `{"data_residency":[],"only":[],"ignore":[],"max_price":{"prompt":"9","completion":"9"}}`, &idlegrid.Routing{
			Sort: "price", DataResidency: []string{"EU"}, Only: []string{"node_a", "node_b"}, Ignore: []string{"node_x"},
			MaxPrice: &idlegrid.RoutingMaxPrice{Prompt: m(2_000_000), Completion: m(9_000_000)}}},
		{"narrowing is kept", `{"sort":"latency","data_residency":["EU","US"],"only":["node_b","node_c"],"ignore":["node_y"],"max_price":{"prompt":"1"}}`, &idlegrid.Routing{
			Sort: "latency", DataResidency: []string{"EU"}, Only: []string{"node_b"}, Ignore: []string{"node_x", "node_y"},
			MaxPrice: &idlegrid.RoutingMaxPrice{Prompt: m(1_000_000)}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := openai.Binding(mustProvider(t, tt.provider), key)
			if diff := cmp.Diff(tt.want, got); err != nil || diff != "" {
				t.Errorf("Binding: %v (-want +got):\n%s", err, diff)
			}
		})
	}
	_, err := openai.Binding(mustProvider(t, `{"data_residency":["US"]}`), key)
	if idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN || !strings.Contains(err.Error(), "provider.data_residency") {
		t.Errorf("a residency outside the key's: err = %v, want forbidden naming provider.data_residency", err)
	}
	// The refusal names its field as the error's, which the gateway
	// answers as OpenAI's param, not in its message only.
	var e *idlegrid.Error
	if !errors.As(err, &e) || e.Field != "provider.data_residency" {
		t.Errorf("a residency outside the key's: field of %#v, want provider.data_residency", err)
	}
	if got, err := openai.Binding(mustProvider(t, `{"sort":"latency"}`), nil); err != nil || got == nil || got.Sort != "latency" {
		t.Errorf("Binding without a key routing = %+v, %v; want the request's", got, err)
	}
}

// mustProvider is the routing of a chat request whose "provider" object
// is provider ("null": none).
func mustProvider(tb testing.TB, provider string) *idlegrid.Routing {
	tb.Helper()
	r, err := openai.ParseRequest(openai.ChatCompletions, []byte(`{"model":"m","messages":[{"role":"user","content":"Hi"}],"provider":`+provider+`}`))
	if err != nil {
		tb.Fatal(err)
	}
	return r.Provider
}
