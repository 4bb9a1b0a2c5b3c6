// Package gateway is idlegrid's OpenAI-compatible inference gateway: the
// renter-facing /v1/models, /v1/chat/completions, /v1/completions,
// /v1/embeddings and /v1/responses (with the responses it keeps, kept.go,
// and runs in the background, background.go), served by the models that
// providers' nodes advertise (idlegrid.Offer.Models) and reached over each
// node's outbound agent session (internal/session), so that a node behind
// NAT serves too.
//
// A request is authenticated by API key, parsed (internal/openai), checked
// against the key's rate limit, concurrency and budget (its worst case is
// reserved while it runs), routed by its "provider" object over its key's
// default routing, field by field (route.go: hard constraints, then price,
// latency or throughput, load, reliability, sticky prompt prefix), and
// sent to the first provider; one that fails before the first byte is
// replaced by the next, up to MaxAttempts, and a provider that keeps
// failing is cut off by its circuit breaker (breaker.go). The answer passes
// through chunk by chunk (stream.go). Its usage, the model server's own or
// counted, is charged through the ledger by the meter (meter.go), which
// writes in batches off the request's path.
//
// Goroutines: a Gateway owns its meter's writer and its background
// responses' runs; Close stops the runs, then drains and stops the meter.
// Other requests run in their HTTP handlers' goroutines and own nothing
// else.
package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/inflight"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/openai"
	"github.com/idlegrid/idlegrid/internal/ratelimit"
	"github.com/idlegrid/idlegrid/internal/session"
)

// Defaults for Config.
const (
	DefaultMaxAttempts         = 3
	DefaultFirstByteTimeout    = 30 * time.Second
	DefaultFirstBytePerKTokens = time.Second
	DefaultMaxFirstByteTimeout = 5 * time.Minute
	DefaultLargePromptTokens   = 32 << 10
	DefaultLargeAnswerTokens   = 4096
	DefaultAnswerTimeout       = 5 * time.Minute
	DefaultStallTimeout        = 60 * time.Second
	DefaultBreakerFailures     = 5
	DefaultBreakerCooldown     = 30 * time.Second
	DefaultCatalogTTL          = time.Second
	DefaultAuthTTL             = 2 * time.Second
	DefaultBudgetTTL           = 2 * time.Second
	DefaultReserveOutputTokens = 4096
	DefaultMaxBodyBytes        = 8 << 20
	DefaultMaxAnswerBytes      = 64 << 20
	DefaultQueueTimeout        = 10 * time.Second
	DefaultMaxQueue            = 1024
	DefaultBackgroundHeartbeat = 10 * time.Second
)

// NodeDialer reaches a node's agent: the round tripper of its live
// session, or false when it has none.
type NodeDialer interface {
	Dial(nodeID string) (http.RoundTripper, bool)
}

// Sessions is the NodeDialer of a session registry.
type Sessions struct{ *session.Registry }

// Dial returns the node's live session.
func (s Sessions) Dial(nodeID string) (http.RoundTripper, bool) {
	sess, ok := s.Registry.Get(nodeID)
	if !ok {
		return nil, false
	}
	return sess, true
}

// Config configures a Gateway. Store, Nodes, Authenticate and StatusCode
// are required; zero values of the rest take the defaults.
type Config struct {
	Store idlegrid.Store // nodes, balances, spend limits, usage records and charges
	Nodes NodeDialer
	// Authenticate returns the caller an API key's secret identifies
	// (server.Server.AuthenticateKey).
	Authenticate func(ctx context.Context, secret string) (*idlegrid.Caller, error)
	// StatusCode maps an idlegrid error code to its HTTP status: the one
	// table, httpapi.StatusCode.
	StatusCode     func(code string) int
	FeeBasisPoints int64          // the platform's share of each charge
	Clock          idlegrid.Clock // nil: idlegrid.SystemClock{}
	Logger         *slog.Logger   // nil: discard

	// MaxAttempts bounds the providers one request tries. Default 3.
	MaxAttempts int
	// FirstByteTimeout is how long a provider may take to the first byte
	// of a stream before the next one is tried, FirstBytePerKTokens more
	// for each thousand tokens of its prompt (estimated:
	// openai.Request.ReservePromptTokens), since a model server reads the
	// whole prompt before its first token, and at most
	// MaxFirstByteTimeout. Defaults 30s, 1s (a prefill of 1,000 tokens a
	// second at worst) and 5m.
	FirstByteTimeout    time.Duration
	FirstBytePerKTokens time.Duration
	MaxFirstByteTimeout time.Duration
	// LargePromptTokens is the estimated prompt above which a request that
	// gets no first byte in time is no failure of its provider: the
	// prompt, not the provider, is slow, and its timeout neither counts
	// towards the provider's circuit breaker nor lowers its success rate
	// (the next provider is tried all the same). Default 32768.
	LargePromptTokens int64
	// AnswerTimeout is the same for a non-streamed answer, which a model
	// server sends only once it is complete. Default 5m.
	AnswerTimeout time.Duration
	// LargeAnswerTokens is the completion cap (max_tokens) from which a
	// non-streamed answer that does not come within AnswerTimeout is no
	// failure of its provider: it was asked to be long (the next provider
	// is tried all the same). Default 4096.
	LargeAnswerTokens int64
	// StallTimeout cuts an answer whose provider goes silent mid-way for
	// longer. Default 60s.
	StallTimeout time.Duration
	// BreakerFailures in a row open a provider's circuit breaker for
	// BreakerCooldown, after which one trial request may close it.
	BreakerFailures int
	BreakerCooldown time.Duration
	// CatalogTTL is how stale the list of nodes and their models may be.
	CatalogTTL time.Duration
	// AuthTTL is how long an API key's authentication is reused: a
	// revoked key may work for this long. Default 2s.
	AuthTTL time.Duration
	// BudgetTTL is how stale a renter's balance and spend may be; what the
	// gateway itself reserved and charged meanwhile is always counted.
	BudgetTTL time.Duration
	// KeyRequestsPerSecond and KeyBurst rate-limit each API key (a token
	// bucket); zero: no rate limit. KeyConcurrency caps each key's requests
	// in flight; zero: no cap.
	KeyRequestsPerSecond float64
	KeyBurst             int
	KeyConcurrency       int
	// AccountLimits are the API's buckets of each account's requests
	// (give httpapi.Options the same): the gateway's requests that run
	// no model (models, kept responses, conversations, stats) spend from
	// them, since they cost the renter nothing, so money does not bound
	// them. Nil: no limit.
	AccountLimits *ratelimit.Buckets
	// Journal is the directory where the meter journals each charge
	// before its request's handler returns, until the store has it
	// (journal.go); New first writes what a crash left there. "": no
	// journal, and a crash loses the charges not yet written (up to
	// meterLinger's worth, more when the store falls behind).
	Journal string
	// ReserveOutputTokens is the completion reserved for a request that
	// sets no max_tokens. Default 4096.
	ReserveOutputTokens int64
	// MaxBodyBytes caps a request; MaxAnswerBytes a non-streamed answer.
	MaxBodyBytes   int64
	MaxAnswerBytes int64
	// QueueTimeout is how long a request may wait for room when every
	// provider it may use is at its max_concurrency (by this gateway's
	// count), before it is refused with 429. Default 10s; negative: it is
	// refused, or tried at the busy providers, at once. MaxQueue caps the
	// requests waiting per model; more are refused at once. Default 1024.
	QueueTimeout time.Duration
	MaxQueue     int
	// ResponseRetention is how long a response of the Responses API is
	// kept (kept.go). Default 30 days, as OpenAI keeps them.
	ResponseRetention time.Duration
	// ConversationItems and ConversationChars bound what each renter's
	// conversations hold, all together: their items, and the items'
	// characters (convquota.go). Defaults DefaultConversationItems and
	// DefaultConversationChars; negative: no bound.
	ConversationItems int64
	ConversationChars int64
	// BackgroundHeartbeat is how often a background response's run
	// renews its hold on the response, three heartbeats ahead, and so how
	// soon one whose server stopped reads as failed, and a run learns of
	// a cancel that another server took (background.go). Default 10s.
	BackgroundHeartbeat time.Duration
	// Metrics is where the gateway registers its metrics (metrics.go), the
	// registry the server's GET /metrics serves. Nil: they are kept but
	// served nowhere.
	Metrics prometheus.Registerer
}

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = idlegrid.SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	setDefault(&c.MaxAttempts, DefaultMaxAttempts)
	setDefault(&c.FirstByteTimeout, DefaultFirstByteTimeout)
	setDefault(&c.FirstBytePerKTokens, DefaultFirstBytePerKTokens)
	setDefault(&c.MaxFirstByteTimeout, max(DefaultMaxFirstByteTimeout, c.FirstByteTimeout))
	setDefault(&c.LargePromptTokens, DefaultLargePromptTokens)
	setDefault(&c.LargeAnswerTokens, DefaultLargeAnswerTokens)
	setDefault(&c.AnswerTimeout, DefaultAnswerTimeout)
	setDefault(&c.StallTimeout, DefaultStallTimeout)
	setDefault(&c.BreakerFailures, DefaultBreakerFailures)
	setDefault(&c.BreakerCooldown, DefaultBreakerCooldown)
	setDefault(&c.CatalogTTL, DefaultCatalogTTL)
	setDefault(&c.AuthTTL, DefaultAuthTTL)
	setDefault(&c.BudgetTTL, DefaultBudgetTTL)
	setDefault(&c.ReserveOutputTokens, DefaultReserveOutputTokens)
	setDefault(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	setDefault(&c.MaxAnswerBytes, DefaultMaxAnswerBytes)
	if c.QueueTimeout == 0 {
		c.QueueTimeout = DefaultQueueTimeout
	}
	setDefault(&c.MaxQueue, DefaultMaxQueue)
	setDefault(&c.ResponseRetention, DefaultResponseRetention)
	if c.ConversationItems == 0 {
		c.ConversationItems = DefaultConversationItems
	}
	if c.ConversationChars == 0 {
		c.ConversationChars = DefaultConversationChars
	}
	setDefault(&c.BackgroundHeartbeat, DefaultBackgroundHeartbeat)
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Gateway serves the OpenAI-compatible API. Make one with New; Close it
// after the HTTP server has stopped.
type Gateway struct {
	cfg        Config
	rules      ledger.Rules
	log        *slog.Logger
	mux        *http.ServeMux
	catalog    catalog
	health     healthBook
	budgets    budgets
	stats      statsBook
	meter      *meter
	auth       authCache
	active     inflight.Count    // inference requests running
	waiting    waitingRoom       // requests waiting for a provider with room
	background backgroundRuns    // background responses running (background.go)
	streams    streamLogs        // streamed background responses' events (streamlog.go)
	convLocks  conversationLocks // the conversations a response runs in (convlock.go)
	metrics    *metrics
}

// Patterns are the routes the gateway answers, for the API's mux: its
// endpoints, and its OpenAI paths under any other method, which it answers
// 405 in OpenAI's format (openAIPaths).
var Patterns = append([]string{
	"GET /v1/models",
	"GET /v1/models/{model...}",
	"POST /v1/chat/completions",
	"POST /v1/completions",
	"POST /v1/embeddings",
	"POST /v1/responses",
	"/v1/responses/{id...}",
	"POST /v1/conversations",
	"/v1/conversations/{id...}",
	"GET /v1/inference/stats",
	"GET /v1/inference/usage",
	"GET /v1/inference/conversations",
}, slices.Sorted(maps.Keys(openAIPaths))...)

// openAIPaths are the gateway's OpenAI paths, each with the one method it
// takes.
var openAIPaths = map[string]string{
	"/v1/models":            http.MethodGet,
	"/v1/models/{model...}": http.MethodGet,
	"/v1/chat/completions":  http.MethodPost,
	"/v1/completions":       http.MethodPost,
	"/v1/embeddings":        http.MethodPost,
	"/v1/responses":         http.MethodPost,
	"/v1/conversations":     http.MethodPost,
}

// New checks cfg and starts the gateway's meter.
func New(cfg Config) (*Gateway, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("gateway: Config.Store is required")
	case cfg.Nodes == nil:
		return nil, errors.New("gateway: Config.Nodes is required")
	case cfg.Authenticate == nil:
		return nil, errors.New("gateway: Config.Authenticate is required")
	case cfg.StatusCode == nil:
		return nil, errors.New("gateway: Config.StatusCode is required")
	}
	cfg.setDefaults()
	rules := ledger.Rules{FeeBasisPoints: cfg.FeeBasisPoints}
	if err := rules.Validate(); err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, rules: rules, log: cfg.Logger, mux: http.NewServeMux(), metrics: newMetrics()}
	g.catalog.init(cfg.Store, cfg.Clock, cfg.CatalogTTL)
	g.health.init(cfg.Clock, cfg.BreakerFailures, cfg.BreakerCooldown)
	g.budgets.init(&g.cfg)
	j, err := g.openJournal()
	if err != nil {
		return nil, err
	}
	g.meter = startMeter(cfg.Store, j, g.metrics, cfg.Logger, g.capToBalance)
	if cfg.Metrics != nil {
		if err := g.metrics.register(cfg.Metrics, g); err != nil {
			g.meter.close()
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	g.mux.HandleFunc("GET /v1/models", g.withKey(g.paced(g.listModels)))
	g.mux.HandleFunc("GET /v1/models/{model...}", g.withKey(g.paced(g.getModel)))
	for path, method := range openAIPaths {
		g.mux.HandleFunc(path, g.wrongMethod(method))
	}
	g.mux.HandleFunc("POST /v1/chat/completions", g.withKey(g.infer("chat/completions")))
	g.mux.HandleFunc("POST /v1/completions", g.withKey(g.infer("completions")))
	g.mux.HandleFunc("POST /v1/embeddings", g.withKey(g.infer("embeddings")))
	g.mux.HandleFunc("POST /v1/responses", g.withKey(g.infer("responses")))
	g.mux.HandleFunc("GET /v1/responses/{id}", g.withKey(g.paced(g.getResponse)))
	g.mux.HandleFunc("DELETE /v1/responses/{id}", g.withKey(g.paced(g.deleteResponse)))
	g.mux.HandleFunc("GET /v1/responses/{id}/input_items", g.withKey(g.paced(g.listInputItems)))
	g.mux.HandleFunc("POST /v1/responses/{id}/cancel", g.withKey(g.paced(g.cancelResponse)))
	g.mux.HandleFunc("/v1/responses/{id...}", g.responsesPath)
	g.mux.HandleFunc("POST /v1/conversations", g.withKey(g.paced(g.createConversation)))
	g.mux.HandleFunc("GET /v1/conversations/{id}", g.withKey(g.paced(g.getConversation)))
	g.mux.HandleFunc("POST /v1/conversations/{id}", g.withKey(g.paced(g.updateConversation)))
	g.mux.HandleFunc("DELETE /v1/conversations/{id}", g.withKey(g.paced(g.deleteConversation)))
	g.mux.HandleFunc("POST /v1/conversations/{id}/items", g.withKey(g.paced(g.addItems)))
	g.mux.HandleFunc("GET /v1/conversations/{id}/items", g.withKey(g.paced(g.listItems)))
	g.mux.HandleFunc("GET /v1/conversations/{id}/items/{item_id}", g.withKey(g.paced(g.getItem)))
	g.mux.HandleFunc("DELETE /v1/conversations/{id}/items/{item_id}", g.withKey(g.paced(g.deleteItem)))
	g.mux.HandleFunc("/v1/conversations/{id...}", g.conversationsPath)
	g.mux.HandleFunc("GET /v1/inference/stats", g.withKey(g.paced(g.serveStats)))
	g.mux.HandleFunc("GET /v1/inference/conversations", g.withKey(g.paced(g.serveConversationUsage)))
	g.mux.HandleFunc("GET /v1/inference/usage", g.withKey(g.paced(g.serveUsage)))
	return g, nil
}

// openJournal opens the meter's journal, if the gateway keeps one, and
// writes the charges a crash left there to the store. When the store
// fails them, their files stay for the next start, and this one goes on:
// a charge that cannot be written must not keep the market from opening.
func (g *Gateway) openJournal() (*journal, error) {
	if g.cfg.Journal == "" {
		return nil, nil
	}
	j, left, files, err := openJournal(g.cfg.Journal, g.log)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if len(files) == 0 {
		return j, nil
	}
	if err := replay(context.Background(), g.cfg.Store, left, g.metrics, g.log, g.capToBalance); err != nil {
		g.log.Error("gateway: could not write the charges left in the meter journal; its files stay for the next start to write",
			"files", files, "err", err)
		return j, nil
	}
	if err := forget(files); err != nil {
		j.close()
		return nil, fmt.Errorf("gateway: delete the meter journal's written files: %w", err)
	}
	return j, nil
}

// ServeHTTP answers the gateway's routes.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.mux.ServeHTTP(w, r) }

// Close cancels the background responses still running, waiting for each
// to record how it ended, forgets their streams' events, stops taking
// charges, writes those waiting and
// stops the meter. Requests still running are metered by nobody: close
// the HTTP server first.
func (g *Gateway) Close() error {
	g.background.close()
	g.streams.close()
	g.meter.close()
	return nil
}

// Sync returns once no inference request is running and every charge
// metered before is written (or, the store failing, waits to be tried
// again). Tests use it to read the ledger after their
// requests.
func (g *Gateway) Sync(ctx context.Context) error {
	if err := g.active.Wait(ctx); err != nil {
		return err
	}
	return g.meter.sync(ctx)
}

// handlerFunc is a handler that returns its error, which withKey writes in
// OpenAI's format.
type handlerFunc func(w http.ResponseWriter, r *http.Request, c *apiKey) error

// apiKey is the caller an API key identifies, and the key's default
// routing (nil when it has none), which a request's own "provider" object
// overrides field by field.
type apiKey struct {
	*idlegrid.Caller
	routing *idlegrid.Routing
}

// routingOf is the routing of a request whose own "provider" object is p
// (nil: none) sent with this key: the key's default routing fills in what
// p leaves out (openai.WithDefaults), and binds p when the key's access is
// use or read (openai.Binding), which refuses a list the key's allows none
// of (EFORBIDDEN).
func (k *apiKey) routingOf(p *idlegrid.Routing) (*idlegrid.Routing, error) {
	if k.Access == "" || k.Access == idlegrid.AccessAll {
		return openai.WithDefaults(p, k.routing), nil
	}
	return openai.Binding(p, k.routing)
}

// paced is next once the caller's account has spent a token of its
// bucket (Config.AccountLimits): a request that runs no model is limited
// as the API's are.
func (g *Gateway) paced(next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *apiKey) error {
		if err := g.cfg.AccountLimits.Admit(c.Caller, g.cfg.Clock.Now()); err != nil {
			return err
		}
		return next(w, r, c)
	}
}

// withKey names the request (X-Request-Id, on every answer, errors too),
// authenticates the bearer API key and runs next. A key with access read
// may only read (GET): a request that spends is refused, as the API
// refuses it.
func (g *Gateway) withKey(next handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", idlegrid.NewID("req"))
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				g.log.Error("gateway: panic", "path", r.URL.Path, "panic", p)
				g.writeError(w, r, idlegrid.Errorf(idlegrid.EINTERNAL, "panic: %v", p))
			}
		}()
		c, err := g.authenticate(r)
		if err == nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
			err = c.Allow(idlegrid.AccessUse)
		}
		if err == nil {
			err = next(w, r, c)
		}
		if err != nil {
			g.writeError(w, r, err)
		}
	}
}

func (g *Gateway) authenticate(r *http.Request) (*apiKey, error) {
	h := r.Header.Get("Authorization")
	scheme, secret, _ := strings.Cut(h, " ")
	secret = strings.TrimSpace(secret)
	if h == "" || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return nil, idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "missing API key; send the header Authorization: Bearer <key>")
	}
	return g.auth.get(r.Context(), secret, g.cfg.AuthTTL, g.cfg.Clock.Now(), g.keyOf)
}

// keyOf authenticates secret and reads its key's default routing.
func (g *Gateway) keyOf(ctx context.Context, secret string) (*apiKey, error) {
	c, err := g.cfg.Authenticate(ctx, secret)
	if err != nil {
		return nil, err
	}
	k := &apiKey{Caller: c}
	if c.KeyID == "" {
		return k, nil
	}
	kr, err := g.cfg.Store.FindKeyRouting(ctx, c.KeyID)
	switch {
	case err == nil:
		k.routing = &kr.Routing
	case idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND:
		// Its hard constraints (region, residency) must not be dropped.
		return nil, err
	}
	return k, nil
}

// authCache reuses an API key's authentication, and its default routing,
// for a short while, so that a busy key does not cost a database read per
// request. It keys on the secret's hash, never the secret.
type authCache struct {
	mu sync.Mutex
	m  map[[32]byte]authEntry
}

type authEntry struct {
	key   *apiKey
	until time.Time
}

func (a *authCache) get(ctx context.Context, secret string, ttl time.Duration, now time.Time, auth func(context.Context, string) (*apiKey, error)) (*apiKey, error) {
	h := sha256.Sum256([]byte(secret))
	a.mu.Lock()
	e, ok := a.m[h]
	a.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.key, nil
	}
	c, err := auth(ctx, secret)
	if idlegrid.ErrorCode(err) == idlegrid.EUNAUTHORIZED {
		return nil, idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "invalid or revoked API key")
	} else if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if a.m == nil || len(a.m) > 100_000 {
		a.m = map[[32]byte]authEntry{}
	}
	a.m[h] = authEntry{key: c, until: now.Add(ttl)}
	a.mu.Unlock()
	return c, nil
}
