package trustsim

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/challenge"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// provider is one simulated provider with one node of one GPU: an
// in-process agent that speaks to the coordinator through its Go API as
// the node, the way the HTTP layer calls it after checking a signature.
type provider struct {
	w         *world
	index     int
	behaviour Behaviour
	dev       device
	rng       *rand.Rand

	id      string          // provider account
	account context.Context // as the provider's API key
	nodeID  string
	node    context.Context // as the node's signed requests
	key     ed25519.PrivateKey
	gpu     idlegrid.GPU // as offered

	leases     map[string]*simLease
	order      []string // lease IDs in the order they came, for a deterministic walk
	seen       int      // leases this provider was given
	ticks      int      // steps so far
	flaggedAt  int      // leases seen when first flagged; -1: never
	flaggedBy  string   // the first signal that flagged it
	flaggedHrs float64  // simulated hours when first flagged
}

// plan is what a provider means to do with a lease.
type plan int

const (
	planRun        plan = iota // run it to the end
	planFail                   // an honest accident: fail at stopAt as the provider's fault
	planNeverStart             // accept it and never start it
	planGoQuiet                // start it, stop working at stopAt and say nothing
)

// simLease is a lease as the agent sees it.
type simLease struct {
	id           string
	job          idlegrid.JobSpec
	gpus         int64
	start        time.Time
	runFor       time.Duration // how long the work takes
	limitSeconds int64         // the lease's time limit
	plan         plan
	stopAt       time.Time // planFail, planGoQuiet
	overclaim    bool      // inflates-receipts: this lease's next receipt overclaims
	refused      bool      // a receipt was refused: send no more
	seq          int64
	lastEnd      time.Time
	prevHash     string
	quiet        bool // planGoQuiet past stopAt
	finishedAt   time.Time
}

// tick is one heartbeat interval of the agent: heartbeat, challenges,
// commands, then the work and receipts of each lease.
func (p *provider) tick() error {
	p.ticks++
	if p.behaviour != BillsOffline || p.ticks%2 == 0 { // it skips every other heartbeat
		if _, err := p.w.srv.Heartbeat(p.node, idlegrid.HeartbeatRequest{}); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
	}
	if err := p.answerChallenges(); err != nil {
		return err
	}
	cmds, err := p.w.srv.Commands(p.node, 0)
	if err != nil {
		return fmt.Errorf("commands: %w", err)
	}
	for _, c := range cmds {
		if err := p.handle(c); err != nil {
			return err
		}
	}
	for _, id := range p.order {
		if l := p.leases[id]; l != nil {
			if err := p.work(l); err != nil {
				return err
			}
		}
	}
	p.forget()
	return nil
}

func (p *provider) handle(c idlegrid.Command) error {
	switch c.Kind {
	case idlegrid.CommandStart:
		if _, known := p.leases[c.Lease.ID]; known || c.Job == nil {
			return nil
		}
		return p.start(c.Lease, *c.Job)
	case idlegrid.CommandStop:
		l := p.leases[c.Lease.ID]
		if l == nil || !l.finishedAt.IsZero() {
			return nil
		}
		// Every behaviour confirms a stop the server asked for: it costs a
		// cheater nothing. As the real agent does (internal/agent,
		// receipts.go), a lease whose work runs gets a last receipt, up
		// to the stop, before the report; one gone quiet says nothing.
		if l.plan != planNeverStart && !l.quiet {
			upTo := p.w.clock.Now()
			if limit := l.start.Add(time.Duration(l.limitSeconds) * time.Second); limit.Before(upTo) {
				upTo = limit // the lease pays for no more
			}
			if err := p.sendReceipt(l, upTo); err != nil {
				return err
			}
		}
		return p.end(l, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled, Message: "stopped as asked"})
	}
	return nil
}

func (p *provider) start(lease *idlegrid.Lease, job idlegrid.JobSpec) error {
	p.w.tickClock()
	now := p.w.clock.Now()
	l := &simLease{id: lease.ID, job: job, gpus: int64(len(lease.GPUUUIDs)), start: now, lastEnd: now, limitSeconds: lease.LimitSeconds}
	l.runFor = time.Duration(float64(job.DurationSeconds)*(0.6+0.35*p.rng.Float64())) * time.Second
	p.leases[l.id] = l
	p.order = append(p.order, l.id)
	p.seen++
	switch p.behaviour {
	case Honest:
		if p.rng.Float64() < p.w.cfg.HonestFailure {
			l.plan, l.stopAt = planFail, now.Add(time.Duration(p.rng.Float64()*float64(l.runFor)))
		}
	case DropsJobs:
		if p.rng.Float64() < dropShare {
			l.plan = planNeverStart
			if p.rng.IntN(2) == 1 {
				l.plan, l.stopAt = planGoQuiet, now.Add(time.Duration(p.rng.Float64()*float64(l.runFor)))
			}
		}
	case InflatesReceipts:
		l.overclaim = p.rng.Float64() < inflateShare
	}
	if l.plan == planNeverStart {
		return nil
	}
	return p.report(l, idlegrid.LeaseReport{State: idlegrid.LeaseRunning})
}

// work advances a lease to now: receipts for what ran (or is claimed to
// have), and its end when the work is done.
func (p *provider) work(l *simLease) error {
	if !l.finishedAt.IsZero() || l.plan == planNeverStart || l.quiet {
		return nil
	}
	p.w.tickClock()
	now := p.w.clock.Now()
	done := l.start.Add(l.runFor)
	if l.plan == planFail || l.plan == planGoQuiet {
		done = l.stopAt
	}
	upTo := now
	if done.Before(now) {
		upTo = done
	}
	if now.Before(done) {
		if upTo.Sub(l.lastEnd) < receiptEvery {
			return nil
		}
		return p.sendReceipt(l, upTo)
	}
	if err := p.sendReceipt(l, upTo); err != nil {
		return err
	}
	switch l.plan {
	case planGoQuiet:
		l.quiet = true // it answers a stop, when the time limit brings one
		return nil
	case planFail:
		return p.end(l, idlegrid.LeaseReport{State: idlegrid.LeaseFailed, Fault: idlegrid.FaultProvider, Message: "GPU fell off the bus (Xid 79)"})
	}
	exit := 0
	r := idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &exit, Progress: 1}
	if l.job.Verifiable {
		r.OutputDigest = p.digest(l)
	}
	return p.end(l, r)
}

// digest is what the lease's workload printed: the task's true output,
// or a made-up one from a provider that never ran it.
func (p *provider) digest(l *simLease) string {
	out := "output of " + l.job.Env[taskEnv]
	if p.behaviour == FakesUptime {
		out = "nothing ran for lease " + l.id
	}
	sum := sha256.Sum256([]byte(out))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// sendReceipt signs and sends a receipt from the last one's end to upTo,
// claiming the GPU-seconds that ran, or more for an inflater.
func (p *provider) sendReceipt(l *simLease, upTo time.Time) error {
	secs := int64(upTo.Sub(l.lastEnd) / time.Second)
	if secs < 1 || l.refused {
		return nil
	}
	r := idlegrid.Receipt{LeaseID: l.id, Seq: l.seq + 1, Start: l.lastEnd, End: l.lastEnd.Add(time.Duration(secs) * time.Second),
		GPUSeconds: secs * l.gpus, AvgUtilPct: 93, PrevHash: l.prevHash}
	if l.overclaim {
		r.GPUSeconds = int64(float64(r.GPUSeconds) * inflateBy)
		l.overclaim = false
	}
	nodekey.SignReceipt(p.key, &r)
	err := p.w.srv.ReceiveReceipts(p.node, l.id, []idlegrid.Receipt{r})
	switch idlegrid.ErrorCode(err) {
	case "":
		l.seq, l.lastEnd, l.prevHash = r.Seq, r.End, r.Hash()
	case idlegrid.EINVALID, idlegrid.ECONFLICT:
		l.refused = true // caught or ended: it stops billing this lease
	default:
		return fmt.Errorf("receipts of %s: %w", l.id, err)
	}
	return nil
}

// end reports a lease's end; one the server already ended is forgotten.
func (p *provider) end(l *simLease, r idlegrid.LeaseReport) error {
	l.finishedAt = p.w.clock.Now()
	return p.report(l, r)
}

func (p *provider) report(l *simLease, r idlegrid.LeaseReport) error {
	p.w.tickClock()
	err := p.w.srv.ReportLease(p.node, l.id, r)
	if err != nil && idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
		return fmt.Errorf("report %s %s: %w", l.id, r.State, err)
	}
	if err != nil {
		l.finishedAt = p.w.clock.Now() // the server ended it first
	}
	return nil
}

// forget drops leases that ended, and those never started or gone quiet
// long after the server must have ended them.
func (p *provider) forget() {
	now := p.w.clock.Now()
	keep := p.order[:0]
	for _, id := range p.order {
		l := p.leases[id]
		stale := (l.plan == planNeverStart || l.quiet) && now.Sub(l.start) > 2*time.Duration(l.job.DurationSeconds)*time.Second+time.Hour
		if (!l.finishedAt.IsZero() && now.Sub(l.finishedAt) > time.Hour) || stale {
			delete(p.leases, id)
			continue
		}
		keep = append(keep, id)
	}
	p.order = keep
}

// answerChallenges answers the node's pending hardware challenges with
// what its real GPU does: challenge.Run's result, in the real model's
// time at peak (the judge's band allows 0.5–2×), with its real memory.
func (p *provider) answerChallenges() error {
	pending, err := p.w.srv.PendingChallenges(p.node)
	if err != nil {
		return fmt.Errorf("pending challenges: %w", err)
	}
	for _, c := range pending.Challenges {
		ans, err := p.answer(c)
		if err != nil {
			return err
		}
		p.w.tickClock()
		if _, err := p.w.srv.AnswerChallenge(p.node, c.ID, ans); err != nil && idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			return fmt.Errorf("answer challenge %s: %w", c.ID, err)
		}
	}
	return nil
}

func (p *provider) answer(c *idlegrid.Challenge) (idlegrid.ChallengeAnswer, error) {
	return answerAs(p.w.ctx, c, p.dev.actual)
}

// answerAs is what a GPU that really is model answers to c.
func answerAs(ctx context.Context, c *idlegrid.Challenge, model string) (idlegrid.ChallengeAnswer, error) {
	task, err := challenge.TaskOf(c)
	if err != nil {
		return idlegrid.ChallengeAnswer{}, err
	}
	hashes, _, err := challenge.Run(ctx, task)
	if err != nil {
		return idlegrid.ChallengeAnswer{}, err
	}
	spec, _ := challenge.LookupSpec(model)
	return idlegrid.ChallengeAnswer{RowHashes: hashes, Digest: challenge.Digest(hashes),
		ElapsedNanos: int64(spec.Expected(task.Size)), VRAMMB: vramMB(model)}, nil
}
