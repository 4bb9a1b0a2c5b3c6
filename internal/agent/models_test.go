package agent_test

import (
	"strings"
	"testing"

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
