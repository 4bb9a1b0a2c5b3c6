package agent_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
)

const withModels = minimal + `models:
  - name: llama-3.1-8b
    upstream: http://127.0.0.1:8000/v1
    upstream_model: meta-llama/Llama-3.1-8B-Instruct
    input_price: "0.10"
    output_price: "0.20"
    max_concurrency: 8
model_health_interval: 5s
`

func TestParseConfig_models(t *testing.T) {
	c := mustParse(t, withModels)
	if len(c.Models) != 1 || c.Models[0].UpstreamModel != "meta-llama/Llama-3.1-8B-Instruct" || c.Models[0].MaxConcurrency != 8 {
		t.Fatalf("models = %+v", c.Models)
	}
	if drain := mustParse(t, withModels+"model_drain_wait: 5m\n"); drain.ModelDrainWait != 5*time.Minute {
		t.Errorf("model_drain_wait = %v, want 5m", drain.ModelDrainWait)
	}
	off := mustParse(t, strings.Replace(withModels, "max_concurrency: 8", "max_concurrency: 8\n    metrics_url: off", 1))
	if off.Models[0].MetricsURL != agent.MetricsOff {
		t.Errorf("metrics_url = %q, want off", off.Models[0].MetricsURL)
	}
	for _, tt := range []struct {
		name, from, to, field string
	}{
		{"bad price", `input_price: "0.10"`, `input_price: "ten"`, "models[0].input_price"},
		{"no concurrency", "max_concurrency: 8", "max_concurrency: 0", "models[0].max_concurrency"},
		{"bad upstream", "upstream: http://127.0.0.1:8000/v1", "upstream: 127.0.0.1:8000", "models[0].upstream"},
		{"bad name", "name: llama-3.1-8b", "name: \"llama 3\"", "models[0].name"},
		{"twice", "model_health_interval: 5s", "  - {name: llama-3.1-8b, upstream: http://h/v1, input_price: \"1\", output_price: \"1\", max_concurrency: 1}\nmodel_health_interval: 5s", "models[1].name"},
		{"unknown key", "max_concurrency: 8", "max_concurency: 8", "models[0].max_concurency"},
		{"bad metrics url", "max_concurrency: 8", "max_concurrency: 8\n    metrics_url: 127.0.0.1:8000/metrics", "models[0].metrics_url"},
		{"load interval too short", "model_health_interval: 5s", "model_health_interval: 5s\nmodel_load_interval: 1ms", "model_load_interval"},
		{"negative drain wait", "model_health_interval: 5s", "model_health_interval: 5s\nmodel_drain_wait: -1s", "model_drain_wait"},
		{"drain wait too long", "model_health_interval: 5s", "model_health_interval: 5s\nmodel_drain_wait: 2h", "model_drain_wait"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			yaml := strings.Replace(withModels, tt.from, tt.to, 1)
			_, err := agent.ParseConfig([]byte(yaml))
			var e *idlegrid.Error
			if err == nil {
				t.Fatalf("ParseConfig accepted:\n%s", yaml)
			} else if !asError(err, &e) || e.Field != tt.field {
				t.Errorf("error %v, want one naming %s", err, tt.field)
			}
		})
	}
}

func asError(err error, target **idlegrid.Error) bool {
	e, ok := err.(*idlegrid.Error)
	*target = e
	return ok
}

// TestCheckModels_problems checks that a model server's health check says
// what is wrong in words a provider can act on: a 404 from an upstream
// without its /v1 names the URL to use, a server that lists other models
// names them, and one that does not answer in time says so.
func TestCheckModels_problems(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"llama3.1:latest"},{"id":"qwen2.5:7b"}]}`)
		case "/slow/v1/models":
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	for _, tt := range []struct {
		name, upstream, upstreamModel string
		want                          []string
	}{
		{"no v1", srv.URL, "llama3.1:latest", []string{"404 Not Found", "upstream usually ends in /v1", srv.URL + "/v1"}},
		{"an endpoint", srv.URL + "/v1/chat/completions", "llama3.1:latest", []string{"404 Not Found", "e.g. " + srv.URL + "/v1"}},
		{"other models", srv.URL + "/v1", "llama3.1", []string{`does not list "llama3.1"`, `it lists "llama3.1:latest", "qwen2.5:7b"`}},
		{"slow", srv.URL + "/slow/v1", "x", []string{"GET /models: no answer within"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, minimal+fmt.Sprintf("models:\n  - {name: m, upstream: %q, upstream_model: %q, input_price: \"0.10\", output_price: \"0.20\", max_concurrency: 1, metrics_url: \"off\"}\n",
				tt.upstream, tt.upstreamModel))
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			checks := c.CheckModels(ctx)
			if len(checks) != 1 {
				t.Fatalf("checks = %+v", checks)
			}
			for _, w := range tt.want {
				if !strings.Contains(checks[0].Problem, w) {
					t.Errorf("problem %q, want it to say %q", checks[0].Problem, w)
				}
			}
		})
	}
	// The upstream as configured, /v1 and all, is healthy.
	c := mustParse(t, minimal+fmt.Sprintf("models:\n  - {name: m, upstream: %q, upstream_model: qwen2.5:7b, input_price: \"0.10\", output_price: \"0.20\", max_concurrency: 1, metrics_url: \"off\"}\n", srv.URL+"/v1/"))
	if checks := c.CheckModels(context.Background()); checks[0].Problem != "" {
		t.Errorf("a healthy server: %+v", checks[0])
	}
}
