// Package trustsim runs cheating providers against the real coordinator
// and measures how fast the market's trust checks catch them
// (docs/trust.md, "Cheating providers, simulated").
//
// It opens server.Open on a SQLite store in a temporary folder, on a
// virtual clock that it alone moves. Each simulated provider is an
// in-process agent with a real ed25519 node key that calls the
// coordinator's Go API as its node: it joins with a join token, offers one
// GPU, attests its fingerprint, answers hardware challenges with
// internal/challenge's workload, heartbeats, starts and reports leases and
// signs usage receipts. Renters submit real jobs, a share of them
// verifiable. What each provider does with its leases is its Behaviour.
//
// A provider is flagged when a dispute against it is upheld, one of its
// nodes is quarantined, or its reputation score falls below
// Config.FlagScore. Run reports, per behaviour, the share flagged within
// their first Config.Leases leases and the median leases to detection, and
// the share of honest providers flagged.
//
// Runs are deterministic for a seed: the world moves in steps on one
// goroutine, every random draw (the simulation's, the coordinator's
// sampling and challenges) comes from the seed, and the coordinator's
// scheduler is let through only at the end of each step (see gatedStore).
package trustsim

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/reputation"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// Config sizes a run. Zero values take the documented defaults.
type Config struct {
	Providers int     // default 200
	Cheaters  float64 // share of providers that cheat, dealt evenly over Behaviours; default 0.5, negative for none
	// Behaviours are the cheating behaviours dealt; default Cheating.
	Behaviours []Behaviour
	Seed       uint64
	// Leases is how many leases a provider is watched for; default 20.
	Leases int
	// Verifiable is the share of renters' jobs marked verifiable; default 0.5.
	Verifiable float64
	// FlagScore: a provider whose reputation score falls below it, with
	// at least two incidents behind it (reputation.Params.Flag), is
	// flagged; default the policy's flag line, reputation.flag_below.
	FlagScore float64
	// HonestFailure is the share of an honest provider's leases that fail
	// by accident, as the provider's fault; default 0.02, negative for none.
	HonestFailure float64
	// MaxHours bounds the simulated time; default 14 days.
	MaxHours float64
	Policy   *trustpolicy.Policy // nil: trustpolicy.Default()
	// Dir holds the SQLite database; "": a temporary folder, removed after.
	Dir      string
	Progress io.Writer // one line every few simulated hours; nil: none
}

// realGPUs is p for providers that stand for real GPUs: their challenges
// are sized for the CPU (ChallengeMaxSize) only to keep a run fast, so a
// pass counts as verified hardware, as an honest GPU's pass at its own size
// does in a market (challenges.allow_simulated_runners, docs/trust.md).
func realGPUs(p *trustpolicy.Policy) *trustpolicy.Policy {
	q := *p
	q.Challenges.AllowSimulatedRunners = true
	return &q
}

// DefaultFlagScore is the default policy's flag line
// (reputation.DefaultFlagBelow).
const DefaultFlagScore = reputation.DefaultFlagBelow

// Step is the simulation's tick: the heartbeat interval the coordinator
// is configured with, so that every agent heartbeats once a step.
const Step = 5 * time.Minute

// taskEnv names, in a job's environment, the task whose output a
// verifiable job prints; re-runs copy it.
const taskEnv = "SIM_TASK"

func (c *Config) setDefaults() error {
	if c.Providers == 0 {
		c.Providers = 200
	}
	switch {
	case c.Cheaters == 0:
		c.Cheaters = 0.5
	case c.Cheaters < 0:
		c.Cheaters = 0
	}
	if len(c.Behaviours) == 0 {
		c.Behaviours = Cheating
	}
	if c.Leases == 0 {
		c.Leases = 20
	}
	if c.Verifiable == 0 {
		c.Verifiable = 0.5
	}
	if c.Policy == nil {
		c.Policy = trustpolicy.Default()
	}
	if c.FlagScore == 0 {
		c.FlagScore = c.Policy.Reputation.FlagBelow
	}
	if c.HonestFailure == 0 {
		c.HonestFailure = 0.02
	}
	if c.MaxHours == 0 {
		c.MaxHours = 14 * 24
	}
	if c.Policy == nil {
		c.Policy = trustpolicy.Default()
	}
	switch {
	case c.Providers < 3 || c.Providers > 100000:
		return idlegrid.Invalid("providers", "must be between 3 and 100000 (verification needs three providers)")
	case c.Cheaters < 0 || c.Cheaters > 1:
		return idlegrid.Invalid("cheaters", "must be a share between 0 and 1")
	case c.Verifiable < 0 || c.Verifiable > 1:
		return idlegrid.Invalid("verifiable", "must be a share between 0 and 1")
	case c.Leases < 1:
		return idlegrid.Invalid("leases", "must be at least 1")
	case c.FlagScore < 0 || c.FlagScore > 1:
		return idlegrid.Invalid("flag_score", "must be between 0 and 1")
	case c.HonestFailure > 1:
		return idlegrid.Invalid("honest_failure", "must be a share up to 1")
	case c.MaxHours <= 0:
		return idlegrid.Invalid("max_hours", "must be positive")
	}
	return nil
}

// world is one run: the coordinator, its store, the clock and the agents.
type world struct {
	cfg    Config
	ctx    context.Context
	srv    *server.Server
	store  *gatedStore
	clock  *Clock
	rng    *rand.Rand
	admin  context.Context
	rents  []context.Context // renters
	provs  []*provider
	tasks  int
	start  time.Time
	leases atomic.Int64
}

// Run runs the simulation and reports what it measured.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	dir := cfg.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "idlegrid-trustsim-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	db, err := sqlstore.Open(ctx, filepath.Join(dir, "idlegrid.db"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	w := &world{cfg: cfg, ctx: ctx, store: newGatedStore(db), clock: NewClock(simStart), rng: rand.New(rand.NewPCG(cfg.Seed, 0x7275_7374))}
	w.start = w.clock.Now()
	sample := rand.New(rand.NewPCG(cfg.Seed, 0x7665_7269))
	var sampleMu sync.Mutex
	w.srv, err = server.Open(server.Config{
		Store: w.store, Clock: w.clock, HeartbeatInterval: Step, StartTimeout: 3 * Step,
		// The agents' receipts come every receiptEvery, as a deployment
		// sets it above its agents' receipt_interval.
		ReceiptSilence: 2 * receiptEvery,
		// The loops that run on the wall clock are held off: the
		// simulation calls Reap and ChallengePass itself, once a step.
		SchedulePeriod: time.Hour, ChallengePeriod: 24 * time.Hour,
		PayoutHold: -1, Logger: slog.New(slog.DiscardHandler), TrustPolicy: realGPUs(cfg.Policy),
		Sample: func() float64 { sampleMu.Lock(); defer sampleMu.Unlock(); return sample.Float64() },
		// ChallengeRandom: seeds, spot-checked rows, random times.
		ChallengeRandom: rand.NewChaCha8(seed32(cfg.Seed)),
		// The smallest challenge: the agents compute it on this CPU.
		ChallengeMaxSize: 64,
	})
	if err != nil {
		return nil, err
	}
	defer w.srv.Close()
	defer w.store.open() // let a blocked scheduler pass see Close
	if err := w.populate(); err != nil {
		return nil, fmt.Errorf("populate the market: %w", err)
	}
	if err := w.loop(); err != nil {
		return nil, err
	}
	return w.report(), nil
}

// simStart is a Monday, midnight UTC.
var simStart = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

func seed32(s uint64) [32]byte {
	var b [32]byte
	r := rand.New(rand.NewPCG(s, 0x6368_616c))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// tickClock moves the clock a millisecond, so that everything the
// coordinator stamps in one step has its own time and queues in a
// deterministic order.
func (w *world) tickClock() { w.clock.Add(time.Millisecond) }

// populate creates the admin, the renters with money, and the providers
// with bonds, joined, offered and attested nodes.
func (w *world) populate() error {
	ctx := context.Background()
	admin, _, _, err := w.srv.Bootstrap(ctx, "ops", idlegrid.RoleAdmin)
	if err != nil {
		return err
	}
	w.admin = as(admin)
	for i := range 4 {
		r, _, _, err := w.srv.CreateAccount(w.admin, fmt.Sprintf("renter-%d", i), idlegrid.RoleRenter)
		if err != nil {
			return err
		}
		if _, err := w.srv.TopUp(w.admin, r.ID, 900_000*idlegrid.MicrosPerUnit, "seed"); err != nil {
			return err
		}
		w.rents = append(w.rents, as(r))
	}
	cheaters := int(float64(w.cfg.Providers)*w.cfg.Cheaters + 0.5)
	order := w.rng.Perm(w.cfg.Providers) // who cheats, by position
	for i := range w.cfg.Providers {
		b := Honest
		if k := order[i]; k < cheaters {
			b = w.cfg.Behaviours[k%len(w.cfg.Behaviours)]
		}
		p, err := w.join(i, b)
		if err != nil {
			return fmt.Errorf("provider %d (%s): %w", i, b, err)
		}
		w.provs = append(w.provs, p)
	}
	return nil
}

func as(a *idlegrid.Account) context.Context {
	return idlegrid.NewContextWithCaller(context.Background(), &idlegrid.Caller{AccountID: a.ID, Role: a.Role})
}

// join makes a provider account with a bond and one node, offered and
// attested; the at-join challenge is answered in the first step.
func (w *world) join(i int, b Behaviour) (*provider, error) {
	p := &provider{w: w, index: i, behaviour: b, leases: map[string]*simLease{}, flaggedAt: -1,
		rng: rand.New(rand.NewPCG(w.cfg.Seed, uint64(i)+1))}
	model := honestModels[p.rng.IntN(len(honestModels))]
	p.dev = device{claimed: model, actual: model}
	if b == LiesGPU {
		p.dev = lies[p.rng.IntN(len(lies))]
	}
	acct, _, _, err := w.srv.CreateAccount(w.admin, fmt.Sprintf("provider-%d", i), idlegrid.RoleProvider)
	if err != nil {
		return nil, err
	}
	p.id, p.account = acct.ID, as(acct)
	if _, err := w.srv.PostBond(w.admin, p.id, 500*idlegrid.MicrosPerUnit, "bond"); err != nil {
		return nil, err
	}
	_, token, err := w.srv.CreateJoinToken(p.account, "rack", 1, time.Hour)
	if err != nil {
		return nil, err
	}
	pub, priv, err := ed25519.GenerateKey(rand.NewChaCha8(seed32(w.cfg.Seed ^ uint64(i+1)*0x9e37)))
	if err != nil {
		return nil, err
	}
	p.key = priv
	name := fmt.Sprintf("node-%d", i)
	p.gpu = idlegrid.GPU{UUID: fmt.Sprintf("GPU-%08d-0", i), Model: p.dev.claimed, VRAMMB: vramMB(p.dev.claimed)}
	offer := w.offer(name, p.gpu, i)
	w.tickClock() // nodes list in the order they joined, not by their random IDs
	resp, err := w.srv.Join(context.Background(), idlegrid.JoinRequest{Token: token, PublicKey: nodekey.PublicString(pub), Offer: offer})
	if err != nil {
		return nil, err
	}
	p.nodeID = resp.NodeID
	p.node = idlegrid.NewContextWithCaller(context.Background(), &idlegrid.Caller{NodeID: p.nodeID, AccountID: p.id, Role: idlegrid.RoleProvider})
	if err := w.srv.UpdateOffer(p.node, idlegrid.OfferRequest{Offer: offer}); err != nil {
		return nil, err
	}
	return p, w.attest(p)
}

// offer is a node's offer: one GPU, always available, asks spread so that
// no two nodes tie on price.
func (w *world) offer(name string, g idlegrid.GPU, i int) idlegrid.Offer {
	floor := idlegrid.Micros(300_000 + 997*(i%300))
	return idlegrid.Offer{
		Name: name, Region: "eu-west", Residency: "EU", CPUCores: 16, RAMMB: 128000,
		GPUs:     []idlegrid.GPU{g},
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways},
		Ask: idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{
			idlegrid.TierGold: floor * 2, idlegrid.TierSilver: floor * 3 / 2, idlegrid.TierBronze: floor,
		}},
	}
}

// attest signs the node's fingerprint, as offered, with its key.
func (w *world) attest(p *provider) error {
	g := p.gpu
	g.PCIBusID, g.PCIDeviceID, g.PCISubsystemID = "00000000:01:00.0", "268410DE", "889F1043"
	g.DriverVersion, g.VBIOSVersion = "550.54.15", "95.02.18.80.87"
	a := idlegrid.Attestation{NodeID: p.nodeID, Fingerprint: idlegrid.FingerprintOf([]idlegrid.GPU{g}), SignedAt: w.clock.Now()}
	nodekey.SignAttestation(p.key, &a)
	_, err := w.srv.Attest(p.node, idlegrid.AttestRequest{Attestation: a})
	return err
}

// loop moves the world a step at a time until every provider is either
// flagged or past its watched leases, or the time is up.
func (w *world) loop() error {
	end := w.start.Add(time.Duration(w.cfg.MaxHours * float64(time.Hour)))
	for step := 0; ; step++ {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if err := w.step(); err != nil {
			return fmt.Errorf("step %d (%s): %w", step, w.clock.Now().Format(time.RFC3339), err)
		}
		watching := w.watching()
		if w.cfg.Progress != nil && step%24 == 0 {
			fmt.Fprintf(w.cfg.Progress, "trustsim: %5.1f h simulated, %d leases, %d of %d providers still watched\n",
				w.hours(), w.leases.Load(), watching, len(w.provs))
		}
		if watching == 0 || !w.clock.Now().Before(end) {
			return nil
		}
	}
}

// hours is the simulated time so far.
func (w *world) hours() float64 { return w.clock.Now().Sub(w.start).Hours() }

// watching counts providers neither flagged nor past their watched leases.
func (w *world) watching() int {
	n := 0
	for _, p := range w.provs {
		if p.flaggedAt < 0 && p.seen <= w.cfg.Leases {
			n++
		}
	}
	return n
}

// step is one heartbeat interval: the clock moves, the reaper and the
// challenge loop run once, every agent acts, the renters top up the
// queue, the scheduler places what it can, and flags are read.
func (w *world) step() error {
	w.clock.AdvanceTo(w.clock.Now().Truncate(Step).Add(Step))
	// The reaper runs first, on the step's boundary, so that its view of
	// silence does not depend on how long the agents before took.
	if err := w.srv.Reap(w.ctx); err != nil {
		return fmt.Errorf("reap: %w", err)
	}
	if err := w.srv.ChallengePass(w.ctx); err != nil {
		return fmt.Errorf("challenge pass: %w", err)
	}
	for _, p := range w.provs {
		before := p.seen
		if err := p.tick(); err != nil {
			return fmt.Errorf("provider %d (%s): %w", p.index, p.behaviour, err)
		}
		w.leases.Add(int64(p.seen - before))
	}
	if err := w.demand(); err != nil {
		return fmt.Errorf("demand: %w", err)
	}
	if err := w.schedule(); err != nil {
		return err
	}
	return w.readFlags()
}

// demand keeps about one job per node outstanding, queued or running.
func (w *world) demand() error {
	queued, err := w.store.ListJobs(w.ctx, idlegrid.JobFilter{States: []idlegrid.JobState{idlegrid.JobQueued}, Limit: 1 << 30})
	if err != nil {
		return err
	}
	live, err := w.store.ListLeases(w.ctx, idlegrid.LeaseFilter{
		States: []idlegrid.LeaseState{idlegrid.LeaseAssigned, idlegrid.LeaseRunning}, Limit: 1 << 30})
	if err != nil {
		return err
	}
	for range len(w.provs) - len(queued) - len(live) {
		w.tasks++
		spec := idlegrid.JobSpec{
			Kind: idlegrid.KindTraining, Image: "example/trainer:1", GPUs: 1, Tier: idlegrid.TierSilver,
			MaxPriceMicrosPerGPUHour: 5_000_000, DurationSeconds: int64(30+w.rng.IntN(61)) * 60,
			Verifiable: w.rng.Float64() < w.cfg.Verifiable,
			Env:        map[string]string{taskEnv: fmt.Sprintf("task-%d", w.tasks)},
		}
		w.tickClock()
		if _, err := w.srv.SubmitJob(w.rents[w.tasks%len(w.rents)], spec); err != nil {
			return err
		}
	}
	return nil
}

// schedule lets the scheduler run one pass over what this step changed
// and waits for it: the pass starts after the gate opens, and
// BetweenPasses returns only between passes. It is only asked while the
// gate is open: a pass waiting at a closed gate would never end.
func (w *world) schedule() error {
	before := w.store.passes.Load()
	w.store.open()
	defer w.store.close()
	w.srv.Kick()
	for range 10000 {
		if err := w.srv.BetweenPasses(w.ctx); err != nil {
			return err
		}
		if w.store.passes.Load() > before {
			// Asked again with the gate still open, so that no pass waits
			// at the gate while BetweenPasses waits for the scheduler: the pass
			// that got through has ended when this is answered.
			return w.srv.BetweenPasses(w.ctx)
		}
	}
	return errors.New("the scheduler ran no pass: is the coordinator's queue read still ListJobs(queued, oldest first)?")
}
