package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/gateway"
	gpufake "github.com/idlegrid/idlegrid/internal/gpu/fake"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	runtimefake "github.com/idlegrid/idlegrid/internal/runtime/fake"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/session"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
)

// fixture is the whole path a renter's request takes: the real
// coordinator on SQLite with its HTTP API and the gateway behind a real
// listener, real agents that join over HTTP and hold sessions, and mock
// model servers behind the agents.
type fixture struct {
	URL    string
	Store  *sqlstore.DB
	Server *server.Server
	GW     *gateway.Gateway
	Admin  *client.Client

	RenterID, RenterKey, RenterKeyID string
	providerKey                      string
	joinToken                        string
	log                              *slog.Logger
	// clock is the gateway's clock when a test moves it by hand; waits
	// for the catalog move it on by catalogTTL, so that the catalog is
	// read again.
	clock      *manualClock
	catalogTTL time.Duration
}

// testWriter logs to the test until it ends.
type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.done:
	case isFuzz(w.t): // F.Log panics inside the fuzz function, where requests run
		fmt.Fprintln(os.Stderr, strings.TrimSpace(string(p)))
	default:
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// isFuzz reports whether tb is a fuzz test's F.
func isFuzz(tb testing.TB) bool {
	_, ok := tb.(*testing.F)
	return ok
}

func mustFixture(tb testing.TB, tune func(*gateway.Config)) *fixture {
	tb.Helper()
	ctx := context.Background()
	tw := &testWriter{t: tb}
	tb.Cleanup(func() { tw.mu.Lock(); tw.done = true; tw.mu.Unlock() })
	log := slog.New(slog.NewTextHandler(tw, &slog.HandlerOptions{Level: slog.LevelWarn}))

	store, err := sqlstore.Open(ctx, sqlstoretest.Path(tb))
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { store.Close() })
	// Tests beat every second so that a lost agent shows quickly; a
	// benchmark keeps the production default, so that a load it queues for
	// seconds measures as latency instead of losing the node.
	heartbeat := time.Second
	if _, ok := tb.(*testing.B); ok {
		heartbeat = 0
	}
	srv, err := server.Open(server.Config{Store: store, Logger: log, HeartbeatInterval: heartbeat})
	if err != nil {
		tb.Fatalf("open server: %v", err)
	}
	tb.Cleanup(func() { srv.Close() })
	reg := session.NewRegistry(session.Config{Logger: log})
	cfg := gateway.Config{
		Store: store, Nodes: gateway.Sessions{Registry: reg},
		Authenticate: srv.AuthenticateKey, StatusCode: httpapi.StatusCode, FeeBasisPoints: 1000, Logger: log,
		CatalogTTL: 10 * time.Millisecond, BudgetTTL: time.Nanosecond,
		Journal: tb.TempDir(), // as idlegrid server keeps one
	}
	if tune != nil {
		tune(&cfg)
	}
	gw, err := gateway.New(cfg)
	if err != nil {
		tb.Fatalf("gateway.New: %v", err)
	}
	tb.Cleanup(func() { gw.Close() })
	srv.ReportQueuesTo(gw)
	ts := httptest.NewServer(httpapi.New(srv, httpapi.Options{Logger: log, Sessions: reg, Gateway: gw, AccountLimits: cfg.AccountLimits}))
	tb.Cleanup(ts.Close)
	tb.Cleanup(func() { reg.Close() }) // before the HTTP server closes

	_, _, adminSecret, err := srv.Bootstrap(ctx, "root", idlegrid.RoleAdmin)
	if err != nil {
		tb.Fatalf("bootstrap: %v", err)
	}
	f := &fixture{URL: ts.URL, Store: store, Server: srv, GW: gw, Admin: client.New(ts.URL, adminSecret), log: log,
		catalogTTL: cfg.CatalogTTL}
	f.clock, _ = cfg.Clock.(*manualClock)
	renter, key, secret, err := f.Admin.CreateAccount(ctx, "renter", idlegrid.RoleRenter)
	if err != nil {
		tb.Fatal(err)
	}
	f.RenterID, f.RenterKey, f.RenterKeyID = renter.ID, secret, key.ID
	if _, err := f.Admin.TopUp(ctx, renter.ID, 100*idlegrid.MicrosPerUnit, "start"); err != nil {
		tb.Fatal(err)
	}
	_, _, f.providerKey, err = f.Admin.CreateAccount(ctx, "provider", idlegrid.RoleProvider)
	if err != nil {
		tb.Fatal(err)
	}
	if _, f.joinToken, err = client.New(ts.URL, f.providerKey).CreateJoinToken(ctx, "fleet", 100, time.Hour); err != nil {
		tb.Fatal(err)
	}
	return f
}

// mustRenter makes another renter account with 100 units to spend, and
// returns its API key.
func (f *fixture) mustRenter(tb testing.TB, name string) string {
	tb.Helper()
	ctx := context.Background()
	renter, _, secret, err := f.Admin.CreateAccount(ctx, name, idlegrid.RoleRenter)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.Admin.TopUp(ctx, renter.ID, 100*idlegrid.MicrosPerUnit, "start"); err != nil {
		tb.Fatal(err)
	}
	return secret
}

// sdk is the official OpenAI client of the gateway, as a renter uses it.
func (f *fixture) sdk(key string, opts ...option.RequestOption) oai.Client {
	return oai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(f.URL + "/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0),
	}, opts...)...)
}

// testAgent is a running agent and what it serves.
type testAgent struct {
	NodeID string
	stop   func()
	a      *agent.Agent
	done   chan struct{} // closed when Run has returned, with runErr
	runErr error
}

// ran waits for the agent's Run to return, and returns its error.
func (ta *testAgent) ran() error {
	<-ta.done
	return ta.runErr
}

// startAgent runs a real agent with fake GPUs that serves models from the
// given mock servers, and waits until it has joined.
func (f *fixture) startAgent(tb testing.TB, name, region, residency string, models ...agent.ModelConfig) *testAgent {
	tb.Helper()
	return f.startAgentWith(tb, nil, name, region, residency, models...)
}

// startAgentWith is startAgent with edit, when not nil, run on the
// agent's config before it starts.
func (f *fixture) startAgentWith(tb testing.TB, edit func(*agent.Config), name, region, residency string, models ...agent.ModelConfig) *testAgent {
	tb.Helper()
	cfg := &agent.Config{
		Server: f.URL, JoinToken: f.joinToken, DataDir: tb.TempDir(), Name: name,
		Region: region, Residency: residency, Ask: agent.AskConfig{Floor: map[idlegrid.Tier]string{idlegrid.TierBronze: "1.00"}},
		FakeGPUs: "1xRTX4090", Models: models, ModelHealthInterval: 50 * time.Millisecond,
	}
	if edit != nil {
		edit(cfg)
	}
	if _, ok := tb.(*testing.B); !ok {
		cfg.ModelLoadInterval = 50 * time.Millisecond // a benchmark reads the queues at the default pace
	}
	key, err := nodekey.LoadOrCreate(cfg.KeyPath())
	if err != nil {
		tb.Fatal(err)
	}
	det, err := gpufake.Parse(cfg.FakeGPUs, name)
	if err != nil {
		tb.Fatal(err)
	}
	rt := &runtimefake.Runtime{}
	a, err := agent.New(agent.Options{
		Config: cfg, Server: client.NewAgent(f.URL, key), Detector: det, Runtime: rt,
		Logger: f.log.With("node", name), Key: key, Host: &agent.Host{Name: name, CPUCores: 8, RAMMB: 32768, DiskGB: 100},
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ta := &testAgent{a: a, done: make(chan struct{})}
	go func() {
		ta.runErr = a.Run(ctx)
		close(ta.done)
	}()
	var once sync.Once
	ta.stop = func() {
		once.Do(func() {
			cancel()
			if err := ta.ran(); err != nil && !errors.Is(err, agent.ErrHandedOver) {
				tb.Errorf("agent %s: %v", name, err)
			}
			rt.Close()
		})
	}
	tb.Cleanup(ta.stop)
	eventually(tb, "agent "+name+" to join", func() string {
		if ta.NodeID = a.NodeID(); ta.NodeID == "" {
			return "no node ID yet"
		}
		return ""
	})
	return ta
}

// waitProviders waits until GET /v1/models says n providers serve model.
func (f *fixture) waitProviders(tb testing.TB, model string, n int) {
	tb.Helper()
	c := f.sdk(f.RenterKey)
	eventually(tb, fmt.Sprintf("%d providers of %s", n, model), func() string {
		if f.clock != nil {
			f.clock.advance(f.catalogTTL) // the catalog ages on the gateway's clock
		}
		page, err := c.Models.List(context.Background())
		if err != nil {
			return err.Error()
		}
		for _, m := range page.Data {
			if m.ID == model {
				var ext struct {
					Providers int `json:"providers"`
				}
				json.Unmarshal([]byte(m.RawJSON()), &ext)
				if ext.Providers == n {
					return ""
				}
				return fmt.Sprintf("%d providers", ext.Providers)
			}
		}
		return "not listed"
	})
}

// mustSolo is a fixture with one provider of testModel, alpha, served by
// the mock it returns.
func mustSolo(tb testing.TB, tune func(*gateway.Config)) (*fixture, *mock) {
	tb.Helper()
	f := mustFixture(tb, tune)
	up := mustMock(tb, "alpha")
	f.startAgent(tb, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 4))
	f.waitProviders(tb, testModel, 1)
	return f, up
}

// waitChallenges waits until the agents have answered the hardware
// challenges the server issued when they joined: each runs a matrix
// product on the CPU for a simulated GPU, which a benchmark must not
// measure beside its requests.
func (f *fixture) waitChallenges(tb testing.TB) {
	tb.Helper()
	eventually(tb, "join challenges answered", func() string {
		ctx := context.Background()
		all, err := f.Store.ListChallenges(ctx, idlegrid.ChallengeFilter{})
		if err != nil {
			return err.Error()
		}
		open, err := f.Store.ListChallenges(ctx, idlegrid.ChallengeFilter{States: []idlegrid.ChallengeState{idlegrid.ChallengeIssued}})
		switch {
		case err != nil:
			return err.Error()
		case len(all) == 0:
			return "none issued yet"
		case len(open) > 0:
			return fmt.Sprintf("%d of %d unanswered", len(open), len(all))
		}
		return ""
	})
}

// eventually polls cond, which says what it still waits for, every 10ms
// for at most 20s of real time: agents, sessions and model servers run over
// real sockets, which testing/synctest cannot fake.
func eventually(tb testing.TB, what string, cond func() string) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		reason := cond()
		if reason == "" {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s: %s", what, reason)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mock is a mock OpenAI-compatible model server. Its answers are fixed:
// a chat completion says "Hello from <name>" in five chunks, and its usage
// is 7 prompt and 5 completion tokens. Mode switches it into a fault.
type mock struct {
	Name   string
	URL    string
	mode   atomic.Value // a fault name, or "" for healthy
	Served atomic.Int64 // chat and completion requests answered 200
	Calls  atomic.Int64 // inference requests received
	freed  chan struct{}
	once   sync.Once
	bodies chan []byte // the last requests' bodies, newest kept

	Waiting      atomic.Int64 // requests its metrics say wait in its queue
	MetricsReads atomic.Int64 // GET /metrics received
}

// Faults a mock can be switched into.
const (
	faultNone      = ""
	fault500       = "500"
	fault429       = "429"
	faultStall     = "stall"      // a stream stops after its first chunk and never ends
	faultDrop      = "drop"       // the connection drops after two chunks
	faultSlowFirst = "slow-first" // no byte at all until the test ends
	faultNoUsage   = "no-usage"   // answers, but never with usage
	faultDown      = "down"       // the health check fails too
	faultGreedy    = "greedy"     // answers, with usage of greedyTokens prompt and completion tokens
	fault401       = "401"        // refuses the agent's credentials for the model server
	faultFlood     = "flood"      // a stream of big chunks that ends only when the request does
	faultHTML      = "html"       // answers as usual, but says its answer is text/html
	faultGone      = "gone"       // answers 404: it no longer serves the model
	faultHold      = "hold"       // answers as usual, once the test frees it
	faultCR        = "cr"         // answers as usual, a stream's lines ending in \r alone, as server-sent events allow
	faultChatOnly  = "chat-only"  // serves no /v1/completions nor /v1/responses: 404, as Go's mux answers a path it does not route
	faultFailed    = "failed"     // a response fails for the model server's own error (status failed, code server_error)
	fault400       = "400"        // refuses the request as the renter's mistake
)

// greedyTokens is the usage a greedy mock reports, whatever it served.
const greedyTokens = 100_000_000

const mockPromptTokens, mockCompletionTokens = 7, 5

func mustMock(tb testing.TB, name string) *mock {
	tb.Helper()
	m := &mock{Name: name, freed: make(chan struct{}), bodies: make(chan []byte, 1)}
	m.mode.Store(faultNone)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", m.models)
	mux.HandleFunc("GET /metrics", m.metrics)
	mux.HandleFunc("POST /v1/chat/completions", m.chat)
	mux.HandleFunc("POST /v1/completions", m.completion)
	mux.HandleFunc("POST /v1/embeddings", m.embeddings)
	mux.HandleFunc("POST /v1/responses", m.response)
	ts := httptest.NewServer(mux)
	m.URL = ts.URL
	tb.Cleanup(func() { m.free(); ts.Close() })
	return m
}

func (m *mock) set(mode string) { m.mode.Store(mode) }
func (m *mock) get() string     { return m.mode.Load().(string) }
func (m *mock) free()           { m.once.Do(func() { close(m.freed) }) }

// model is the agent's config of a model this mock serves.
func (m *mock) model(name, in, out string, concurrency int) agent.ModelConfig {
	return agent.ModelConfig{Name: name, Upstream: m.URL + "/v1", UpstreamModel: "upstream-model", InputPrice: in, OutputPrice: out, MaxConcurrency: concurrency, Embeddings: true}
}

func (m *mock) lastBody() []byte {
	select {
	case b := <-m.bodies:
		return b
	default:
		return nil
	}
}

// keep makes b the last body received, replacing the one kept before. It
// never blocks: with many requests at once, two could drain the one slot
// together and the second send would wait forever.
func (m *mock) keep(b []byte) {
	for {
		select {
		case m.bodies <- b:
			return
		default:
		}
		select {
		case <-m.bodies:
		default:
		}
	}
}

func (m *mock) models(w http.ResponseWriter, r *http.Request) {
	if m.get() == faultDown {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"object":"list","data":[{"id":"upstream-model","object":"model"}]}`)
}

// metrics serves the queue gauge as vLLM does.
func (m *mock) metrics(w http.ResponseWriter, r *http.Request) {
	m.MetricsReads.Add(1)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"upstream-model\"} %d\n", m.Waiting.Load())
}

// fault answers the faults that strike before any byte; it reports
// whether it answered.
func (m *mock) fault(w http.ResponseWriter, r *http.Request) bool {
	switch m.get() {
	case fault500, faultDown:
		writeError(w, http.StatusInternalServerError, "server_error", "CUDA out of memory")
	case fault429:
		writeError(w, http.StatusTooManyRequests, "rate_limit_error", "queue full")
	case fault400:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "the prompt is longer than the model's context")
	case fault401:
		writeError(w, http.StatusUnauthorized, "authentication_error", "Incorrect API key provided")
	case faultGone:
		writeError(w, http.StatusNotFound, "invalid_request_error", "The model `upstream-model` does not exist")
	case faultSlowFirst:
		select {
		case <-m.freed:
		case <-r.Context().Done():
		}
	case faultHold:
		select {
		case <-m.freed:
			return false
		case <-r.Context().Done():
		}
	default:
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":%q,"param":null,"code":null}}`, msg, typ)
}

type mockRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens *int `json:"max_tokens"`
}

func (m *mock) read(w http.ResponseWriter, r *http.Request) (*mockRequest, bool) {
	m.Calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	m.keep(body)
	var req mockRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "bad JSON")
		return nil, false
	}
	if req.Model != "upstream-model" {
		writeError(w, http.StatusNotFound, "invalid_request_error", "no model "+req.Model)
		return nil, false
	}
	if req.MaxTokens != nil && *req.MaxTokens > 100000 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "max_tokens is too large for this model")
		return nil, false
	}
	return &req, !m.fault(w, r)
}

func (m *mock) usage() string {
	in, out := int64(mockPromptTokens), int64(mockCompletionTokens)
	switch m.get() {
	case faultNoUsage:
		return ""
	case faultGreedy:
		in, out = greedyTokens, greedyTokens
	}
	return fmt.Sprintf(`,"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, in, out, in+out)
}

// words are the five chunks of every answer.
func (m *mock) words() []string {
	return []string{"Hello", " from", " ", m.Name, "."}
}

func (m *mock) chat(w http.ResponseWriter, r *http.Request) {
	req, ok := m.read(w, r)
	if !ok {
		return
	}
	if !req.Stream {
		m.Served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if m.get() == faultHTML {
			w.Header().Set("Content-Type", "text/html")
		}
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]%s}`,
			req.Model, strings.Join(m.words(), ""), m.usage())
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	if m.get() == faultHTML {
		w.Header().Set("Content-Type", "text/html")
	}
	rc := http.NewResponseController(w)
	var out io.Writer = w
	if m.get() == faultCR {
		out = crLines{w}
	}
	chunk := func(delta string) {
		fmt.Fprintf(out, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", req.Model, delta)
		rc.Flush()
	}
	if m.get() == faultFlood {
		big := strings.Repeat("x", 32<<10)
		for r.Context().Err() == nil {
			chunk(big)
		}
		return
	}
	for i, word := range m.words() {
		chunk(word)
		switch mode := m.get(); {
		case mode == faultStall && i == 0:
			select {
			case <-m.freed:
			case <-r.Context().Done():
			}
			return
		case mode == faultDrop && i == 1:
			panic(http.ErrAbortHandler) // drops the connection mid-stream
		}
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage && m.get() != faultNoUsage {
		fmt.Fprintf(out, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[]%s}\n\n", req.Model, m.usage())
	}
	io.WriteString(out, "data: [DONE]\n\n")
	m.Served.Add(1)
}

// crLines writes to w with each \n made a \r.
type crLines struct{ w io.Writer }

func (c crLines) Write(p []byte) (int, error) {
	return c.w.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r")))
}

// readOptional reads a request of an endpoint a chat-only model server
// does not serve: switched to faultChatOnly, it answers 404, as Go's mux
// answers a path it does not route.
func (m *mock) readOptional(w http.ResponseWriter, r *http.Request) (*mockRequest, bool) {
	if m.get() == faultChatOnly {
		m.Calls.Add(1)
		http.NotFound(w, r)
		return nil, false
	}
	return m.read(w, r)
}

func (m *mock) completion(w http.ResponseWriter, r *http.Request) {
	req, ok := m.readOptional(w, r)
	if !ok {
		return
	}
	m.Served.Add(1)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"cmpl-1","object":"text_completion","created":1,"model":%q,"choices":[{"index":0,"text":%q,"finish_reason":"stop"}]%s}`,
		req.Model, strings.Join(m.words(), ""), m.usage())
}

// response answers POST /v1/responses as vLLM does: the words as one
// message, whole or streamed as deltas between the events that open and
// close it, with usage in the last event, whatever the request asks.
func (m *mock) response(w http.ResponseWriter, r *http.Request) {
	req, ok := m.readOptional(w, r)
	if !ok {
		return
	}
	text := strings.Join(m.words(), "")
	usage := ""
	if m.get() != faultNoUsage {
		usage = fmt.Sprintf(`,"usage":{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d}`, mockPromptTokens, mockCompletionTokens, mockPromptTokens+mockCompletionTokens)
	}
	status := `"status":"completed"`
	if m.get() == faultFailed {
		status = `"status":"failed","error":{"code":"server_error","message":"the engine died"}`
	}
	whole := fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1,"model":%q,%s,`+
		`"output":[{"id":"msg_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":%q,"annotations":[]}]}]%s}`,
		req.Model, status, text, usage)
	if !req.Stream {
		m.Served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, whole)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	event := func(typ, data string) {
		fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q,%s}\n\n", typ, typ, data)
		rc.Flush()
	}
	event("response.created", fmt.Sprintf(`"sequence_number":0,"response":{"id":"resp_1","object":"response","model":%q,"status":"in_progress","output":[]}`, req.Model))
	for i, word := range m.words() {
		event("response.output_text.delta", fmt.Sprintf(`"sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"delta":%q`, i+1, word))
		if m.get() == faultDrop && i == 1 {
			panic(http.ErrAbortHandler) // drops the connection mid-stream
		}
	}
	event("response.output_text.done", fmt.Sprintf(`"sequence_number":6,"item_id":"msg_1","output_index":0,"content_index":0,"text":%q`, text))
	last := "response.completed"
	if m.get() == faultFailed {
		last = "response.failed"
	}
	event(last, fmt.Sprintf(`"sequence_number":7,"response":%s`, whole))
	m.Served.Add(1)
}

func (m *mock) embeddings(w http.ResponseWriter, r *http.Request) {
	req, ok := m.read(w, r)
	if !ok {
		return
	}
	m.Served.Add(1)
	w.Header().Set("Content-Type", "application/json")
	in := 3
	if m.get() == faultGreedy {
		in = greedyTokens
	}
	fmt.Fprintf(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2,0.3]}],"model":%q,"usage":{"prompt_tokens":%d,"total_tokens":%d}}`, req.Model, in, in)
}
