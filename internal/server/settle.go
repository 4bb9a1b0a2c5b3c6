package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
)

// endLease moves a live lease to a terminal state and settles it in the same
// transaction: the renter pays for the GPU-seconds that ran at the locked
// price (nothing when the provider is at fault), the provider is credited,
// the platform takes its fee and the rest of the hold goes back. A lease that
// already ended is an ECONFLICT and moves no money.
func (s *Server) endLease(ctx context.Context, l *idlegrid.Lease, end leaseEnd) error {
	now := s.Now()
	to, reason, fault := end.to, end.reason, end.fault
	// The charge counts the lease's receipts (see chargeableGPUSeconds);
	// none may be accepted until the lease has ended.
	release := sync.OnceFunc(s.receiptLocks.lock(l.ID))
	defer release()
	gpuSeconds, err := s.chargeableGPUSeconds(ctx, l, now)
	if err != nil {
		return err
	}
	charge, transfer := s.rules.Settle(l, gpuSeconds, fault, now)
	var transfers []*idlegrid.Transfer
	if transfer != nil {
		transfer.ID = idlegrid.NewID("tx")
		transfers = append(transfers, transfer)
	}
	t := &idlegrid.LeaseTransition{
		LeaseID: l.ID, From: []idlegrid.LeaseState{l.State}, To: to, Reason: reason,
		Fault: fault, ExitCode: end.exitCode, ChargedMicros: charge, CheckpointRef: end.checkpointRef, At: now,
	}
	// The harm of a broken notice is all the work the stop threw away,
	// charged or not.
	work := endedWork{GPUSeconds: gpuSeconds, OutputDigest: end.outputDigest, BrokeNotice: end.brokeNotice,
		Harm: idlegrid.CostOf(l.PriceMicrosPerGPUHour, l.GPUSeconds(now))}
	if t.FollowUp, err = s.leaseFollowUp(l.ID, work, now); err != nil {
		return err
	}
	if err := s.store.TransitionLease(ctx, t, transfers); err != nil {
		return err
	}
	release() // before the follow-ups, which may end other leases
	s.log.Info("lease ended", "lease", l.ID, "job", l.JobID, "node", l.NodeID, "state", to,
		"reason", reason, "charged", charge.String())
	ctx, cancel := followUp(ctx)
	defer cancel()
	s.followLease(ctx, t.FollowUp, l, t, work)
	return nil
}

// followUpTimeout bounds what follows a commit (followUp).
const followUpTimeout = time.Minute

// followUp returns the context for the work that follows a commit: the
// reputation facts, convictions and gang stops it calls for. It does not
// end with the request that made the commit, since a client that hangs up
// then must not undo them; it ends after followUpTimeout.
func followUp(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), followUpTimeout)
}

// leaseEnd is how a lease ends.
type leaseEnd struct {
	to            idlegrid.LeaseState
	reason        string
	fault         idlegrid.Fault
	exitCode      *int
	checkpointRef string
	// brokeNotice: the node stopped a lease that was guaranteed notice
	// without giving it (see stoppedEnd), an offence against its bond.
	brokeNotice bool
	// outputDigest is what a verifiable lease's node says it printed.
	outputDigest string
}

// afterLeaseEnded frees capacity for the scheduler and, when one lease of a
// multi-node job ends before the job is done, stops the rest of its gang
// (gangStop says how). Errors are logged and returned. Doing it again
// changes nothing: a lease that ended or was asked to stop is left be.
func (s *Server) afterLeaseEnded(ctx context.Context, l *idlegrid.Lease, to idlegrid.LeaseState, fault idlegrid.Fault) error {
	s.markLease(l.ID)
	s.waiters.notify(l.NodeID)
	s.jobChanged(l.JobID)
	if to == idlegrid.LeaseSucceeded {
		return nil
	}
	siblings, err := s.store.ListLeases(ctx, idlegrid.LeaseFilter{JobID: l.JobID, States: liveLeaseStates})
	if err != nil {
		s.log.Error("list gang leases", "job", l.JobID, "err", err)
		return err
	}
	why := gangStop(to, fault)
	var errs []error
	for _, sib := range siblings {
		if sib.ID == l.ID || sib.Attempt != l.Attempt {
			continue // a requeued job's new leases are not this gang
		}
		if err := s.stopLease(ctx, sib, why); err != nil {
			s.log.Error("stop gang lease", "lease", sib.ID, "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// gangStop is why the rest of a gang is stopped when one of its leases
// ends as to, through fault. A gang runs whole or not at all. When the job
// will run again, because a node failed or was lost or a lease was
// preempted, the rest is stopped as a preemption stops a lease
// (noticePrefix): each ends preempted, paid for what it ran, and the job
// is requeued as a one-node job would be (idlegrid.NextJobState). When
// the job is over (its workload failed, its renter cancelled), the rest
// ends cancelled; the job ends as the lease that ended first says (failed,
// with its reason), or cancelled when its renter cancelled it.
func gangStop(to idlegrid.LeaseState, fault idlegrid.Fault) string {
	why := "another lease of the job ended: " + string(to)
	if to == idlegrid.LeaseLost || to == idlegrid.LeasePreempted || to == idlegrid.LeaseFailed && fault == idlegrid.FaultProvider {
		return noticePrefix + why
	}
	return why
}
