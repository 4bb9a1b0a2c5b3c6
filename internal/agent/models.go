package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/inflight"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// Inference serving (docs/gateway.md). The config lists the models the
// node serves from local OpenAI-compatible servers (vLLM, Ollama,
// llama.cpp's server, SGLang, TGI). The agent checks each server's health,
// advertises the healthy models in its offer, and answers the gateway's
// requests, which arrive over the agent's own outbound session (so a node
// behind NAT serves too), by passing them to the local server and its
// answer back, chunk by chunk.

// DefaultModelHealthInterval is how often each model server is checked
// when model_health_interval is not set.
const DefaultModelHealthInterval = 10 * time.Second

// modelCheckTimeout bounds one health check.
const modelCheckTimeout = 5 * time.Second

// ModelConfig is one model the node serves.
type ModelConfig struct {
	// Name is what renters ask for, e.g. llama-3.1-8b-instruct.
	Name string `yaml:"name"`
	// Upstream is the base URL of the model server's OpenAI API, e.g.
	// http://127.0.0.1:8000/v1 (vLLM) or http://127.0.0.1:11434/v1 (Ollama).
	Upstream string `yaml:"upstream"`
	// UpstreamModel is the model's name at the model server; empty: Name.
	UpstreamModel string `yaml:"upstream_model"`
	// APIKey, when the model server wants one, is sent to it as a bearer token.
	APIKey string `yaml:"api_key"`
	// InputPrice and OutputPrice are per million tokens, e.g. "0.20".
	InputPrice  string `yaml:"input_price"`
	OutputPrice string `yaml:"output_price"`
	// MaxConcurrency is how many requests the node takes at once; more
	// are refused (429) so that the gateway sends them elsewhere.
	MaxConcurrency int  `yaml:"max_concurrency"`
	ContextTokens  int  `yaml:"context_tokens"`
	Embeddings     bool `yaml:"embeddings"`
	// MetricsURL is where the model server serves its Prometheus metrics,
	// read for its queue depth (modelload.go); empty: /metrics at the
	// upstream's host; "off": none.
	MetricsURL string `yaml:"metrics_url"`
}

// offer is the model as the node advertises it.
func (m *ModelConfig) offer(field string) (idlegrid.ModelOffer, error) {
	o := idlegrid.ModelOffer{Name: m.Name, MaxConcurrency: m.MaxConcurrency, ContextTokens: m.ContextTokens, Embeddings: m.Embeddings}
	for _, p := range []struct {
		key  string
		text string
		to   *idlegrid.Micros
	}{{"input_price", m.InputPrice, &o.InputMicrosPerMTokens}, {"output_price", m.OutputPrice, &o.OutputMicrosPerMTokens}} {
		price, err := idlegrid.ParseMicros(p.text)
		if err != nil {
			return o, idlegrid.Invalid(field+"."+p.key, "want a price per million tokens such as \"0.20\": %v", err)
		}
		*p.to = price
	}
	if err := o.Validate(field); err != nil {
		var e *idlegrid.Error
		if errors.As(err, &e) {
			e2 := *e
			e2.Field = strings.Replace(e2.Field, "input_micros_per_mtokens", "input_price", 1)
			e2.Field = strings.Replace(e2.Field, "output_micros_per_mtokens", "output_price", 1)
			return o, &e2
		}
		return o, err
	}
	return o, nil
}

// validateModels checks the models section of the config.
func (c *Config) validateModels() error {
	if err := checkInterval("model_health_interval", c.ModelHealthInterval, DefaultModelHealthInterval); err != nil {
		return err
	}
	if err := checkInterval("model_load_interval", c.ModelLoadInterval, DefaultModelLoadInterval); err != nil {
		return err
	}
	if c.ModelDrainWait < 0 || c.ModelDrainWait > MaxModelDrainWait {
		return idlegrid.Invalid("model_drain_wait", "must be between 0 (the default, %v) and %v, got %v", DefaultModelDrainWait, MaxModelDrainWait, c.ModelDrainWait)
	}
	if len(c.Models) > idlegrid.MaxModelsPerNode {
		return idlegrid.Invalid("models", "at most %d models", idlegrid.MaxModelsPerNode)
	}
	seen := map[string]bool{}
	for i := range c.Models {
		m := &c.Models[i]
		field := fmt.Sprintf("models[%d]", i)
		if _, err := m.offer(field); err != nil {
			return err
		}
		if seen[m.Name] {
			return idlegrid.Invalid(field+".name", "model %q is listed twice", m.Name)
		}
		seen[m.Name] = true
		u, err := url.Parse(m.Upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return idlegrid.Invalid(field+".upstream", "want the model server's base URL, e.g. http://127.0.0.1:8000/v1, got %q", m.Upstream)
		}
		if err := m.validateMetricsURL(field); err != nil {
			return err
		}
	}
	return nil
}

// checkInterval checks a model loop's interval, d of field: 0 for def, or
// at least 10ms.
func checkInterval(field string, d, def time.Duration) error {
	if d < 0 || (d > 0 && d < 10*time.Millisecond) {
		return idlegrid.Invalid(field, "must be at least 10ms (0 means %v)", def)
	}
	return nil
}

// intervalOr is d, or def when d is 0.
func intervalOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// models is the agent's inference side: the configured models, which of
// them are healthy, their queues at their servers, and the requests in
// flight. Its health and load loops are owned by the agent's serve; its
// handler by the session.
type models struct {
	byName    map[string]*servedModel
	names     []string // in config order
	client    *http.Client
	every     time.Duration
	changed   chan struct{} // the healthy set changed; buffered, never blocks
	pages     []*metricsPage
	loadEvery time.Duration

	mu      sync.Mutex
	healthy map[string]bool
	reasons map[string]string // why a model is not healthy
	leaving bool              // the agent is stopping: no new request (modeldrain.go)
	active  inflight.Count    // requests being proxied

	drainWait time.Duration // how long a stop lets the requests in flight run on
}

// servedModel is one configured model and its concurrency slots.
type servedModel struct {
	cfg   ModelConfig
	offer idlegrid.ModelOffer
	slots chan struct{}
	base  string // Upstream without its trailing slash
	queue *queueDepth
}

func newModels(c *Config) *models {
	ms := &models{
		byName: map[string]*servedModel{}, changed: make(chan struct{}, 1),
		every:     intervalOr(c.ModelHealthInterval, DefaultModelHealthInterval),
		loadEvery: intervalOr(c.ModelLoadInterval, DefaultModelLoadInterval),
		drainWait: intervalOr(c.ModelDrainWait, DefaultModelDrainWait),
		healthy:   map[string]bool{}, reasons: map[string]string{},
		client: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // model servers are local
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true, // the gateway reads usage from the answer
		}},
	}
	for i := range c.Models {
		m := c.Models[i]
		o, err := m.offer("models")
		if err != nil {
			continue // Validate refused the config before this
		}
		if m.UpstreamModel == "" {
			m.UpstreamModel = m.Name
		}
		ms.byName[m.Name] = &servedModel{cfg: m, offer: o, slots: make(chan struct{}, m.MaxConcurrency), base: strings.TrimRight(m.Upstream, "/"), queue: newQueueDepth()}
		ms.names = append(ms.names, m.Name)
	}
	served := make([]*servedModel, len(ms.names))
	for i, name := range ms.names {
		served[i] = ms.byName[name]
	}
	ms.pages = loadPages(served)
	return ms
}

// offered returns the healthy models, by name, for the offer: none once
// the agent is leaving.
func (ms *models) offered() []idlegrid.ModelOffer {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.leaving {
		return nil
	}
	var out []idlegrid.ModelOffer
	for _, name := range ms.names {
		if ms.healthy[name] {
			out = append(out, ms.byName[name].offer)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// key changes exactly when the offered models do.
func (ms *models) key() string {
	var parts []string
	for _, m := range ms.offered() {
		parts = append(parts, "model="+m.Name)
	}
	return strings.Join(parts, ",")
}

// loop checks the models every interval until ctx is done.
func (ms *models) loop(ctx context.Context, log *slog.Logger) {
	if len(ms.names) == 0 {
		return
	}
	t := time.NewTicker(ms.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ms.checkAll(ctx, log)
	}
}

// checkAll checks every model at once and records which are healthy,
// signalling changed when that differs from before. A model that leaves
// the offer is a warning: the provider earns nothing from it meanwhile.
func (ms *models) checkAll(ctx context.Context, log *slog.Logger) {
	if len(ms.names) == 0 {
		return
	}
	reasons := make([]string, len(ms.names))
	var wg sync.WaitGroup
	for i, name := range ms.names {
		wg.Go(func() { reasons[i] = ms.check(ctx, ms.byName[name]) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	changed := false
	ms.mu.Lock()
	for i, name := range ms.names {
		ok := reasons[i] == ""
		if ms.healthy[name] != ok || (!ok && ms.reasons[name] != reasons[i]) {
			changed = changed || ms.healthy[name] != ok
			if ok {
				log.Info("model healthy", "model", name)
			} else {
				log.Warn("model unhealthy; not offered", "model", name, "reason", reasons[i])
			}
		}
		ms.healthy[name], ms.reasons[name] = ok, reasons[i]
	}
	ms.mu.Unlock()
	if changed {
		select {
		case ms.changed <- struct{}{}:
		default:
		}
	}
}

// check asks a model's server for its models; "" when it answers and
// lists the model (or lists nothing, as some servers do).
func (ms *models) check(ctx context.Context, m *servedModel) string {
	ctx, cancel := context.WithTimeout(ctx, modelCheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+"/models", nil)
	if err != nil {
		return err.Error()
	}
	if m.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.cfg.APIKey)
	}
	start := time.Now()
	resp, err := ms.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Sprintf("GET /models: no answer within %v", time.Since(start).Round(100*time.Millisecond))
		}
		return err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		problem := "GET /models answered " + resp.Status
		if base := apiBase(m.base); resp.StatusCode == http.StatusNotFound && base != m.base {
			problem += "; upstream usually ends in /v1, the server's OpenAI base URL: e.g. " + base
		}
		return problem
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&list); err != nil {
		return "GET /models: not an OpenAI model list"
	}
	if len(list.Data) == 0 {
		return ""
	}
	var listed []string
	for _, d := range list.Data {
		if d.ID == m.cfg.UpstreamModel {
			return ""
		}
		if len(listed) < 8 {
			listed = append(listed, strconv.Quote(d.ID))
		}
	}
	more := ""
	if n := len(list.Data) - len(listed); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return fmt.Sprintf("the server does not list %q; it lists %s%s (set upstream_model to its name there)", m.cfg.UpstreamModel, strings.Join(listed, ", "), more)
}

// apiBase is the OpenAI base URL an upstream most likely meant: base
// without an endpoint's path (/chat/completions, /models, ...) and ending
// in /v1, as vLLM, Ollama, SGLang and TGI serve it.
func apiBase(base string) string {
	for _, endpoint := range []string{"/chat/completions", "/completions", "/embeddings", "/responses", "/models"} {
		base = strings.TrimSuffix(base, endpoint)
	}
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	return base
}

// inferenceEndpoints are the OpenAI endpoints the agent passes to its
// model servers, as paths after /v1/.
var inferenceEndpoints = map[string]bool{"chat/completions": true, "completions": true, "embeddings": true, "responses": true}

// ServeHTTP answers the gateway's requests on the session: it passes each
// to the model's server and the answer back, flushing every chunk as it
// arrives. A model that is not configured is a 404, one at its
// concurrency a 429, and so is every request once the agent is stopping
// (modeldrain.go); all in OpenAI's error format, so that the gateway
// tries another provider.
func (ms *models) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	endpoint, ok := strings.CutPrefix(r.URL.Path, idlegrid.InferencePath)
	if !ok || r.Method != http.MethodPost || !inferenceEndpoints[endpoint] {
		writeModelError(w, http.StatusNotFound, "not_found_error", "no such inference endpoint: "+r.Method+" "+r.URL.Path)
		return
	}
	m := ms.byName[r.Header.Get(idlegrid.ModelHeader)]
	if m == nil {
		writeModelError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("this node does not serve model %q", r.Header.Get(idlegrid.ModelHeader)))
		return
	}
	if q := m.queue.header(); q != "" {
		w.Header().Set(idlegrid.ModelQueueHeader, q)
	}
	if !ms.enter() {
		refuseLeaving(w)
		return
	}
	defer ms.exit()
	select {
	case m.slots <- struct{}{}:
		defer func() { <-m.slots }()
	default:
		writeModelError(w, http.StatusTooManyRequests, "rate_limit_error", fmt.Sprintf("model %q is at its max concurrency (%d) on this node", m.cfg.Name, m.cfg.MaxConcurrency))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeModelError(w, http.StatusBadRequest, "invalid_request_error", "could not read the request: "+err.Error())
		return
	}
	if m.cfg.UpstreamModel != m.cfg.Name {
		if body, err = renameModel(body, m.cfg.UpstreamModel); err != nil {
			writeModelError(w, http.StatusBadRequest, "invalid_request_error", "the request is not a JSON object")
			return
		}
	}
	ms.proxy(w, r, m, endpoint, body)
}

// proxy sends body to the model's server and copies the answer back.
func (ms *models) proxy(w http.ResponseWriter, r *http.Request, m *servedModel, endpoint string, body []byte) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, m.base+"/"+endpoint, bytes.NewReader(body))
	if err != nil {
		writeModelError(w, http.StatusBadGateway, "server_error", err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", r.Header.Get("Accept"))
	if m.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.cfg.APIKey)
	}
	resp, err := ms.client.Do(req)
	if err != nil {
		writeModelError(w, http.StatusBadGateway, "server_error", "the model server did not answer: "+err.Error())
		return
	}
	defer resp.Body.Close()
	defer unblockWhenGone(w, r)()
	for _, h := range []string{"Content-Type", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	if !isStream(r, resp) {
		answerWhole(w, resp)
		return
	}
	w.WriteHeader(resp.StatusCode)
	copyFlushing(w, resp.Body)
}

// unblockWhenGone ends, once the gateway has given up the request (its
// renter stopped reading, say), a write of the answer that waits on the
// session's flow control, which would otherwise hold the model's slot
// until the session resets the stream. The returned func, deferred, stops
// it before the handler returns, so that it never touches a finished
// response.
func unblockWhenGone(w http.ResponseWriter, r *http.Request) (stop func()) {
	var mu sync.Mutex
	finished := false
	rc := http.NewResponseController(w)
	cancel := context.AfterFunc(r.Context(), func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			_ = rc.SetWriteDeadline(time.Unix(1, 0)) // the past: every write fails now
		}
	})
	return func() {
		cancel()
		mu.Lock()
		finished = true
		mu.Unlock()
	}
}

// maxWholeAnswer bounds the non-streamed answer the agent holds before it
// passes it on; the rest of a larger one is copied as it comes.
const maxWholeAnswer = 8 << 20

// isStream reports whether an answer is a stream of server-sent events,
// which must pass on chunk by chunk.
func isStream(r *http.Request, resp *http.Response) bool {
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") ||
		strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// answerWhole passes on a non-streamed answer in one write, with its
// length: its header and body then cross the session as one frame rather
// than a frame per read and the end of a chunked body. The gateway reads
// such an answer whole anyway. An upstream that breaks off before the end
// is a 502, so that the gateway tries another provider.
func answerWhole(w http.ResponseWriter, resp *http.Response) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxWholeAnswer))
	if err != nil {
		writeModelError(w, http.StatusBadGateway, "server_error", "the model server's answer broke off: "+err.Error())
		return
	}
	if len(body) < maxWholeAnswer {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
		return
	}
	w.WriteHeader(resp.StatusCode)
	if _, err := w.Write(body); err == nil {
		copyFlushing(w, resp.Body)
	}
}

// copyBufs are copyFlushing's buffers: one a streamed answer would
// otherwise be 32 KiB of garbage a request.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyFlushing copies src to w, flushing after every read, so that each
// chunk of a stream goes on at once.
func copyFlushing(w http.ResponseWriter, src io.Reader) {
	rc := http.NewResponseController(w)
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				panic(http.ErrAbortHandler) // cut the answer short, so the gateway sees it fail
			}
			return
		}
	}
}

// renameModel sets a request body's model, splicing the name in: the
// rest of the body goes on byte for byte, without a decoding and an
// encoding on every request.
func renameModel(body []byte, model string) ([]byte, error) {
	name, err := json.Marshal(model)
	if err != nil {
		return nil, err
	}
	return openai.SetField(body, "model", name)
}

func writeModelError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
}
