package openai_test

import (
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
	parse := func(t *testing.T, provider string) *openai.ProviderPrefs {
		t.Helper()
		r, err := openai.ParseRequest(openai.ChatCompletions, []byte(`{"model":"m","messages":[{"role":"user","content":"Hi"}],"provider":`+provider+`}`))
		if err != nil {
			t.Fatal(err)
		}
		return r.Provider
	}
	for _, tt := range []struct {
		name     string
		provider string // the request's own; "null": none
		key      *idlegrid.Routing
		want     *openai.ProviderPrefs
	}{
		{"no key default", `{"sort":"latency"}`, nil, &openai.ProviderPrefs{Sort: "latency"}},
		{"neither", `null`, nil, nil},
		{"the key's alone", `null`, key, &openai.ProviderPrefs{
			Sort: "price", Region: []string{"eu-west"}, Only: []string{"node_a"}, Sticky: &no,
			MaxPrice: &openai.MaxPrice{PromptMicros: 2_000_000, CompletionMicros: 4_000_000}}},
		{"field by field", `{"sort":"latency","sticky":true,"only":[],"max_price":{"completion":"1.5"}}`, key, &openai.ProviderPrefs{
			Sort: "latency", Region: []string{"eu-west"}, Only: []string{}, Sticky: &yes,
			MaxPrice: &openai.MaxPrice{Completion: "1.5", PromptMicros: 2_000_000, CompletionMicros: 1_500_000}}},
		{"an empty key default", `{"ignore":["node_b"]}`, &idlegrid.Routing{}, &openai.ProviderPrefs{Ignore: []string{"node_b"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := parse(t, tt.provider)
			before := cmp.Diff(nil, req)
			got := openai.WithDefaults(req, tt.key)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("WithDefaults (-want +got):\n%s", diff)
			}
			if after := cmp.Diff(nil, req); after != before {
				t.Errorf("WithDefaults changed the request's own preferences")
			}
		})
	}
}
