package server

import (
	"context"
	"sync"

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
	if err := s.store.TransitionLease(ctx, t, transfers); err != nil {
		return err
	}
	release() // before afterLeaseEnded, which may end other leases
	s.noteLeaseEnded(ctx, l, t, gpuSeconds)
	ended := *l // as it is now, for verify.go: a provider's fault requeues a re-run
	ended.State, ended.Fault = to, fault
	s.noteRun(ctx, &ended, to, end.outputDigest)
	if end.brokeNotice {
		// The harm is all the work the stop threw away, charged or not.
		s.brokenNotice(ctx, l, end, idlegrid.CostOf(l.PriceMicrosPerGPUHour, l.GPUSeconds(now)))
	}
	s.log.Info("lease ended", "lease", l.ID, "job", l.JobID, "node", l.NodeID, "state", to,
		"reason", reason, "charged", charge.String())
	s.afterLeaseEnded(ctx, l, to)
	return nil
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
// multi-node job ends badly, stops the rest of its gang.
func (s *Server) afterLeaseEnded(ctx context.Context, l *idlegrid.Lease, to idlegrid.LeaseState) {
	s.markLease(l.ID)
	s.waiters.notify(l.NodeID)
	s.jobChanged(l.JobID)
	if to == idlegrid.LeaseSucceeded {
		return
	}
	siblings, err := s.store.ListLeases(ctx, idlegrid.LeaseFilter{JobID: l.JobID, States: liveLeaseStates})
	if err != nil {
		s.log.Error("list gang leases", "job", l.JobID, "err", err)
		return
	}
	for _, sib := range siblings {
		if sib.ID == l.ID || sib.Attempt != l.Attempt {
			continue // a requeued job's new leases are not this gang
		}
		if err := s.stopLease(ctx, sib, "another lease of the job ended: "+string(to)); err != nil {
			s.log.Error("stop gang lease", "lease", sib.ID, "err", err)
		}
	}
}
