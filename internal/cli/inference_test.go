package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/gateway"
)

func TestPrintInferenceStats(t *testing.T) {
	var out bytes.Buffer
	queued := int64(7)
	skipped := time.Date(2026, 12, 7, 11, 20, 0, 0, time.UTC)
	st := &gateway.StatsResponse{
		Models: []gateway.ModelStats{{Model: "llama-3.1-8b", Requests: 12, LatencyP50MS: 420.4, LatencyP95MS: 1800,
			TTFTP50MS: 61, TTFTP95MS: 240, TokensPerSecond: 38.25, MicrosPerMTokens: 171_000},
			{Model: "embed-small", Requests: 4, LatencyP50MS: 30, LatencyP95MS: 41, MicrosPerMTokens: 20_000}}, // none streamed
		Waiting: map[string]int{"llama-3.1-8b": 3, "qwen-72b": 2},
		Breakers: []gateway.BreakerStats{{NodeID: "node_a", NodeName: "rig-4090", Model: "llama-3.1-8b", State: "open", Trips: 2, HalfOpens: 1},
			{NodeID: "node_gone", Model: "llama-3.1-8b", State: "half-open", Trips: 1, HalfOpens: 1}},
		Providers: []gateway.ProviderLoad{
			{NodeID: "node_a", NodeName: "rig-4090", Model: "llama-3.1-8b", InFlight: 3, MaxConcurrency: 8, Queued: &queued, Load: 1.25,
				TTFTMS: 61.4, TokensPerSecond: 38.25, SuccessRate: 0.97, Breaker: "open"},
			{NodeID: "node_b", NodeName: "b", Model: "llama-3.1-8b", MaxConcurrency: 16, SuccessRate: 1, Breaker: "closed",
				TextCompletionsSkippedUntil: &skipped, ResponsesSkippedUntil: &skipped},
		},
	}
	if err := printInferenceStats(&out, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"llama-3.1-8b  12        420/1800            61/240           38.2      $0.171000   3\n",
		"qwen-72b      0         -                   -                -         -           2\n",
		"embed-small   4         30/41               -                0.0       $0.020000   0\n",
		"  NODE    NAME      MODEL         IN FLIGHT  QUEUED  LOAD  TTFT MS  TOKENS/S  ANSWERED  BREAKER\n",
		"  node_a  rig-4090  llama-3.1-8b  3/8        7       125%  61       38.2      97%       open\n",
		"  node_b  b         llama-3.1-8b  0/16       -       0%    -        -         100%      closed\n",
		"  text completions skip node_b (b) for llama-3.1-8b until 2026-12-07T11:20:00Z: its model server answered one 404, as one that serves chats only does\n",
		"  responses skip node_b (b) for llama-3.1-8b until 2026-12-07T11:20:00Z: its model server answered one 404, as one without the Responses API does\n",
		"Circuit breakers that have tripped:\n",
		"  NODE       NAME      MODEL         STATE      TRIPS  HALF-OPENS  CLOSES\n",
		"  node_a     rig-4090  llama-3.1-8b  open       2      1           0\n",
		"  node_gone  -         llama-3.1-8b  half-open  1      1           0\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed:\n%s\nwant a line:\n%s", out.String(), want)
		}
	}
}

// The inference commands against a server no provider serves a model on
// yet: they say so, and --json gives empty lists.
func TestInferenceCommands_nothingServed(t *testing.T) {
	url, adminKey := mustServer(t)
	admin := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": adminKey}
	if out := must(t, admin, "inference", "models"); !strings.Contains(out, "no model is served now") {
		t.Errorf("inference models printed:\n%s", out)
	}
	if out := must(t, admin, "inference", "stats"); out != "no inference requests yet\n" {
		t.Errorf("inference stats printed:\n%s", out)
	}
	if out := must(t, admin, "inference", "usage"); out != "no inference requests yet\n" {
		t.Errorf("inference usage printed:\n%s", out)
	}
	for _, cmd := range [][]string{{"inference", "models", "--json"}, {"inference", "usage", "--json"}} {
		var list []json.RawMessage
		mustJSON(t, admin, &list, cmd...)
		if list == nil || len(list) != 0 {
			t.Errorf("%v: %v, want an empty list", cmd, list)
		}
	}
	var st gateway.StatsResponse
	mustJSON(t, admin, &st, "inference", "stats", "--json")
	if len(st.Models) != 0 || st.Breakers == nil {
		t.Errorf("inference stats --json: %+v, want no models and an empty list of breakers", st)
	}
	if r := run(t, admin, "inference", "usage", "--limit", "0"); r.code != 2 || !strings.Contains(r.err, "--limit must be between 1 and 1000") {
		t.Errorf("--limit 0: %s", r)
	}
}

// TestInferenceUsage_fieldIsFlag: the gateway names a field at fault as
// OpenAI does, in param; the command names it as the flag typed, and
// exits 2 as for any flag a server refuses.
func TestInferenceUsage_fieldIsFlag(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"before: no request \"nope\" of yours to list from","type":"invalid_request_error","param":"before","code":"invalid"}}`)
	}))
	defer ts.Close()
	r := run(t, map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "k"}, "inference", "usage", "--before", "nope")
	if want := `idlegrid: --before: no request "nope" of yours to list from`; r.code != 2 || firstLines(r.err, 1) != want {
		t.Errorf("inference usage --before nope: %s\nwant exit 2 and %q", r, want)
	}
}

// TestInferenceConversations: the command says what the renter's
// conversations hold against the server's bounds, or that there are
// none, and --json gives the server's answer.
func TestInferenceConversations(t *testing.T) {
	answer := `{"object":"conversation.usage","items":1234,"chars":5678901,"max_items":1000000,"max_chars":null}`
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/inference/conversations" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	defer ts.Close()
	env := map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "k"}
	if out, want := must(t, env, "inference", "conversations"), "your conversations hold 1,234 items of 1,000,000 and 5,678,901 characters (no bound)\n"; out != want {
		t.Errorf("inference conversations printed %q, want %q", out, want)
	}
	var got map[string]any
	mustJSON(t, env, &got, "inference", "conversations", "--json")
	if got["items"] != float64(1234) || got["max_chars"] != nil || got["max_items"] != float64(1_000_000) {
		t.Errorf("--json: %v, want the server's answer", got)
	}
}
