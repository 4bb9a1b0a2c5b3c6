// Package infersim replays the Azure LLM inference trace of 2023
// (Patel et al., "Splitwise", ISCA 2024; ../shared/data/azure-llm-2023)
// through idlegrid's OpenAI-compatible gateway, against simulated
// providers (docs/gateway.md, "Replaying the Azure trace").
//
// Everything between the renter and the model server is the real thing:
// server.Open on SQLite in a temporary folder, the gateway behind the real
// HTTP API, and real agents that join with a join token over loopback,
// hold their outbound sessions and advertise the models they serve. Only
// the model servers are simulated: each provider's server takes as long
// as its GPU would (provider.go states the speed model), reports the
// trace's token counts as its usage, and fails a configured share of its
// requests (500, 429, a stall or a dropped connection), so that failover
// and the circuit breakers do their work.
//
// Each trace row becomes one chat completion of ContextTokens prompt
// tokens and max_tokens = GeneratedTokens, sent at its arrival time
// (divided by Config.Speedup) whatever the earlier requests are doing: an
// open loop. Money is read back from the ledger: what renters were
// charged, what providers earned, the platform's fee.
//
// Determinism: for a seed, the requests, which of them stream and which
// fault each provider would answer each with are fixed. Which provider
// serves a request depends on the gateway's load and latency estimates,
// and so on timing; so do the failover counts, a little.
//
// Goroutines: Run owns all it starts (the HTTP server, the agents, the
// simulated model servers, one goroutine per request in flight) and
// returns only when each has ended.
package infersim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/backoff"
	"github.com/idlegrid/idlegrid/internal/gateway"
	gpufake "github.com/idlegrid/idlegrid/internal/gpu/fake"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	runtimefake "github.com/idlegrid/idlegrid/internal/runtime/fake"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/session"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// Config sets up a replay. Zero values take the documented defaults.
type Config struct {
	// Requests are the trace rows to replay, in order of Offset (Merge).
	Requests []Request
	// Speedup divides every arrival time: 10 replays ten minutes of the
	// trace in one, at ten times its load. Default 1.
	Speedup float64
	// ServiceSpeedup divides the simulated model servers' times, and the
	// gateway's timeouts with them (to no less than 5s); tests use
	// it to run fast. Default 1.
	ServiceSpeedup float64
	// StreamShare is the share of requests sent with stream: true;
	// default 0.5, negative for none.
	StreamShare float64
	// Fleet is the simulated providers; default DefaultFleet.
	Fleet []ProviderSpec
	// FaultScale multiplies every provider's fault shares; default 1,
	// negative for no faults.
	FaultScale float64
	Seed       uint64
	// Gateway tunes the gateway; zero fields take Run's defaults (the
	// gateway's, with timeouts fit for simulated model servers).
	Gateway GatewayTuning
	// FeeBasisPoints is the platform's share of each charge; default 1000.
	FeeBasisPoints int64
	// Dir holds the SQLite database; "": a temporary folder, removed after.
	Dir      string
	Progress io.Writer // a line every few seconds; nil: none
	// Logger logs the coordinator, gateway and agents; nil: discard.
	Logger *slog.Logger
}

// GatewayTuning are the gateway settings a replay exercises, before
// ServiceSpeedup divides the timeouts.
type GatewayTuning struct {
	MaxAttempts      int           // default gateway.DefaultMaxAttempts
	FirstByteTimeout time.Duration // default 10s
	AnswerTimeout    time.Duration // default 90s: the slowest answer of the trace on the slowest GPU takes about 50s
	StallTimeout     time.Duration // default 5s
	BreakerFailures  int           // default gateway.DefaultBreakerFailures
	BreakerCooldown  time.Duration // default 10s
}

func (c *Config) setDefaults() {
	if c.Speedup <= 0 {
		c.Speedup = 1
	}
	if c.ServiceSpeedup <= 0 {
		c.ServiceSpeedup = 1
	}
	switch {
	case c.StreamShare == 0:
		c.StreamShare = 0.5
	case c.StreamShare < 0:
		c.StreamShare = 0
	}
	if c.Fleet == nil {
		c.Fleet = DefaultFleet
	}
	switch {
	case c.FaultScale == 0:
		c.FaultScale = 1
	case c.FaultScale < 0:
		c.FaultScale = 0
	}
	if c.FeeBasisPoints == 0 {
		c.FeeBasisPoints = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	t := &c.Gateway
	setDefault(&t.MaxAttempts, gateway.DefaultMaxAttempts)
	setDefault(&t.BreakerFailures, gateway.DefaultBreakerFailures)
	setDefault(&t.FirstByteTimeout, 10*time.Second)
	setDefault(&t.AnswerTimeout, 90*time.Second)
	setDefault(&t.StallTimeout, 5*time.Second)
	setDefault(&t.BreakerCooldown, 10*time.Second)
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Validate checks a config before anything starts.
func (c *Config) Validate() error {
	switch {
	case len(c.Requests) == 0:
		return idlegrid.Invalid("requests", "no trace rows to replay: widen the slice")
	case c.Speedup > 10_000:
		return idlegrid.Invalid("speedup", "must be at most 10000")
	case c.StreamShare > 1:
		return idlegrid.Invalid("stream_share", "must be between 0 and 1")
	case len(c.Fleet) == 0:
		return idlegrid.Invalid("fleet", "needs at least one provider")
	}
	for i, p := range c.Fleet {
		if _, ok := GPUs[p.GPU]; !ok {
			return idlegrid.Invalid(fmt.Sprintf("fleet.%d.gpu", i), "unknown GPU %q", p.GPU)
		}
	}
	return nil
}

// ModelFor is the model a trace's service is served as: the two files are
// two services, so each is its own model and its own renter.
func ModelFor(service string) string { return "sim-8b-" + service }

// discardLog silences the simulated model servers' HTTP servers, whose
// connections the drop fault breaks on purpose.
var discardLog = log.New(io.Discard, "", 0)

// Run replays cfg.Requests and reports what the renters saw, what the
// ledger holds and how the providers did.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir := cfg.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "idlegrid-infersim-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	m, err := openMarket(ctx, &cfg, dir)
	if err != nil {
		return nil, err
	}
	defer m.close()
	if err := m.populate(ctx); err != nil {
		return nil, fmt.Errorf("populate the market: %w", err)
	}
	results, wall, err := m.replay(ctx)
	if err != nil {
		return nil, err
	}
	return m.report(ctx, results, wall)
}

// market is the coordinator, its gateway and HTTP API, and the simulated
// providers with their agents.
type market struct {
	cfg      *Config
	dir      string
	store    *sqlstore.DB
	srv      *server.Server
	gw       *gateway.Gateway
	sessions *session.Registry
	http     *http.Server
	served   chan error
	url      string
	admin    *client.Client

	renters   map[string]*renter // by service
	providers []*provider
	agents    []*runningAgent
	byNode    map[string]*provider
	accounts  map[*provider]string // provider account IDs
}

// topUp is each renter's money at the start: what it was charged is
// topUp less what its ledger accounts hold at the end.
const topUp = 1_000_000 * idlegrid.MicrosPerUnit

// renter is one service's renter account and key.
type renter struct {
	id, key string
}

func openMarket(ctx context.Context, cfg *Config, dir string) (_ *market, err error) {
	m := &market{cfg: cfg, dir: dir, renters: map[string]*renter{}, byNode: map[string]*provider{}, accounts: map[*provider]string{}, served: make(chan error, 1)}
	defer func() {
		if err != nil {
			m.close()
		}
	}()
	if m.store, err = sqlstore.Open(ctx, filepath.Join(dir, "idlegrid.db")); err != nil {
		return nil, err
	}
	if m.srv, err = server.Open(server.Config{Store: m.store, FeeBasisPoints: cfg.FeeBasisPoints, Logger: cfg.Logger, HeartbeatInterval: time.Second}); err != nil {
		return nil, err
	}
	m.sessions = session.NewRegistry(session.Config{Logger: cfg.Logger})
	t, k := cfg.Gateway, cfg.ServiceSpeedup
	if m.gw, err = gateway.New(gateway.Config{
		Store: m.store, Nodes: gateway.Sessions{Registry: m.sessions},
		Authenticate: m.srv.AuthenticateKey, StatusCode: httpapi.StatusCode,
		FeeBasisPoints: cfg.FeeBasisPoints, Logger: cfg.Logger,
		MaxAttempts: t.MaxAttempts, BreakerFailures: t.BreakerFailures,
		FirstByteTimeout: div(t.FirstByteTimeout, k), AnswerTimeout: div(t.AnswerTimeout, k),
		StallTimeout: div(t.StallTimeout, k), BreakerCooldown: div(t.BreakerCooldown, k),
		CatalogTTL: 100 * time.Millisecond,
	}); err != nil {
		return nil, err
	}
	m.srv.ReportQueuesTo(m.gw)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m.url = "http://" + ln.Addr().String()
	m.http = &http.Server{Handler: httpapi.New(m.srv, httpapi.Options{Logger: cfg.Logger, Sessions: m.sessions, Gateway: m.gw}), ErrorLog: discardLog}
	go func() {
		err := m.http.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		m.served <- err
	}()
	return m, nil
}

// div scales a gateway timeout by the ServiceSpeedup k, to no less than
// minTimeout: the coordinator's, agents' and sessions' own time does not
// scale.
func div(d time.Duration, k float64) time.Duration {
	return max(time.Duration(float64(d)/k), min(d, minTimeout))
}

const minTimeout = 5 * time.Second

// close stops everything in the reverse order of starting: the agents,
// the model servers, the sessions and HTTP server, the gateway's meter,
// the coordinator, the store.
func (m *market) close() {
	for _, a := range m.agents {
		a.stop()
	}
	for _, p := range m.providers {
		p.close()
	}
	if m.sessions != nil {
		m.sessions.Close()
	}
	if m.http != nil {
		m.http.Close()
		<-m.served
	}
	if m.gw != nil {
		m.gw.Close()
	}
	if m.srv != nil {
		m.srv.Close()
	}
	if m.store != nil {
		m.store.Close()
	}
}

// populate creates the admin, one renter per service with money, and one
// provider account, model server and agent per provider, and waits until
// the gateway lists every provider for every model.
func (m *market) populate(ctx context.Context) error {
	_, _, adminKey, err := m.srv.Bootstrap(ctx, "ops", idlegrid.RoleAdmin)
	if err != nil {
		return err
	}
	m.admin = client.New(m.url, adminKey)
	var models []string
	for _, r := range m.cfg.Requests {
		if _, ok := m.renters[r.Service]; !ok {
			acct, _, key, err := m.admin.CreateAccount(ctx, r.Service+"-renter", idlegrid.RoleRenter)
			if err != nil {
				return err
			}
			if _, err := m.admin.TopUp(ctx, acct.ID, topUp, "start"); err != nil {
				return err
			}
			m.renters[r.Service] = &renter{id: acct.ID, key: key}
			models = append(models, ModelFor(r.Service))
		}
	}
	for _, spec := range m.cfg.Fleet {
		if err := m.addProvider(ctx, spec, models); err != nil {
			return fmt.Errorf("provider %s: %w", spec.Name, err)
		}
	}
	return m.waitListed(ctx, models)
}

func (m *market) addProvider(ctx context.Context, spec ProviderSpec, models []string) error {
	spec.Faults = spec.Faults.scaled(m.cfg.FaultScale)
	p, err := startProvider(spec, models, m.cfg.Seed, m.cfg.ServiceSpeedup, idlegrid.SystemClock{})
	if err != nil {
		return err
	}
	m.providers = append(m.providers, p)
	acct, _, key, err := m.admin.CreateAccount(ctx, spec.Name, idlegrid.RoleProvider)
	if err != nil {
		return err
	}
	m.accounts[p] = acct.ID
	_, join, err := client.New(m.url, key).CreateJoinToken(ctx, spec.Name, 1, time.Hour)
	if err != nil {
		return err
	}
	var offers []agent.ModelConfig
	for _, name := range models {
		offers = append(offers, agent.ModelConfig{Name: name, Upstream: p.url, InputPrice: spec.InputPrice, OutputPrice: spec.OutputPrice,
			MaxConcurrency: spec.MaxConcurrency, MetricsURL: agent.MetricsOff}) // the simulated server holds no queue of its own
	}
	a, err := m.startAgent(ctx, spec, join, offers)
	if err != nil {
		return err
	}
	m.agents = append(m.agents, a)
	m.byNode[a.nodeID] = p
	return nil
}

// waitListed waits, for at most a minute, until the gateway lists every
// provider for every model.
func (m *market) waitListed(ctx context.Context, models []string) error {
	var key string
	for _, r := range m.renters {
		key = r.key
	}
	c := newRenterClient(m.url, key, 1)
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := c.providersOf(ctx, models)
		if err == nil && n == len(m.providers) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the gateway lists %d of %d providers for every model after a minute (last error: %v)", n, len(m.providers), err)
		}
		if !backoff.Sleep(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// runningAgent is a real agent serving a simulated provider's models.
type runningAgent struct {
	nodeID string
	stop   func()
}

func (m *market) startAgent(ctx context.Context, spec ProviderSpec, join string, models []agent.ModelConfig) (*runningAgent, error) {
	cfg := &agent.Config{
		Server: m.url, JoinToken: join, DataDir: filepath.Join(m.dir, "agent-"+spec.Name), Name: spec.Name,
		Region: spec.Region, Residency: spec.Residency, Ask: agent.AskConfig{Floor: map[idlegrid.Tier]string{idlegrid.TierBronze: "1.00"}},
		FakeGPUs: "1x" + spec.GPU, Models: models, ModelHealthInterval: time.Second,
		// The replay has ended when its agents stop: a request still in
		// flight then is one it gave up on.
		ModelDrainWait: 10 * time.Second,
	}
	key, err := nodekey.LoadOrCreate(cfg.KeyPath())
	if err != nil {
		return nil, err
	}
	det, err := gpufake.Parse(cfg.FakeGPUs, spec.Name)
	if err != nil {
		return nil, err
	}
	rt := &runtimefake.Runtime{}
	a, err := agent.New(agent.Options{
		Config: cfg, Server: client.NewAgent(m.url, key), Detector: det, Runtime: rt,
		Logger: m.cfg.Logger.With("node", spec.Name), Key: key, Host: &agent.Host{Name: spec.Name, CPUCores: 16, RAMMB: 65536, DiskGB: 500},
	})
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(actx) }()
	ra := &runningAgent{stop: func() { cancel(); <-done; rt.Close() }}
	deadline := time.Now().Add(time.Minute)
	for ra.nodeID = a.NodeID(); ra.nodeID == ""; ra.nodeID = a.NodeID() {
		if time.Now().After(deadline) || !backoff.Sleep(ctx, 20*time.Millisecond) {
			ra.stop()
			return nil, fmt.Errorf("the agent did not join within a minute")
		}
	}
	return ra, nil
}
