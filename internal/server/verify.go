package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/reputation"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// This file is verification of work. When a lease of a verifiable job
// succeeds, the trust policy's share of them (all of a node's first ones,
// until first_checks re-runs confirmed it; more for newcomers' nodes) is
// re-run as a bronze job that avoids the provider, for the same renter,
// and the output digests are compared. When they differ, a tie-break runs
// on a third provider, and whoever disagrees with the other two is
// convicted of a mismatched result. A run that fails, or three digests
// that all differ, leave the verification inconclusive: nobody is
// punished on doubtful evidence.

// noteRun looks at a lease that ended, for verification: it may start a
// verification of a verifiable lease that succeeded, and it records the
// outcome of a re-run or tie-break. An error is logged and returned, for
// the follow-up to try again (followup.go); the lease has ended either
// way. Noting the same end twice changes nothing more than once: a lease
// is verified once (CreateVerification), and a run's end counts only
// while its verification awaits that run.
func (s *Server) noteRun(ctx context.Context, l *idlegrid.Lease, to idlegrid.LeaseState, digest string) error {
	j, err := s.store.FindJob(ctx, l.JobID)
	switch {
	case err != nil:
	case j.VerifiesLeaseID != "":
		err = s.recordRun(ctx, j, l, to, digest)
	case j.Verifiable && to == idlegrid.LeaseSucceeded && digest != "":
		err = s.maybeVerify(ctx, j, l, digest)
	}
	if err != nil {
		s.log.Error("verification", "lease", l.ID, "job", l.JobID, "err", err)
	}
	return err
}

// maybeVerify samples a verifiable lease that succeeded and, when drawn,
// queues its re-run.
func (s *Server) maybeVerify(ctx context.Context, j *idlegrid.Job, l *idlegrid.Lease, digest string) error {
	n, err := s.store.FindNode(ctx, l.NodeID)
	if err != nil {
		return err
	}
	checks, err := s.firstChecks(ctx, l)
	if err != nil {
		return err
	}
	if s.draw() >= s.cfg.TrustPolicy.Verification.Fraction(n.Level, checks) {
		return nil
	}
	now := s.Now()
	rerun := s.newRun(j, l.ID, l.ProviderID)
	v := &idlegrid.Verification{
		ID: idlegrid.NewID("verif"), RenterID: j.RenterID, State: idlegrid.VerificationRerunning,
		Original:  idlegrid.Run{JobID: j.ID, LeaseID: l.ID, ProviderID: l.ProviderID, NodeID: l.NodeID, Digest: digest},
		Rerun:     idlegrid.Run{JobID: rerun.ID},
		CreatedAt: now, UpdatedAt: now,
	}
	err = s.store.CreateVerification(ctx, v, rerun)
	if idlegrid.ErrorCode(err) == idlegrid.ECONFLICT {
		return nil // it is being verified already: its end was noted before
	} else if err != nil {
		return err
	}
	s.Kick()
	s.log.Info("verification started", "verification", v.ID, "lease", l.ID, "rerun_job", rerun.ID)
	return nil
}

// firstChecks counts the verifications of the node's leases that confirmed
// its output or are still deciding: a node's verifiable leases are all
// re-run until the policy's first_checks of them stand (trustpolicy
// Verification.Fraction). A check that was inconclusive, or convicted the
// node, does not count: the next lease is checked too.
func (s *Server) firstChecks(ctx context.Context, l *idlegrid.Lease) (int, error) {
	want := s.cfg.TrustPolicy.Verification.FirstChecks
	if want == 0 {
		return 0, nil
	}
	vs, err := s.store.ListVerifications(ctx, idlegrid.VerificationFilter{ProviderID: l.ProviderID, Limit: everyRow})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range vs {
		if v.Original.NodeID != l.NodeID {
			continue
		}
		switch {
		case !v.State.Terminal(), v.State == idlegrid.VerificationMatched,
			v.State == idlegrid.VerificationConvicted && v.Tiebreak != nil && v.Tiebreak.Digest == v.Original.Digest:
			n++
		}
	}
	return n, nil
}

// newRun is a run of j's work for the same renter, as bronze (it is not
// urgent, and costs least), avoiding the providers whose output it checks,
// to be stored with its verification.
func (s *Server) newRun(j *idlegrid.Job, leaseID string, avoid ...string) *idlegrid.Job {
	spec := j.JobSpec
	spec.Tier, spec.Interruptible = idlegrid.TierBronze, true
	spec.VerifiesLeaseID, spec.CheckpointRef, spec.Deadline = leaseID, "", nil
	spec.AvoidProviders = slices.Clone(j.AvoidProviders)
	for _, p := range avoid { // a tie-break's job is the re-run's, which avoids the original's provider already
		if !slices.Contains(spec.AvoidProviders, p) {
			spec.AvoidProviders = append(spec.AvoidProviders, p)
		}
	}
	spec.Env = maps.Clone(j.Env)
	now := s.Now()
	run := &idlegrid.Job{
		ID: idlegrid.NewID("job"), RenterID: j.RenterID, SubmittedByKey: j.SubmittedByKey, JobSpec: spec,
		State: idlegrid.JobQueued, Reason: "a verification re-run of lease " + leaseID + ", " + idlegrid.MatcherPendingReason,
		CreatedAt: now, UpdatedAt: now,
	}
	return run
}

// recordRun records how a re-run or tie-break lease ended, and decides.
// A run that was preempted or lost is requeued by the market, so only a
// success, a workload failure or a cancellation settles it.
func (s *Server) recordRun(ctx context.Context, j *idlegrid.Job, l *idlegrid.Lease, to idlegrid.LeaseState, digest string) error {
	v, err := s.store.FindVerificationByJob(ctx, j.ID)
	if err != nil || !awaits(v, j.ID) {
		return err
	}
	from := v.State
	run := idlegrid.Run{JobID: j.ID, LeaseID: l.ID, ProviderID: l.ProviderID, NodeID: l.NodeID, Digest: digest}
	switch to {
	case idlegrid.LeaseSucceeded:
		if digest == "" {
			v.State = idlegrid.VerificationInconclusive
			v.Outcome = fmt.Sprintf("node %s ran lease %s but reported no output digest", l.NodeID, l.ID)
			return s.saveVerification(ctx, v, from)
		}
	case idlegrid.LeaseCancelled, idlegrid.LeaseFailed:
		if to == idlegrid.LeaseFailed && l.Fault == idlegrid.FaultProvider {
			return nil // the job is requeued: another node will run it
		}
		v.State = idlegrid.VerificationInconclusive
		v.Outcome = fmt.Sprintf("the run on lease %s did not succeed (%s), so nothing can be compared", l.ID, to)
		return s.saveVerification(ctx, v, from)
	default:
		return nil
	}
	if from == idlegrid.VerificationRerunning {
		v.Rerun = run
		return s.compareRerun(ctx, j, v)
	}
	v.Tiebreak = &run
	return s.breakTie(ctx, v)
}

// rerunPatience is how long a verification waits for a run of its that no
// node has taken: a re-run or tie-break still queued that long (no other
// provider's node fits it, say the one region the renter asked for) is
// cancelled and the verification left inconclusive, so that a check that
// cannot happen neither stands for one (firstChecks) nor holds the
// provider's bond (ReleaseBond) for ever.
const rerunPatience = 24 * time.Hour

// closeStalledVerifications leaves inconclusive each verification whose
// awaited run's job was cancelled or failed (its renter cancelled it while
// it was queued: no lease's end tells recordRun), or waited queued past
// rerunPatience, which it cancels. The reaper calls it, so that a
// verification is closed however its run's job ended, a crash between
// the cancel and this notwithstanding.
func (s *Server) closeStalledVerifications(ctx context.Context) error {
	vs, err := s.store.ListVerifications(ctx, idlegrid.VerificationFilter{Limit: everyRow,
		States: []idlegrid.VerificationState{idlegrid.VerificationRerunning, idlegrid.VerificationTiebreaking}})
	if err != nil {
		return err
	}
	var errs []error
	for _, v := range vs {
		if err := s.closeIfStalled(ctx, v); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT { // a conflict: it moved on meanwhile
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// closeIfStalled leaves v inconclusive when the job of the run it awaits
// was cancelled or failed, or has waited queued past rerunPatience, which
// it cancels first. A run whose job failed or was cancelled can decide
// nothing else (recordRun leaves those inconclusive too); one that
// succeeded is recordRun's to compare.
func (s *Server) closeIfStalled(ctx context.Context, v *idlegrid.Verification) error {
	jobID := v.Rerun.JobID
	if v.State == idlegrid.VerificationTiebreaking && v.Tiebreak != nil {
		jobID = v.Tiebreak.JobID
	}
	j, err := s.store.FindJob(ctx, jobID)
	if err != nil {
		return err
	}
	now := s.Now()
	switch {
	case j.State == idlegrid.JobQueued && now.Sub(j.CreatedAt) >= rerunPatience:
		why := fmt.Sprintf("no other provider's node took it within %s", rerunPatience)
		if err := s.store.CancelQueuedJob(ctx, j.ID, "a verification run: "+why, now); err != nil {
			return err
		}
		s.markJob(j.ID)
		s.jobChanged(j.ID)
		v.Outcome = fmt.Sprintf("the run %s could not happen: %s, so nothing can be compared", j.ID, why)
	case j.State == idlegrid.JobCancelled, j.State == idlegrid.JobFailed:
		v.Outcome = fmt.Sprintf("the run %s ended %s (%s), so nothing can be compared", j.ID, j.State, j.Reason)
	default:
		return nil
	}
	from := v.State
	v.State = idlegrid.VerificationInconclusive
	return s.saveVerification(ctx, v, from)
}

// awaits reports whether v is waiting for the outcome of job jobID: its
// re-run while it re-runs, its tie-break while it breaks a tie. A re-run
// whose end was noted already moved v on, so noting it again does nothing.
func awaits(v *idlegrid.Verification, jobID string) bool {
	switch v.State {
	case idlegrid.VerificationRerunning:
		return v.Rerun.JobID == jobID
	case idlegrid.VerificationTiebreaking:
		return v.Tiebreak != nil && v.Tiebreak.JobID == jobID
	}
	return false
}

// compareRerun decides on a re-run: a match settles it; a mismatch queues
// a tie-break on a third provider.
func (s *Server) compareRerun(ctx context.Context, j *idlegrid.Job, v *idlegrid.Verification) error {
	if v.Rerun.Digest == v.Original.Digest {
		v.State = idlegrid.VerificationMatched
		v.Outcome = fmt.Sprintf("the re-run on %s printed the same output (%s)", v.Rerun.NodeID, v.Rerun.Digest)
		return s.saveVerification(ctx, v, idlegrid.VerificationRerunning)
	}
	tb := s.newRun(j, v.Original.LeaseID, v.Original.ProviderID, v.Rerun.ProviderID)
	v.State, v.Tiebreak = idlegrid.VerificationTiebreaking, &idlegrid.Run{JobID: tb.ID}
	v.Outcome = fmt.Sprintf("the re-run printed %s, the original %s: a third provider breaks the tie",
		orDefault(v.Rerun.Digest, "no digest"), v.Original.Digest)
	if err := s.saveVerificationWith(ctx, v, idlegrid.VerificationRerunning, tb); err != nil {
		return err
	}
	s.Kick()
	return nil
}

// breakTie decides on a tie-break: the provider whose digest the other
// two runs contradict is convicted.
func (s *Server) breakTie(ctx context.Context, v *idlegrid.Verification) error {
	odd, agree := oddOneOut(v)
	if odd == nil {
		v.State = idlegrid.VerificationInconclusive
		v.Outcome = "all three runs printed different output: the job may not be deterministic; nobody is convicted"
		return s.saveVerification(ctx, v, idlegrid.VerificationTiebreaking)
	}
	v.State = idlegrid.VerificationConvicted
	v.Outcome = fmt.Sprintf("lease %s printed %s; leases %s and %s both printed %s",
		odd.LeaseID, orDefault(odd.Digest, "no digest"), agree[0].LeaseID, agree[1].LeaseID, agree[0].Digest)
	l, err := s.store.FindLease(ctx, odd.LeaseID)
	if err != nil {
		return err
	}
	// The conviction first, then the verification that names it: a crash
	// between them leaves the penalty taken and the verification still
	// deciding, never a conviction that took nothing. The lease's
	// follow-up decides again, and the second conviction changes nothing.
	d, err := s.tryConvict(ctx, offence{
		kind: trustpolicy.OffenceMismatchedResult, providerID: odd.ProviderID, nodeID: odd.NodeID, leaseID: odd.LeaseID,
		renterID: v.RenterID, harm: l.ChargedMicros, evidence: "verification " + v.ID + ": " + v.Outcome, detail: v,
	})
	if err != nil {
		return err
	}
	if d != nil {
		v.DisputeID = d.ID
	}
	if err := s.failedByVerification(ctx, v, odd, l); err != nil {
		return err
	}
	return s.saveVerification(ctx, v, idlegrid.VerificationTiebreaking)
}

// failedByVerification records, in the reputation of the node whose
// output the verification v proved wrong, its lease l as failed by the
// node: a made-up result is work not done, whatever the lease reported.
// A lease that succeeded has its completion taken back at its end
// (FactLeaseDisproved), so that it counts once, as a failure; any other
// counts a failure now. The fact is keyed by the verification, so a
// decision taken again records it once.
func (s *Server) failedByVerification(ctx context.Context, v *idlegrid.Verification, odd *idlegrid.Run, l *idlegrid.Lease) error {
	fact := reputation.Fact{Kind: reputation.FactLeaseFailed, At: s.Now()}
	if l.State == idlegrid.LeaseSucceeded && l.EndedAt != nil {
		fact = reputation.Fact{Kind: reputation.FactLeaseDisproved, At: *l.EndedAt}
	}
	f := storedFact(odd.NodeID, "verification:"+v.ID, odd.LeaseID, fact, 1)
	err := s.recordFacts(ctx, odd.NodeID, []idlegrid.ReputationFact{f}, standingDelta{})
	if idlegrid.ErrorCode(err) == idlegrid.ECONFLICT {
		return nil // recorded when the tie was broken before
	}
	return err
}

// oddOneOut returns the run whose digest the other two share, and those
// two; nil when no two runs agree.
func oddOneOut(v *idlegrid.Verification) (*idlegrid.Run, [2]*idlegrid.Run) {
	o, r, t := &v.Original, &v.Rerun, v.Tiebreak
	switch {
	case t.Digest != "" && t.Digest == o.Digest && r.Digest != o.Digest:
		return r, [2]*idlegrid.Run{o, t}
	case t.Digest != "" && t.Digest == r.Digest && o.Digest != r.Digest:
		return o, [2]*idlegrid.Run{r, t}
	}
	return nil, [2]*idlegrid.Run{}
}

func (s *Server) saveVerification(ctx context.Context, v *idlegrid.Verification, from idlegrid.VerificationState) error {
	return s.saveVerificationWith(ctx, v, from, nil)
}

// saveVerificationWith saves v and stores run, its tie-break, with it.
func (s *Server) saveVerificationWith(ctx context.Context, v *idlegrid.Verification, from idlegrid.VerificationState, run *idlegrid.Job) error {
	v.UpdatedAt = s.Now()
	if err := s.store.UpdateVerification(ctx, v, from, run); err != nil {
		return err
	}
	s.log.Info("verification", "verification", v.ID, "state", v.State, "outcome", v.Outcome)
	return nil
}

// draw is a uniform draw in [0, 1) for sampling.
func (s *Server) draw() float64 { return s.cfg.Sample() }

// ListVerifications lists verifications, newest first: a renter's own,
// those touching a provider's runs, or all for admins; a page at a time
// after f.Before, which must be one of them.
func (s *Server) ListVerifications(ctx context.Context, f idlegrid.VerificationFilter) ([]*idlegrid.Verification, error) {
	c, err := account(ctx)
	if err != nil {
		return nil, err
	}
	if f.ProviderID, err = ownProvider(c, f.ProviderID); err != nil {
		return nil, err
	}
	if c.Role == idlegrid.RoleRenter {
		f.RenterID = c.AccountID
	}
	if err := checkLimit(f.Limit); err != nil {
		return nil, err
	}
	vs, err := s.store.ListVerifications(ctx, f)
	if err != nil || c.Role != idlegrid.RoleProvider {
		return vs, err
	}
	for _, v := range vs {
		hideRunsUnderway(v)
	}
	return vs, nil
}

// hideRunsUnderway leaves out, for a provider, the job of each run of v
// not yet ended: the original's provider, which sees its verification,
// could otherwise tell a partner which job on the partner's node is the
// check of its work, and what to answer.
func hideRunsUnderway(v *idlegrid.Verification) {
	if v.Rerun.LeaseID == "" {
		v.Rerun.JobID = ""
	}
	if v.Tiebreak != nil && v.Tiebreak.LeaseID == "" {
		v.Tiebreak.JobID = ""
	}
}
