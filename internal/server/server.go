// Package server is the idlegrid coordinator: it owns the store, runs the
// engine on every event that could change a placement, settles leases
// through the ledger rules, and reaps nodes that go silent. It authorises
// every call by role and owner; the HTTP layer only authenticates.
//
// A Server is embeddable: tests and `idlegrid dev` open one in-process.
package server

import (
	"context"
	"crypto/cipher"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/market"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	Store             idlegrid.Store
	Market            market.Config  // the engine's rules; zero values take its defaults
	Clock             idlegrid.Clock // nil: idlegrid.SystemClock{}
	FeeBasisPoints    int64          // platform share of each charge; 0: the default, 1000 (10%); negative: no fee
	HeartbeatInterval time.Duration  // told to agents; default 10s
	MissedHeartbeats  int            // a node is lost after this many; default 3
	StartTimeout      time.Duration  // an assigned lease not started by then is lost; default 2m
	// MaxStart is the longest a node may take to start a lease that its
	// heartbeats keep naming as starting (pulling its image, most often;
	// starting.go); default 1h. It is at least StartTimeout.
	MaxStart time.Duration
	// ReceiptSilence is how long a running lease may go without a receipt
	// while its node heartbeats before it ends as the provider's failure
	// (reaper.go, receiptsStopped); at least 3 of the lease's own receipt
	// intervals. Default 5m, five of the agent's default receipt intervals:
	// set it above the agents' receipt_interval.
	ReceiptSilence time.Duration
	// SchedulePeriod is how often the engine runs when no event wakes it,
	// so that windows opening and deadlines passing are noticed; default 2s.
	SchedulePeriod time.Duration
	// QueuedPerPass is how many queued jobs one placement pass reads,
	// highest tier first; default 10,000.
	QueuedPerPass int
	// PlacementBatch is how many placements a pass stores in one
	// transaction (Store.PlaceJobs); default 1,024.
	PlacementBatch int
	// PayoutHold is how long a provider's earnings stay pending after the
	// settlement that credited them before they become payable; default
	// 72h, negative for none (payable at the next reaper pass).
	PayoutHold time.Duration
	// ComplaintWindow is how long after a lease's end its renter may
	// complain about it (OpenDispute); default 30 days. An open complaint
	// keeps the provider's bond from being released until an admin
	// decides it, so it may not come at any time.
	ComplaintWindow time.Duration
	// RunoutMargin is added to a lease's notice when the coordinator asks
	// whether a renter's money or spend limit would last that long;
	// default 2m. See runout.go.
	RunoutMargin time.Duration
	// NaiveMatcher places jobs with market.FirstMatcher, a full scan of
	// every node, instead of the engine. It is the baseline that
	// BenchmarkServerPlace measures the engine against (see batch.go), not
	// a way to run a market.
	NaiveMatcher bool
	Logger       *slog.Logger
	// Sample draws uniformly from [0, 1), to choose which verifiable
	// leases are re-run (verify.go); nil: math/rand/v2.
	Sample func() float64
	// AuditKey signs the audit log's tree heads (see audit.go); nil: a
	// key for this process alone, which no user can check heads with.
	// The first start records its public half in the store; Open refuses
	// any other key after that (ErrAuditKeyReplaced).
	AuditKey ed25519.PrivateKey
	// TrustPolicy is the reputation formula, the levels and what gold jobs
	// need (see reputation.go); nil: trustpolicy.Default(). Its gold level
	// becomes Market.GoldMinLevel.
	TrustPolicy *trustpolicy.Policy
	// Hardware challenges (attest.go): the randomness of their seeds, the
	// rows checked and the random times (nil: crypto/rand); the largest
	// N (default DefaultChallengeMaxSize); how long an agent has to answer
	// (default 10m); how often random challenges are drawn (default 1m).
	ChallengeRandom  io.Reader
	ChallengeMaxSize int
	ChallengeTimeout time.Duration
	ChallengePeriod  time.Duration
	// Metrics is where the coordinator registers its metrics (metrics.go);
	// nil: a registry of its own, which nobody reads.
	Metrics prometheus.Registerer
	// ScanShare is the share of the scheduler's time that reads of every
	// node for people (explain, the market view, a search for free GPUs)
	// may take, in bursts of up to ScanBurst (scanbudget.go); over it they
	// are refused with a time to retry. Defaults DefaultScanShare and
	// DefaultScanBurst.
	ScanShare float64
	ScanBurst time.Duration
}

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = idlegrid.SystemClock{}
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.NewRegistry()
	}
	if c.FeeBasisPoints == 0 {
		c.FeeBasisPoints = 1000
	} else if c.FeeBasisPoints < 0 {
		c.FeeBasisPoints = 0
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 10 * time.Second
	}
	if c.MissedHeartbeats == 0 {
		c.MissedHeartbeats = 3
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 2 * time.Minute
	}
	if c.MaxStart == 0 {
		c.MaxStart = time.Hour
	}
	c.MaxStart = max(c.MaxStart, c.StartTimeout)
	if c.ReceiptSilence == 0 {
		c.ReceiptSilence = 5 * time.Minute
	}
	if c.SchedulePeriod == 0 {
		c.SchedulePeriod = 2 * time.Second
	}
	if c.PayoutHold == 0 {
		c.PayoutHold = DefaultPayoutHold
	}
	if c.ComplaintWindow <= 0 {
		c.ComplaintWindow = DefaultComplaintWindow
	}
	if c.QueuedPerPass <= 0 {
		c.QueuedPerPass = defaultQueuedPerPass
	}
	if c.PlacementBatch <= 0 {
		c.PlacementBatch = defaultPlacementBatch
	}
	if c.RunoutMargin == 0 {
		c.RunoutMargin = 2 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Sample == nil {
		c.Sample = rand.Float64
	}
	if c.TrustPolicy == nil {
		c.TrustPolicy = trustpolicy.Default()
	}
	c.Market.GoldMinLevel = c.TrustPolicy.Gold.MinLevel
	if c.ScanShare <= 0 {
		c.ScanShare = DefaultScanShare
	}
	if c.ScanBurst <= 0 {
		c.ScanBurst = DefaultScanBurst
	}
}

// Server is the coordinator. Its goroutines (the scheduler, the reaper,
// the challenges and the restander) start in Open and stop in Close.
type Server struct {
	store idlegrid.Store
	clock idlegrid.Clock
	rules ledger.Rules
	cfg   Config
	log   *slog.Logger

	opened  time.Time     // when Open ran: what went unheard before it was said to no one (heardSince)
	kick    chan struct{} // wakes the scheduler; buffered, never blocks
	marks   marks         // what changed in the store since the scheduler's last pass
	rebuild atomic.Bool   // the engine disagrees with the store: rebuild it
	built   atomic.Bool   // the scheduler has an engine built from the store (Ready)
	asks    chan func(*market.Engine)
	passGap chan func(*market.Engine) // BetweenPasses: run by the scheduler between passes only
	// placing is the jobs a pass has committed to the engine and not yet
	// stored (placementBatch); only the scheduler's goroutine, and the asks
	// it runs, read or write it.
	placing map[string]bool
	// stored is closed, and replaced, once the batch being placed now has
	// been stored and its outcome carried out: an explanation of a job
	// in placing waits on it (explain.go). Only the scheduler's goroutine,
	// and the asks it runs, read or replace it.
	stored  chan struct{}
	stopped chan struct{} // closed when the scheduler has stopped
	metrics *metrics
	waiters waiters // wakes agents' long polls, by node
	watches waiters // wakes watches of jobs, by job (jobwatch.go)
	// draining is closed by Drain: long polls answer at once from then on.
	draining  chan struct{}
	drainOnce sync.Once
	// receiptLocks serialise each lease's receipts with its settlement.
	receiptLocks leaseLocks
	// naive is the NaiveMatcher baseline's market, owned by the scheduler.
	naive *market.Snapshot
	// resyncing is the periodic rebuild of the engine in flight, if any,
	// owned by the scheduler; resync.go.
	resyncing *resync
	// audit is the audit log's tree and signing key; audit.go.
	audit *auditLog
	// logins seals renters' registry logins; registry.go.
	logins cipher.AEAD
	trust  trust // reputation and levels; reputation.go
	// restands is the upheld disputes whose providers' nodes the
	// restander has yet to save again; offencehold.go.
	restands chan *idlegrid.Dispute
	// attest is hardware attestation, challenges and quarantine; attest.go.
	attest *attestState
	// starts is when nodes last said they were starting their leases;
	// starting.go.
	starts startsHeard

	scans      *scanBudget // reads of every node for people; scanbudget.go
	marketView readCache[[]market.MarketStat]
	explains   readCache[*market.Explanation] // by job ID

	// queues takes the model queues agents report in their heartbeats.
	queues atomic.Pointer[QueueReporter]

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// QueueReporter takes the queues at nodes' model servers that their agents
// report in heartbeats: the inference gateway. Each report holds for
// validFor, the time until the heartbeat after next is due.
type QueueReporter interface {
	NoteQueues(nodeID string, queues []idlegrid.ModelQueue, validFor time.Duration)
}

// ReportQueuesTo passes the model queues of every later heartbeat to r;
// nil stops them.
func (s *Server) ReportQueuesTo(r QueueReporter) { s.queues.Store(&r) }

// Open validates cfg and starts the coordinator's loops.
func Open(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("server: Config.Store is required")
	}
	cfg.setDefaults()
	rules := ledger.Rules{FeeBasisPoints: cfg.FeeBasisPoints}
	if cfg.FeeBasisPoints > 10000 {
		return nil, idlegrid.Invalid("fee_bps", "must be between 0 and 10000")
	}
	auditLog, err := newAuditLog(cfg)
	if err != nil {
		return nil, err
	}
	if err := claimAuditSigner(context.Background(), cfg); err != nil {
		return nil, err
	}
	logins, err := newLoginSealer(auditLog)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		store: cfg.Store, clock: cfg.Clock, rules: rules, opened: cfg.Clock.Now(),
		cfg: cfg, log: cfg.Logger, kick: make(chan struct{}, 1), cancel: cancel,
		asks: make(chan func(*market.Engine)), passGap: make(chan func(*market.Engine)), stopped: make(chan struct{}),
		placing: map[string]bool{}, stored: make(chan struct{}),
		audit: auditLog, logins: logins, scans: newScanBudget(cfg.ScanShare, cfg.ScanBurst),
		marketView: readCache[[]market.MarketStat]{ttl: marketViewTTL}, explains: readCache[*market.Explanation]{ttl: explainTTL},
		trust: trust{policy: cfg.TrustPolicy, uptime: map[string]*uptimeTrack{}}, draining: make(chan struct{}),
		restands: make(chan *idlegrid.Dispute, restandQueue),
	}
	s.attest = newAttestState(cfg)
	if s.metrics, err = newMetrics(cfg.Metrics, s); err != nil {
		cancel()
		return nil, fmt.Errorf("server: register metrics: %w", err)
	}
	if err := s.auditPolicy(ctx); err != nil { // trust policy changes are logged (audit.go)
		cancel()
		return nil, err
	}
	s.wg.Add(4)
	go func() { defer s.wg.Done(); s.runScheduler(ctx) }()
	go func() { defer s.wg.Done(); s.runReaper(ctx) }()
	go func() { defer s.wg.Done(); s.runChallenges(ctx) }()
	go func() { defer s.wg.Done(); s.runRestands(ctx) }()
	return s, nil
}

// Drain wakes the long polls waiting now (agents' commands, watches of
// jobs) as if their wait were over, and has later watches answer at once:
// the server is shutting down, and their clients should ask again, of the
// next server, rather than hold its shutdown up. A later poll for
// commands is refused as unavailable, so that agents polling over their
// sessions through the shutdown's grace back off rather than poll in a
// loop. Everything else goes on as before. It may be called more than
// once.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// isDraining reports whether Drain was called.
func (s *Server) isDraining() bool {
	select {
	case <-s.draining:
		return true
	default:
		return false
	}
}

// Close drains the long polls, stops the loops and waits for them. It does
// not close the store.
func (s *Server) Close() error {
	s.Drain()
	s.cancel()
	s.wg.Wait()
	return nil
}

// Now is the coordinator's clock.
func (s *Server) Now() time.Time { return s.clock.Now() }

// Kick asks the scheduler to run a pass soon. It never blocks.
func (s *Server) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// waiters wakes long polls when what they wait on changes: an agent's
// commands, by node ID, or a watched job, by job ID. It keeps an ID only
// while a poll waits on it.
type waiters struct {
	mu sync.Mutex
	ch map[string]*waiting
}

// waiting is the polls waiting on one ID.
type waiting struct {
	c chan struct{} // closed at the next notify
	n int           // polls waiting
}

// wait returns a channel closed at the next notify for id, and done, which
// the poll calls once it stops waiting.
func (w *waiters) wait(id string) (changed <-chan struct{}, done func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = map[string]*waiting{}
	}
	g := w.ch[id]
	if g == nil {
		g = &waiting{c: make(chan struct{})}
		w.ch[id] = g
	}
	g.n++
	return g.c, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if g.n--; g.n == 0 && w.ch[id] == g {
			delete(w.ch, id)
		}
	}
}

func (w *waiters) notify(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.ch[id]; g != nil {
		close(g.c)
		delete(w.ch, id)
	}
}

// len is how many IDs polls wait on.
func (w *waiters) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ch)
}
