// Package agent is the provider daemon. It runs on a node with idle GPUs,
// joins a provider's fleet once (keeping its identity in its data dir),
// publishes the node's offer, heartbeats, long-polls the server for
// commands, runs leases' workloads through a runtime.Runtime, reports
// their output, progress and end, and signs usage receipts of what they ran
// (receipts.go).
//
// The agent reaches the server only through Server, which the public client
// (*client.AgentClient) implements; it never imports the store or the
// server. It opens every connection, so a node behind NAT needs no inbound
// port. When the Server is also a SessionServer, the agent keeps one
// multiplexed session to the server while it serves, and every call after
// the join (the long poll included) travels on it (see internal/session).
package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/backoff"
	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// Server is the part of the server's agent API the agent uses.
// *client.AgentClient implements it; tests use a fake.
type Server interface {
	Join(ctx context.Context, req idlegrid.JoinRequest) (*idlegrid.JoinResponse, error)
	SetNodeID(id string)
	UpdateOffer(ctx context.Context, req idlegrid.OfferRequest) error
	Heartbeat(ctx context.Context, req idlegrid.HeartbeatRequest) (*idlegrid.HeartbeatResponse, error)
	Commands(ctx context.Context, wait time.Duration) ([]idlegrid.Command, error)
	ReportLease(ctx context.Context, leaseID string, r idlegrid.LeaseReport) error
	AppendLogs(ctx context.Context, leaseID string, b idlegrid.LogBatch) error
	SendReceipts(ctx context.Context, leaseID string, rs []idlegrid.Receipt) error
	LastReceipt(ctx context.Context, leaseID string) (*idlegrid.Receipt, error)
	// Goodbye says the agent is stopping: the node goes offline, so that
	// nothing new is placed on it while the agent reports its leases.
	Goodbye(ctx context.Context) error
}

// SessionServer is a Server that can carry the agent's calls over one
// outbound, multiplexed session; *client.AgentClient is one. RunSession
// keeps the session up until ctx is done, serving the server's requests to
// the agent with h (nil: only the session's own ping), and falls back to
// plain HTTP while the session is down or where the server offers none.
type SessionServer interface {
	Server
	RunSession(ctx context.Context, h http.Handler, log *slog.Logger) error
}

// Timing of the agent's conversation with the server.
const (
	// CommandWait is how long one long poll for commands may wait.
	CommandWait = 25 * time.Second
	// StopGrace is how long a workload has to checkpoint after a stop.
	StopGrace = 10 * time.Second
	// LogFlushInterval and LogBatchLines bound how long a line of output
	// waits before it is sent: a second, or until a batch is full.
	LogFlushInterval = time.Second
	LogBatchLines    = 100
	// ShutdownTimeout bounds how long Run, once its context is done, keeps
	// trying to report the leases it stopped.
	ShutdownTimeout = StopGrace + 20*time.Second
	// LimitSlack is how long past its lease's time limit a workload may
	// run before the agent stops it by itself. The server asks for the
	// stop sooner (30 s past the limit, at its next reaper pass), and that
	// stop is the one a lease normally ends by; the agent's own is for
	// when the server cannot be reached, so that the workload does not
	// keep the node's GPUs past what anyone pays for (no receipt bills
	// past the limit).
	LimitSlack = 2 * time.Minute

	defaultHeartbeat = 10 * time.Second
	minPoll          = time.Second // between polls that brought nothing new
	finishedMemory   = time.Hour   // how long a finished lease's repeated commands are ignored
)

// Options are what New needs. Config, Server, Detector and Runtime are
// required; the rest have defaults.
type Options struct {
	Config   *Config
	Server   Server
	Detector gpu.Detector
	Runtime  runtime.Runtime // the agent uses it but does not Close it
	Clock    idlegrid.Clock  // default idlegrid.SystemClock
	Logger   *slog.Logger    // default: discard
	Version  string          // the agent's version, told to the server; default "dev"
	// Key is the node's identity; nil loads or creates it at
	// Config.KeyPath(). It must be the key Server signs with.
	Key ed25519.PrivateKey
	// Host is the machine's resources; nil detects them (DetectHost).
	Host *Host
	// OwnsProcess tells whether a host process runs one of the agent's
	// workloads, for when-idle mode; nil asks the runtime (when it is a
	// ProcessOwner) and counts the agent's own descendants.
	OwnsProcess func(pid int) bool
	// Challenger runs hardware challenges on real GPUs (attest.go); nil
	// opens CUDA (internal/gpu/cuda) when the driver and cuBLAS load.
	Challenger GPUChallenger
}

// Agent is the provider daemon. Make one with New and call Run once.
type Agent struct {
	cfg     *Config
	srv     Server
	det     gpu.Detector
	rt      runtime.Runtime
	clock   idlegrid.Clock
	log     *slog.Logger
	version string
	key     ed25519.PrivateKey
	host    Host

	ran            atomic.Bool
	heartbeatEvery time.Duration         // written before the loops start, then only by the heartbeat loop
	standing       idlegrid.NodeStanding // the last heartbeat's answer, the heartbeat loop's (standing.go)
	leaseWG        sync.WaitGroup        // lease goroutines and lone reports

	// The policy's state, used by Run and then by the watch loop only.
	policy       *policy
	ownsProcess  func(pid int) bool
	offerKey     string          // what the last published offer offered
	offerTried   string          // the offer last tried, published or not: its change is logged once
	lastGPUs     []idlegrid.GPU  // the GPUs of the last offer built
	powerRefused map[string]bool // GPUs that refused the power cap
	powerUnknown map[string]bool // GPUs whose power limit the driver does not report (told once)
	powerWas     powerWas        // the limits the GPUs had before the cap (power.go)
	telemetry    telemetry       // the GPUs' last telemetry, for the leases' meters
	models       *models         // the models served for inference (models.go)
	attested     attestation     // the fingerprint the server holds (attest.go)
	challenger   GPUChallenger   // Options.Challenger; else opened by the attestation (attest.go)

	// takeBackMu makes one adopt run at a time, between serve's retries
	// (adoptAgain) and lease starts (takeBack); untaken says the runtime
	// has not yet said which workloads a previous agent left, after
	// takeBackTries.
	takeBackMu    sync.Mutex
	untaken       bool
	takeBackTries int

	mu        sync.Mutex
	nodeID    string
	gpus      map[string]bool      // UUIDs of the node's GPUs now
	withdrawn map[string]string    // GPU UUID → why it is not offered now
	leases    map[string]*lease    // started here and not yet finished
	added     uint64               // leases added to leases so far (addLease)
	finished  map[string]time.Time // lease ID → when it finished here
	leaving   bool                 // the server has the agent's goodbye: a start is refused
	handing   bool                 // handing over (handover.go): a start waits for the next agent
	// leftStarts are the leases whose start a hand-over leaves to the
	// next agent, named as starting in heartbeats meanwhile.
	leftStarts map[string]idlegrid.LeaseStarting

	handover     chan struct{} // closed by HandOver
	handOverOnce sync.Once
	handedOver   atomic.Bool // Run left the workloads running for the next agent
}

// New checks the options and makes an agent.
func New(o Options) (*Agent, error) {
	switch {
	case o.Config == nil:
		return nil, errors.New("agent: Options.Config is required")
	case o.Server == nil:
		return nil, errors.New("agent: Options.Server is required")
	case o.Detector == nil:
		return nil, errors.New("agent: Options.Detector is required")
	case o.Runtime == nil:
		return nil, errors.New("agent: Options.Runtime is required")
	}
	if err := o.Config.Validate(); err != nil {
		return nil, err
	}
	a := &Agent{
		cfg: o.Config, srv: o.Server, det: o.Detector, rt: o.Runtime,
		clock: o.Clock, log: o.Logger, version: o.Version, key: o.Key,
		heartbeatEvery: defaultHeartbeat,
		leases:         map[string]*lease{}, finished: map[string]time.Time{}, leftStarts: map[string]idlegrid.LeaseStarting{},
		policy: newPolicy(o.Config), ownsProcess: o.OwnsProcess, powerRefused: map[string]bool{}, powerUnknown: map[string]bool{},
		models: newModels(o.Config), challenger: o.Challenger, handover: make(chan struct{}),
	}
	if a.clock == nil {
		a.clock = idlegrid.SystemClock{}
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.version == "" {
		a.version = "dev"
	}
	was, err := readPowerWas(o.Config.DataDir)
	if err != nil {
		a.log.Warn("cannot read the GPUs' power limits from before the cap; they will not be set back", "file", powerPath(o.Config.DataDir), "err", err)
	}
	a.powerWas = was
	if a.key == nil {
		key, err := nodekey.LoadOrCreate(o.Config.KeyPath())
		if err != nil {
			return nil, err
		}
		a.key = key
	}
	if o.Host != nil {
		a.host = *o.Host
	} else {
		a.host = DetectHost(o.Config.DataDir)
	}
	return a, nil
}

// NodeID returns the node's ID once Run has joined or found it, else "".
func (a *Agent) NodeID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nodeID
}

// Run joins if the node has not joined yet, publishes the offer, and then
// serves until ctx is done: heartbeats, takes commands, runs leases. When
// ctx is done it takes no more work, stops the running leases with
// StopGrace, reports them (for up to ShutdownTimeout) and returns nil. It
// returns an error only when the agent cannot go on: a bad offer, a refused
// join token, a data dir it cannot use, a node the server retired or has
// not known for ForgetAfter (whose workloads it stops first, those a
// previous agent left included). Trouble reaching the server is retried,
// never fatal. After HandOver it leaves the workloads running for the
// next agent instead, and returns ErrHandedOver (handover.go). Every
// goroutine Run starts has ended when it returns.
func (a *Agent) Run(ctx context.Context) error {
	if !a.ran.CompareAndSwap(false, true) {
		return errors.New("agent: Run called twice")
	}
	defer func() {
		if !a.handedOver.Load() { // the workloads left running keep the cap, for the next agent to restore
			a.restorePowerLimits()
		}
	}()
	readyCtx, stopWatch := a.untilHandOver(ctx)
	offer, err := a.ready(readyCtx)
	handed := errors.Is(context.Cause(readyCtx), errHandOver)
	stopWatch()
	switch {
	case handed:
		// Nothing is followed yet: what a previous agent left runs on.
		a.handedOver.Store(true)
		a.log.Info("handed over before serving: the workloads a previous agent left run on, for the next agent")
		return ErrHandedOver
	case err != nil:
		return quiet(ctx, err)
	}
	a.log.Info("agent serving", "node", a.NodeID(), "server", a.cfg.Server, "gpus", len(offer.GPUs), "heartbeat", a.heartbeatEvery)
	return a.serve(ctx)
}

// ready gets the node ready to serve: it detects the GPUs, joins or finds
// the node's ID, publishes the offer and answers the hardware challenge.
// An error caused by ctx ending is Run's to make quiet.
func (a *Agent) ready(ctx context.Context) (idlegrid.Offer, error) {
	a.models.checkAll(ctx, a.log) // so that the first offer lists the healthy models
	offer, err := a.offer(ctx)
	if err != nil {
		return offer, err
	}
	if err := a.identify(ctx, offer); err != nil {
		return offer, err
	}
	if err := a.publish(ctx, offer); err != nil {
		if errors.Is(err, errRetired) || errors.Is(err, errForgotten) {
			a.stopLeftBehind(ctx)
		}
		return offer, err
	}
	a.attest(ctx, &a.attested)
	return offer, nil
}

// quiet turns an error caused by ctx ending into a clean return.
func quiet(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// offer detects the GPUs, judges them by the node's policy and builds the
// node's first offer.
func (a *Agent) offer(ctx context.Context) (idlegrid.Offer, error) {
	devs, v, err := a.observe(ctx)
	if err != nil {
		return idlegrid.Offer{}, fmt.Errorf("detect GPUs: %w", err)
	} else if len(devs) == 0 {
		return idlegrid.Offer{}, errors.New("detect GPUs: found none; is the NVIDIA driver working (try nvidia-smi)?")
	}
	a.applyPowerCap(ctx, devs)
	offer, key, err := a.offerFor(devs, v)
	if err != nil {
		return idlegrid.Offer{}, err
	}
	a.logOffer(devs, v)
	a.offerKey = key
	return offer, nil
}

// identify finds the node's ID in its state, or joins to get one and saves it.
func (a *Agent) identify(ctx context.Context, offer idlegrid.Offer) error {
	st, err := ReadState(a.cfg.DataDir)
	if err != nil {
		return err
	}
	if st == nil {
		if st, err = a.join(ctx, offer); err != nil {
			return err
		}
	} else if !sameServer(st.Server, a.cfg.Server) {
		return fmt.Errorf("this node joined %s as %s, not %s; to join another server, move %s away",
			st.Server, st.NodeID, a.cfg.Server, StatePath(a.cfg.DataDir))
	}
	a.srv.SetNodeID(st.NodeID)
	a.heartbeatEvery = heartbeatInterval(st.HeartbeatSeconds)
	a.mu.Lock()
	a.nodeID = st.NodeID
	a.mu.Unlock()
	return nil
}

func (a *Agent) join(ctx context.Context, offer idlegrid.Offer) (*State, error) {
	if a.cfg.JoinToken == "" {
		return nil, idlegrid.Invalid("join_token", "this node has not joined yet (no %s); set join_token in the config or %s",
			StatePath(a.cfg.DataDir), EnvJoinToken)
	}
	req := idlegrid.JoinRequest{
		Token: a.cfg.JoinToken, Offer: offer, AgentVersion: a.version,
		PublicKey: nodekey.PublicString(a.key.Public().(ed25519.PublicKey)),
	}
	var resp *idlegrid.JoinResponse
	err := a.deliver(ctx, "join", func(ctx context.Context) (err error) {
		resp, err = a.srv.Join(ctx, req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("join %s: %w", a.cfg.Server, err)
	}
	st := &State{
		NodeID: resp.NodeID, ProviderID: resp.ProviderID, Server: a.cfg.Server,
		HeartbeatSeconds: resp.HeartbeatSeconds, JoinedAt: a.clock.Now(),
	}
	if err := writeState(a.cfg.DataDir, st); err != nil {
		return nil, fmt.Errorf("joined as %s but could not save %s: %w", st.NodeID, StatePath(a.cfg.DataDir), err)
	}
	a.log.Info("joined", "node", st.NodeID, "provider", st.ProviderID)
	return st, nil
}

// publish tells the server what the node offers, which also marks it online.
// A server that refuses the node as the heartbeat loop would stop it
// (retired, or not known for ForgetAfter) makes publish return errRetired
// or errForgotten; one that does not know it yet is asked again until then.
func (a *Agent) publish(ctx context.Context, offer idlegrid.Offer) error {
	req := idlegrid.OfferRequest{Offer: offer, AgentVersion: a.version}
	var b backoff.Backoff
	var unknownSince time.Time // since when the server has said it does not know the node
	for {
		err := a.deliver(ctx, "publish offer", func(ctx context.Context) error { return a.srv.UpdateOffer(ctx, req) })
		switch code := idlegrid.ErrorCode(err); {
		case err == nil:
			return nil
		case code == idlegrid.EFORBIDDEN:
			a.log.Error("the server refuses this node; stopping", "err", err)
			return fmt.Errorf("%w: %v", errRetired, err)
		case unknownNode(err):
			if unknownSince.IsZero() {
				unknownSince = a.clock.Now()
			}
			if a.clock.Now().Sub(unknownSince) >= ForgetAfter {
				a.log.Error("the server no longer knows this node; stopping", "since", unknownSince, "err", err)
				return fmt.Errorf("%w: %v", errForgotten, err)
			}
			d := min(b.Next(), a.heartbeatEvery)
			a.log.Warn("the server does not know this node; will ask again", "retry_in", d.Round(time.Millisecond), "err", err)
			if !backoff.Sleep(ctx, d) {
				return ctx.Err()
			}
		case code == idlegrid.EUNAUTHORIZED || code == idlegrid.ENOTFOUND:
			return fmt.Errorf("publish offer: %w (if the server knows this node by another key, put its key %s back; "+
				"to join as a new node, move %s away and give the agent a join token)", err, a.cfg.KeyPath(), StatePath(a.cfg.DataDir))
		default:
			return fmt.Errorf("publish offer: %w", err)
		}
	}
}

// stopLeftBehind takes back the workloads a previous agent on this node
// left running and stops them, for a node the server refuses: no one pays
// for them, and an agent that exits leaving them would leave them for good.
// Their reports are refused; it returns once their workloads have exited.
func (a *Agent) stopLeftBehind(ctx context.Context) {
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	_ = a.adopt(ctx, workCtx) // one try: what it could not take back is left as it is
	a.shutdown(cancelWork)
}

func heartbeatInterval(seconds int) time.Duration {
	if seconds <= 0 {
		return defaultHeartbeat
	}
	return time.Duration(min(seconds, 300)) * time.Second
}

// serve runs the heartbeat and command loops until ctx is done, then stops
// and reports the leases.
func (a *Agent) serve(ctx context.Context) error {
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	// Reports outlive ctx: they are cut off only when shutdown gives up.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	// The session outlives the loops, so that shutdown's reports use it too.
	stopSession := a.keepSession(workCtx)
	defer stopSession()
	var loops sync.WaitGroup
	a.untaken = true
	if err := a.takeBack(ctx, workCtx); err != nil {
		// The runtime could not say which workloads it holds (Docker
		// restarting, say): what a previous agent left runs on, on GPUs
		// this node offers, until it is taken back; a lease's start
		// tries again first (runLease).
		a.recoverMeters(workCtx, false)
		loops.Go(func() { a.adoptAgain(ctx, workCtx) })
	}
	loops.Go(func() { a.heartbeatLoop(ctx, refuse) })
	loops.Go(func() { a.commandLoop(ctx, workCtx) })
	loops.Go(func() { a.watchLoop(ctx) })
	loops.Go(func() { a.models.loop(ctx, a.log) })
	loops.Go(func() { a.models.loadLoop(ctx, a.log.Info) })
	loops.Go(func() { a.challengeLoop(ctx, &a.attested) })
	loops.Go(func() { a.handOverWhenAsked(ctx, refuse) })
	loops.Wait()
	a.models.leave()
	cause := context.Cause(ctx)
	wait := a.drainWait(errors.Is(cause, errHandOver))
	defer a.drainModels(time.Now().Add(wait), wait) // before the session closes
	if errors.Is(cause, errHandOver) {
		a.handOff(cancelWork)
		return ErrHandedOver
	}
	refused := errors.Is(cause, errRetired) || errors.Is(cause, errForgotten)
	if !refused && a.sayGoodbye(workCtx) {
		a.refuseUnstarted(workCtx)
	}
	a.shutdown(cancelWork)
	if refused {
		return cause
	}
	return nil
}

// goodbyeWait bounds how long a stopping agent waits for the server to
// take its goodbye.
const goodbyeWait = 5 * time.Second

// sayGoodbye tells the server the agent is stopping (Server.Goodbye), so
// that nothing new is placed on the node while the agent stops and
// reports its leases, and the node is offline rather than lost once its
// heartbeats stop. A server out of reach finds the node lost, as before.
// It reports whether the server took the goodbye.
func (a *Agent) sayGoodbye(workCtx context.Context) bool {
	ctx, cancel := context.WithTimeout(workCtx, goodbyeWait)
	defer cancel()
	if err := a.srv.Goodbye(ctx); err != nil {
		a.log.Warn("could not tell the server the agent is stopping; it will declare the node lost once its heartbeats stop", "err", err)
		return false
	}
	a.log.Info("told the server the agent is stopping: the node is offline, and nothing new is placed on it")
	return true
}

// refuseUnstarted fails, once the server has the goodbye, the leases it
// placed on the node after the agent's last poll for commands, which the
// agent never heard of (or whose start a hand-over cut short gave up):
// their jobs go back to the queue now, rather than once the node has been
// silent as long as the server waits.
func (a *Agent) refuseUnstarted(workCtx context.Context) {
	a.mu.Lock()
	a.leaving, a.handing = true, false
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(workCtx, goodbyeWait)
	defer cancel()
	cmds, err := a.srv.Commands(ctx, 0)
	if err != nil {
		a.log.Warn("could not ask the server for leases placed just before the goodbye; any is lost once the node has been silent long enough", "err", err)
		return
	}
	for _, c := range cmds {
		if c.Kind == idlegrid.CommandStart && c.Lease != nil && c.Lease.ID != "" {
			a.start(ctx, workCtx, c) // refused (refusal), and reported so
		}
	}
}

// errRetired is why an agent whose node was retired stops.
var errRetired = errors.New("the server refuses this node for good: it was retired, by its provider or an admin " +
	"(idlegrid node retire); its workloads were stopped. To serve again, start the agent with an empty data dir " +
	"(a new node key) and a join token")

// errForgotten is why an agent whose node the server no longer knows
// stops.
var errForgotten = errors.New("the server no longer knows this node: its database was reset, or restored from " +
	"before the node joined; its workloads were stopped, as no one pays for them. The agent serves again once the " +
	"server knows the node; to join it as a new node, move node.json out of the data dir and start the agent with a new " +
	"join token ('idlegrid token create' makes one; give it with --join-token or " + EnvJoinToken + ")")

// ForgetAfter is how long the server must say it does not know the node
// before the agent stops: long enough to ride out a server briefly pointed
// at the wrong database.
const ForgetAfter = 2 * time.Minute

// keepSession runs the server's session, if Server can hold one, until
// ctx is done or stop is called; stop returns once the session has closed.
func (a *Agent) keepSession(ctx context.Context) (stop func()) {
	ss, ok := a.srv.(SessionServer)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // owned by stop
		defer close(done)
		if err := ss.RunSession(ctx, a.models, a.log); err != nil {
			a.log.Warn("no session with the server; calls go over plain HTTP", "err", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// shutdown stops every lease and waits for the leases to be reported, for
// at most ShutdownTimeout; then it cuts off reporting and waits for the
// workloads' exits, which the runtime promises within StopGrace.
func (a *Agent) shutdown(cancelWork context.CancelFunc) {
	a.mu.Lock()
	leases := make([]*lease, 0, len(a.leases))
	for _, l := range a.leases {
		leases = append(leases, l)
	}
	a.mu.Unlock()
	if len(leases) > 0 {
		a.log.Warn("shutting down: stopping the running leases; their jobs go back to the queue, their renters pay nothing for them, "+
			"and each counts against this node's record. For maintenance, drain the node first and stop the agent once it is empty",
			"leases", len(leases), "drain", "idlegrid node drain "+a.NodeID()+" --wait")
	}
	for _, l := range leases {
		a.stopLease(l, stopByShutdown, "the node agent shut down")
	}
	a.waitForLeases(cancelWork, ShutdownTimeout)
	a.log.Info("agent stopped", "leases_stopped", len(leases))
}

// waitForLeases waits for the lease goroutines to end, for at most
// patience; then it cuts off their reporting (cancelWork) and waits for
// the rest, which the runtime's exits (or its detach) end.
func (a *Agent) waitForLeases(cancelWork context.CancelFunc, patience time.Duration) {
	done := make(chan struct{})
	go func() { // ends when the lease goroutines do, which the select below waits for
		a.leaseWG.Wait()
		close(done)
	}()
	timer := time.NewTimer(patience)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		a.log.Warn("gave up reporting leases to the server", "after", patience)
		cancelWork()
		<-done
	}
}

// heartbeatLoop tells the server the node is alive, with its leases'
// progress, until ctx is done. A failed heartbeat is retried sooner.
// A 403 says the node was retired: refuse ends the agent's loops, and with
// them its workloads. So does a 401 saying the server does not know the
// node, once it has said so for ForgetAfter.
func (a *Agent) heartbeatLoop(ctx context.Context, refuse context.CancelCauseFunc) {
	var b backoff.Backoff
	var unknownSince time.Time // since when the server has said it does not know the node
	t := time.NewTimer(a.heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		resp, err := a.srv.Heartbeat(ctx, idlegrid.HeartbeatRequest{Leases: a.progress(), Starting: a.starting(), ModelQueues: a.models.queues()})
		if err == nil { // an outage or a 429 between two such answers does not make the server know the node
			unknownSince = time.Time{}
		} else if unknownNode(err) && unknownSince.IsZero() {
			unknownSince = a.clock.Now()
		}
		var next time.Duration
		switch {
		case ctx.Err() != nil:
			return
		case idlegrid.ErrorCode(err) == idlegrid.EFORBIDDEN:
			a.log.Error("the server refuses this node; stopping", "err", err)
			refuse(fmt.Errorf("%w: %v", errRetired, err))
			return
		case unknownNode(err) && a.clock.Now().Sub(unknownSince) >= ForgetAfter:
			a.log.Error("the server no longer knows this node; stopping", "since", unknownSince, "err", err)
			refuse(fmt.Errorf("%w: %v", errForgotten, err))
			return
		case err != nil:
			next = min(b.Next(), a.heartbeatEvery)
			a.log.Warn("heartbeat failed", "retry_in", next.Round(time.Millisecond), "err", err)
		default:
			b.Reset()
			if resp != nil && resp.HeartbeatSeconds > 0 {
				a.heartbeatEvery = heartbeatInterval(resp.HeartbeatSeconds)
			}
			if resp != nil {
				a.noteStanding(resp.Standing)
				a.stopEnded(resp.Ended)
			}
			next = a.heartbeatEvery
		}
		t.Reset(next)
	}
}

// unknownNode reports whether err is the server's 401 for a node it has no
// record of.
func unknownNode(err error) bool {
	return idlegrid.ErrorCode(err) == idlegrid.EUNAUTHORIZED && strings.Contains(idlegrid.ErrorMessage(err), nodekey.UnknownWords)
}

// stopEnded stops the workloads of leases the server has ended while
// this agent ran them (it declared the node lost during an outage, say):
// no one pays for them, and their GPUs may already be another lease's.
func (a *Agent) stopEnded(ended []idlegrid.EndedLease) {
	for _, e := range ended {
		a.mu.Lock()
		l := a.leases[e.LeaseID]
		a.mu.Unlock()
		if l != nil && a.stopLease(l, stopByEnd, fmt.Sprintf("the server ended the lease (%s: %s)", e.State, e.Reason)) {
			a.log.Warn("lease ended by the server while it ran here; its workload is stopped", "lease", e.LeaseID, "state", e.State, "reason", e.Reason)
		}
	}
}

// stopOverLimit stops the workloads that have run their lease's time
// limit and LimitSlack more (lease.overLimit), on the agent's clock. The
// server asks for that stop sooner; this one is for a server the agent
// cannot reach, while the workload would keep the node's GPUs, unbilled.
func (a *Agent) stopOverLimit() {
	type due struct {
		l     *lease
		limit time.Duration
	}
	now := a.clock.Now()
	var dues []due
	a.mu.Lock()
	for _, l := range a.leases {
		if limit, over := l.overLimit(now, LimitSlack); over {
			dues = append(dues, due{l, limit})
		}
	}
	a.mu.Unlock()
	for _, d := range dues {
		if a.stopLease(d.l, stopByLimit, fmt.Sprintf("the lease reached its time limit of %s", d.limit)) {
			a.log.Warn("lease ran past its time limit without a stop from the server; its workload is stopped", "lease", d.l.id, "limit", d.limit)
		}
	}
}

// progress lists the running leases' progress and last checkpoints, with
// their ages, in lease order.
func (a *Agent) progress() []idlegrid.LeaseProgress {
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []idlegrid.LeaseProgress
	for _, l := range a.leases {
		if p, ok := l.running(now); ok {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LeaseID < out[j].LeaseID })
	return out
}

// starting lists the leases whose workloads the runtime is still starting
// (pulling the job's image, most often), so that the server waits for
// them past its start timeout, and shows how far the pull has come.
func (a *Agent) starting() []idlegrid.LeaseStarting {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []idlegrid.LeaseStarting
	for _, l := range a.leases {
		if st, ok := l.starting(); ok {
			out = append(out, st)
		}
	}
	for _, st := range a.leftStarts {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b idlegrid.LeaseStarting) int { return strings.Compare(a.LeaseID, b.LeaseID) })
	return out
}

// commandLoop long-polls the server for commands and acts on them until
// ctx is done. Commands repeat until the agent's reports make them moot;
// when a poll brings nothing new, the next waits a little so that a server
// answering at once with the same commands is not hammered.
func (a *Agent) commandLoop(ctx, workCtx context.Context) {
	var b backoff.Backoff
	for {
		began := a.clock.Now()
		cmds, err := a.srv.Commands(ctx, CommandWait)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			d := b.Next()
			a.log.Warn("polling for commands failed", "retry_in", d.Round(time.Millisecond), "err", err)
			if !backoff.Sleep(ctx, d) {
				return
			}
			continue
		}
		b.Reset()
		fresh := false
		for _, c := range cmds {
			fresh = a.handle(ctx, workCtx, c) || fresh
		}
		// A clock stepped back makes the time since began negative: the
		// wait is never more than minPoll.
		if d := minPoll - max(a.clock.Now().Sub(began), 0); !fresh && d > 0 && !backoff.Sleep(ctx, d) {
			return
		}
	}
}

// handle acts on one command and reports whether it was news.
func (a *Agent) handle(ctx, workCtx context.Context, c idlegrid.Command) bool {
	if c.Lease == nil || c.Lease.ID == "" {
		a.log.Warn("ignoring a command without a lease", "kind", c.Kind)
		return false
	}
	switch c.Kind {
	case idlegrid.CommandStart:
		return a.start(ctx, workCtx, c)
	case idlegrid.CommandStop:
		return a.stop(workCtx, c)
	}
	a.log.Warn("ignoring an unknown command; is the agent older than the server?", "kind", c.Kind, "lease", c.Lease.ID)
	return false
}

// start begins a lease it has not seen before. A start it cannot honour is
// reported as the node's failure at once.
func (a *Agent) start(ctx, workCtx context.Context, c idlegrid.Command) bool {
	id := c.Lease.ID
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, done := a.finished[id]; done || a.leases[id] != nil {
		return false
	} else if a.handing {
		a.noteLeftStart(idlegrid.LeaseStarting{LeaseID: id})
		return false
	}
	a.forgetFinished()
	if refusal := a.refusal(c); refusal != "" {
		a.finished[id] = a.clock.Now()
		a.log.Warn("cannot start lease", "lease", id, "reason", refusal)
		a.spawnReport(workCtx, id, idlegrid.LeaseReport{State: idlegrid.LeaseFailed, Fault: idlegrid.FaultProvider, Message: refusal})
		return true
	}
	l := newLease(runtime.Workload{
		LeaseID: id, JobID: c.Lease.JobID, Job: *c.Job, GPUs: append([]string(nil), c.Lease.GPUUUIDs...), LimitSeconds: c.Lease.LimitSeconds,
		NodeGPUs: len(a.gpus), RegistryAuth: c.RegistryAuth, NoNetwork: a.cfg.Sandbox.NoNetwork, Capabilities: a.cfg.Sandbox.Capabilities,
		Notice: noticeOf(c.Lease), // kept by the runtime for an agent that takes the workload back (leaseNotice)
	}, a.clock)
	l.tier, l.notice = c.Job.Tier, noticeOf(c.Lease)
	l.startAhead = true
	a.addLease(l)
	a.leaseWG.Go(func() { a.runLease(ctx, workCtx, l) })
	return true
}

// addLease makes l one of the agent's leases, after those added before
// it (lease.order). a.mu is held.
func (a *Agent) addLease(l *lease) {
	a.added++
	l.order = a.added
	a.leases[l.id] = l
}

// refusal says why the agent cannot start the command's lease, or "".
func (a *Agent) refusal(c idlegrid.Command) string {
	switch {
	case a.leaving:
		return "the node agent was stopping when the lease was placed"
	case c.Job == nil:
		return "the start command carried no job"
	case c.Lease.State == idlegrid.LeaseRunning:
		return "the node agent restarted and lost the workload"
	}
	for _, u := range c.Lease.GPUUUIDs {
		if !a.gpus[u] {
			return fmt.Sprintf("the lease holds GPU %s, which this node does not have", u)
		}
	}
	return a.policyRefusal(c)
}

// forgetFinished drops finished leases old enough that the server has
// surely stopped sending their commands. a.mu is held.
func (a *Agent) forgetFinished() {
	cutoff := a.clock.Now().Add(-finishedMemory)
	for id, at := range a.finished {
		if at.Before(cutoff) {
			delete(a.finished, id)
		}
	}
}

// stop asks a running lease's workload to stop. A lease this agent never
// started is reported cancelled, which is what the server asked for, and
// the runtime is asked to stop it all the same: a workload a previous
// agent left, not taken back (yet), must not keep its GPUs.
func (a *Agent) stop(workCtx context.Context, c idlegrid.Command) bool {
	id := c.Lease.ID
	a.mu.Lock()
	l := a.leases[id]
	_, done := a.finished[id]
	if l == nil && !done {
		a.finished[id] = a.clock.Now()
	}
	delete(a.leftStarts, id) // stopped: no longer the next agent's to start
	a.mu.Unlock()
	switch {
	case l != nil:
		if c.Lease.NoticeSeconds > 0 {
			// The command's lease says what notice it is owed, which a
			// lease taken back after a restart may not have known.
			l.setNotice(noticeOf(c.Lease))
		}
		return a.stopLease(l, stopByServer, c.Reason)
	case done:
		return false
	}
	if err := a.rt.Stop(id, StopGrace); err == nil {
		a.log.Warn("stopped a workload of a lease this agent did not know", "lease", id)
	} else if idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		a.log.Error("runtime could not stop lease", "lease", id, "err", err)
	}
	a.spawnReport(workCtx, id, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled, Message: "stopped before it started on this node"})
	return true
}

// stopLease records why l stops and asks the runtime to stop it once it has
// started. It reports whether this was the first stop of l.
func (a *Agent) stopLease(l *lease, cause stopCause, reason string) bool {
	first, now := l.requestStop(cause, reason)
	if first {
		a.log.Info("stopping lease", "lease", l.id, "reason", reason)
	}
	if now {
		if err := a.rt.Stop(l.id, l.grace()); err != nil && idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			a.log.Error("runtime could not stop lease", "lease", l.id, "err", err)
		}
	}
	return first
}

// spawnReport reports a lease the agent has no workload for.
func (a *Agent) spawnReport(workCtx context.Context, id string, r idlegrid.LeaseReport) {
	a.leaseWG.Go(func() { a.report(workCtx, id, r) })
}

// report delivers a lease report until the server takes it or answers
// definitely (a conflict means the lease has already ended: the report is
// moot).
func (a *Agent) report(ctx context.Context, id string, r idlegrid.LeaseReport) error {
	err := a.deliver(ctx, "report lease", func(ctx context.Context) error { return a.srv.ReportLease(ctx, id, r) })
	switch {
	case err == nil:
		a.log.Info("lease reported", "lease", id, "state", r.State, "fault", r.Fault, "message", r.Message)
	case definite(err):
		a.log.Info("lease report refused; the server has moved on", "lease", id, "state", r.State, "err", err)
	default:
		a.log.Warn("gave up reporting lease", "lease", id, "state", r.State, "err", err)
	}
	return err
}

// retire forgets a lease that has been run and reported. A lease whose
// end the server has not had (the agent shut down first, see shutdown)
// keeps its receipt state on disk, with its final report: its receipts,
// signed and not yet accepted, are the provider's pay, and the next agent
// sends them and the report (recoverMeters).
func (a *Agent) retire(l *lease) {
	keep := a.keepUnreported(l) || a.keepLeftRunning(l)
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.leases, l.id)
	if st, left := l.startLeft(); left { // its start command is the next agent's, or refused should the agent stop instead
		a.noteLeftStart(st)
	} else {
		a.finished[l.id] = a.clock.Now()
	}
	if !keep {
		a.forgetMeter(l.id)
	}
}

// keepLeftRunning keeps, for the next agent, the receipt state of a lease
// whose workload the runtime left running (handover.go), and reports
// whether it did.
func (a *Agent) keepLeftRunning(l *lease) bool {
	if !l.leftRunning() {
		return false
	}
	if err := l.meter.keep(); err != nil {
		a.log.Warn("could not write the lease's receipt state for the next agent; it goes on from the last one written", "lease", l.id, "err", err)
	}
	a.log.Info("left the lease's workload running for the next agent", "lease", l.id, "unsent_receipts", l.meter.unsentCount())
	return true
}

// keepUnreported keeps, for the next agent, the receipt state and final
// report of a lease whose workload has exited and whose final report did
// not reach the server, and reports whether it did.
func (a *Agent) keepUnreported(l *lease) bool {
	if l.wasReported() || !l.exited() || !l.meter.kept() {
		return false
	}
	// The last receipt is cut now, with the telemetry this agent has.
	_ = l.meter.cutDue(a.clock.Now(), a.cfg.receiptInterval(), a.key)
	r := l.final()
	if err := l.meter.keepReport(r); err != nil {
		// The state on disk is the last one written: the next agent
		// sends its receipts, and reports the workload lost.
		a.log.Warn("could not keep the lease's final report with its receipt state", "lease", l.id, "err", err)
	}
	a.log.Warn("the server has not had the lease's end; its usage receipts and final report are kept for the next start",
		"lease", l.id, "state", r.State, "unsent_receipts", l.meter.unsentCount())
	return true
}
