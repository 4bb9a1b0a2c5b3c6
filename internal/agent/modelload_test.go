package agent

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// metricsServer serves a model server's metrics page from testdata, or
// the status given for pages named by status code.
func metricsServer(t *testing.T, page *atomic.Value) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/metrics" && page.Load().(string) == "404":
			http.NotFound(w, r)
		case r.URL.Path == "/metrics":
			b, err := os.ReadFile(filepath.Join("testdata", "metrics", page.Load().(string)))
			if err != nil {
				t.Error(err)
			}
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			w.Write(b)
		case r.URL.Path == "/v1/chat/completions":
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestModels_readPages(t *testing.T) {
	const llama, qwen = "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct"
	for _, tt := range []struct {
		page        string
		llama, qwen string // the header each model's answers carry; "" none
	}{
		{"vllm.txt", "9", "0"}, // summed over engines, by model_name
		{"sglang.txt", "3", "0"},
		{"tgi.txt", "7", "7"}, // no model_name label: the server's one queue
		{"llamacpp.txt", "2", "2"},
		{"other.txt", "", ""}, // no queue gauge known: unknown
		{"404", "", ""},       // no metrics (Ollama): unknown
	} {
		t.Run(tt.page, func(t *testing.T) {
			var page atomic.Value
			page.Store(tt.page)
			ts := metricsServer(t, &page)
			ms := newModels(&Config{Models: []ModelConfig{
				{Name: "llama", Upstream: ts.URL + "/v1", UpstreamModel: llama, InputPrice: "1", OutputPrice: "1", MaxConcurrency: 4},
				{Name: "qwen", Upstream: ts.URL + "/v1", UpstreamModel: qwen, InputPrice: "1", OutputPrice: "1", MaxConcurrency: 4},
			}})
			if len(ms.pages) != 1 {
				t.Fatalf("%d metrics pages for two models of one server, want 1", len(ms.pages))
			}
			var logged []string
			ms.readPages(context.Background(), func(msg string, args ...any) { logged = append(logged, msg) })
			for name, want := range map[string]string{"llama": tt.llama, "qwen": tt.qwen} {
				if got := answerQueue(t, ms, name); got != want {
					t.Errorf("%s's answer says %q waiting, want %q", name, got, want)
				}
			}
			if tt.page == "404" && (len(logged) != 1 || !strings.Contains(logged[0], "unreadable")) {
				t.Errorf("logged %q, want the unreadable page once", logged)
			}
		})
	}
}

// TestModels_readPages_recovers checks that a page that fails makes the
// depth unknown, not stale, and that reading it again restores it.
func TestModels_readPages_recovers(t *testing.T) {
	var page atomic.Value
	page.Store("tgi.txt")
	ts := metricsServer(t, &page)
	ms := newModels(&Config{Models: []ModelConfig{{Name: "m", Upstream: ts.URL + "/v1", InputPrice: "1", OutputPrice: "1", MaxConcurrency: 4}}})
	var logged []string
	log := func(msg string, args ...any) { logged = append(logged, msg) }
	for _, step := range []struct{ page, want string }{{"tgi.txt", "7"}, {"404", ""}, {"404", ""}, {"llamacpp.txt", "2"}} {
		page.Store(step.page)
		ms.readPages(context.Background(), log)
		if got := answerQueue(t, ms, "m"); got != step.want {
			t.Errorf("after reading %s the answer says %q waiting, want %q", step.page, got, step.want)
		}
	}
	if len(logged) != 2 {
		t.Errorf("logged %q, want one line when the page failed and one when it came back", logged)
	}
}

// answerQueue sends one request for model through ms and returns the
// queue depth its answer carries.
func answerQueue(t *testing.T, ms *models, model string) string {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, idlegrid.InferencePath+"chat/completions", strings.NewReader(`{"model":"x","messages":[]}`))
	r.Header.Set(idlegrid.ModelHeader, model)
	w := httptest.NewRecorder()
	ms.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("answer %d: %s", w.Code, w.Body)
	}
	return w.Header().Get(idlegrid.ModelQueueHeader)
}

func TestModelConfig_metricsURL(t *testing.T) {
	for _, tt := range []struct{ upstream, metrics, want string }{
		{"http://127.0.0.1:8000/v1", "", "http://127.0.0.1:8000/metrics"},
		{"https://gpu-box.lan:8443/openai/v1/", "", "https://gpu-box.lan:8443/metrics"},
		{"http://127.0.0.1:8000/v1", "http://127.0.0.1:9090/stats", "http://127.0.0.1:9090/stats"},
		{"http://127.0.0.1:11434/v1", MetricsOff, ""},
	} {
		m := ModelConfig{Upstream: tt.upstream, MetricsURL: tt.metrics}
		if got := m.metricsURL(); got != tt.want {
			t.Errorf("metricsURL(%q, %q) = %q, want %q", tt.upstream, tt.metrics, got, tt.want)
		}
	}
	ms := newModels(&Config{Models: []ModelConfig{
		{Name: "a", Upstream: "http://127.0.0.1:11434/v1", MetricsURL: MetricsOff, InputPrice: "1", OutputPrice: "1", MaxConcurrency: 1},
	}})
	if len(ms.pages) != 0 {
		t.Errorf("metrics_url off still reads %d pages", len(ms.pages))
	}
	// The model's API key goes with the read of its own server's page, and
	// nowhere else.
	for _, tt := range []struct{ metrics, want string }{
		{"", "sk-local"}, {"http://127.0.0.1:8000/stats", "sk-local"}, {"http://metrics.lan:9090/metrics", ""}, {"https://127.0.0.1:8000/metrics", ""},
	} {
		m := ModelConfig{Upstream: "http://127.0.0.1:8000/v1", APIKey: "sk-local", MetricsURL: tt.metrics}
		if got := m.keyFor(m.metricsURL()); got != tt.want {
			t.Errorf("metrics_url %q: key %q, want %q", tt.metrics, got, tt.want)
		}
	}
}

// TestModels_queues checks what a heartbeat reports: the known queues of
// the healthy models, in config order, and nothing for a page that cannot
// be read.
func TestModels_queues(t *testing.T) {
	var page atomic.Value
	page.Store("vllm.txt")
	ts := metricsServer(t, &page)
	ms := newModels(&Config{Models: []ModelConfig{
		{Name: "qwen", Upstream: ts.URL + "/v1", UpstreamModel: "Qwen/Qwen2.5-7B-Instruct", InputPrice: "1", OutputPrice: "1", MaxConcurrency: 4},
		{Name: "llama", Upstream: ts.URL + "/v1", UpstreamModel: "meta-llama/Llama-3.1-8B-Instruct", InputPrice: "1", OutputPrice: "1", MaxConcurrency: 4},
		{Name: "sick", Upstream: ts.URL + "/v1", UpstreamModel: "meta-llama/Llama-3.1-8B-Instruct", InputPrice: "1", OutputPrice: "1", MaxConcurrency: 4},
	}})
	ms.healthy["qwen"], ms.healthy["llama"] = true, true // sick failed its health check
	nolog := func(string, ...any) {}
	ms.readPages(context.Background(), nolog)
	want := []idlegrid.ModelQueue{{Model: "qwen", Queued: 0}, {Model: "llama", Queued: 9}}
	if got := ms.queues(); !slices.Equal(got, want) {
		t.Errorf("queues = %+v, want %+v", got, want)
	}
	page.Store("404")
	ms.readPages(context.Background(), nolog)
	if got := ms.queues(); len(got) != 0 {
		t.Errorf("queues = %+v once the page cannot be read, want none", got)
	}
}

// TestModels_healthLogged checks that a model leaving the offer is a
// warning, which a provider logging at warn still sees, and its return
// news.
func TestModels_healthLogged(t *testing.T) {
	var up atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() || r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, `{"object":"list","data":[{"id":"llama"}]}`)
	}))
	t.Cleanup(ts.Close)
	ms := newModels(&Config{Models: []ModelConfig{
		{Name: "llama", Upstream: ts.URL + "/v1", UpstreamModel: "llama", InputPrice: "1", OutputPrice: "1", MaxConcurrency: 4},
	}})
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ms.checkAll(context.Background(), log)
	if !strings.Contains(logs.String(), `level=WARN msg="model unhealthy; not offered" model=llama`) {
		t.Errorf("a model server that answers 404, logged at warn:\n%s\nwant the model's leaving the offer", logs.String())
	}
	logs.Reset()
	up.Store(true)
	ms.checkAll(context.Background(), log)
	if logs.Len() != 0 {
		t.Errorf("the model back, logged at warn:\n%s\nwant nothing: its return is news, not a warning", logs.String())
	}
}
