package agent

import (
	"context"
	"errors"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// The hand-over upgrades the agent in place: it leaves the node's
// workloads running, with their usage receipt state, for the next agent,
// which takes them back (adopt) and goes on with each lease at the same
// attempt. Unlike a stop it tells the server nothing: the node stays
// online, and the next agent must heartbeat within the server's three
// missed heartbeats.
//
// It has two steps. While the agent's loops still run (the node
// heartbeats, and stop commands are obeyed), handOverWhenAsked takes no
// new lease (a start command waits on the server for the next agent),
// gives up the starts in flight (the next agent starts them again; a
// pull's layers stay on the node), and waits until no workload is being
// stopped, so that a bronze lease's notice and a stop's grace run out
// under this agent rather than begin again under the next; then it
// withdraws the node's models from its offer and waits until no
// inference request is in flight, so that a long stream is answered
// whole. Then the loops end, and handOff detaches the runtime: each lease
// sends the output and receipts it holds, and keeps its receipt state for
// the next agent.

// ErrHandedOver is what Run returns once it has handed the node's
// workloads over (HandOver): they run on, for the next agent.
var ErrHandedOver = errors.New("agent: handed the workloads over to the next agent")

// errHandOver ends the agent's loops for the hand-over.
var errHandOver = errors.New("handing over to the next agent")

// HandOverWait bounds how long a hand-over waits for the workloads being
// stopped to exit (a bronze lease's notice, the market's default 120 s,
// and the reports after it) and for the inference requests in flight.
// Past it, the rest are left running too, and the next agent stops them
// again, with their whole grace; the requests get at most
// handOverDrainWait more.
const HandOverWait = 3 * time.Minute

// handOffWait bounds how long, once the runtime has detached, the agent
// tries to send the leases' last output, receipts and ends: well inside
// the server's patience with a silent node, since the next agent must
// heartbeat before it runs out. What is not sent is kept for the next
// agent (receipt states and final reports), or lost (output).
const handOffWait = 5 * time.Second

// handOverPoll is how often the hand-over looks whether every workload
// being stopped has exited.
const handOverPoll = 250 * time.Millisecond

// HandOver asks a running agent to end by leaving its workloads running
// for the next agent on this node, rather than stopping them: an upgrade
// in place. Run then returns ErrHandedOver. It fails for a runtime that
// cannot leave its workloads (not a runtime.Detacher); a second call does
// nothing. The docker runtime's workloads outlive the agent's process;
// the fake runtime's do not, and only an agent in the same process can
// take them back (fake.Runtime.Successor).
func (a *Agent) HandOver() error {
	if _, ok := a.rt.(runtime.Detacher); !ok {
		return errors.New("this runtime cannot leave its workloads running for another agent; stop the agent instead (SIGTERM), which stops them")
	}
	a.handOverOnce.Do(func() { close(a.handover) })
	return nil
}

// untilHandOver returns ctx, cancelled with errHandOver if HandOver is
// called before stop: so that an agent not yet serving (its offer not
// yet published, the server out of reach) hands over at once.
func (a *Agent) untilHandOver(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() { // owned by stop
		defer close(done)
		select {
		case <-a.handover:
			cancel(errHandOver)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel(nil)
		<-done
	}
}

// handOverWhenAsked waits for HandOver, gets the leases ready to be left
// running, and ends the agent's loops (refuse) with errHandOver.
func (a *Agent) handOverWhenAsked(ctx context.Context, refuse context.CancelCauseFunc) {
	select {
	case <-ctx.Done():
		return
	case <-a.handover:
	}
	what := "no new lease is started, and the workloads being stopped exit first"
	if len(a.models.names) > 0 {
		what += "; then the node's models are withdrawn from its offer and the inference requests in flight end"
	}
	a.log.Info("handing the workloads over to the next agent: "+what, "wait_at_most", HandOverWait)
	a.mu.Lock()
	a.handing = true
	for _, l := range a.leases {
		l.leaveStart()
	}
	a.mu.Unlock()
	deadline := time.NewTimer(HandOverWait)
	defer deadline.Stop()
	poll := time.NewTicker(handOverPoll)
	defer poll.Stop()
	for !a.readyToHandOver() {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			a.log.Warn("handing over before every workload being stopped has exited, or every inference request has been answered: "+
				"the next agent stops those workloads again", "after", HandOverWait, "inference_requests", a.models.inFlight())
			refuse(errHandOver)
			return
		case <-poll.C:
		}
	}
	refuse(errHandOver)
}

// noteLeftStart records a lease whose start the hand-over leaves to the
// next agent: until the agent exits, its heartbeats name it starting, so
// that the server waits for it past its start timeout. a.mu is held.
func (a *Agent) noteLeftStart(st idlegrid.LeaseStarting) {
	if _, ok := a.leftStarts[st.LeaseID]; !ok || st.ImageBytes > 0 {
		a.leftStarts[st.LeaseID] = st
	}
}

// readyToHandOver reports whether no lease is starting, no workload is
// being stopped and no inference request is in flight. Once the leases
// have settled it withdraws the models (models.leave), so that a model
// this node alone serves is missed only while its requests drain, not
// while a workload's notice runs out.
func (a *Agent) readyToHandOver() bool {
	if !a.leasesSettled() {
		return false
	}
	a.models.leave()
	return a.models.inFlight() == 0
}

// leasesSettled reports whether no lease is starting and no workload is
// being stopped.
func (a *Agent) leasesSettled() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, l := range a.leases {
		if l.unsettled() {
			return false
		}
	}
	return true
}

// handOff detaches the runtime, so that every workload runs on, and waits
// for the leases to send what they hold, for at most handOffWait. The
// leases whose workloads exited before go on reporting as in a shutdown;
// what they cannot send in time is kept for the next agent.
func (a *Agent) handOff(cancelWork context.CancelFunc) {
	if err := a.rt.(runtime.Detacher).Detach(); err != nil {
		a.log.Error("the runtime could not leave every workload running", "err", err)
	}
	a.waitForLeases(cancelWork, handOffWait)
	a.handedOver.Store(true)
	a.log.Info("handed over: the workloads run on, for the next agent to take back; start it now")
}
