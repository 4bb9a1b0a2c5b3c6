package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/reputation"
)

// SubmitJob queues a renter's job. It is placed by the scheduler, which the
// submission wakes.
func (s *Server) SubmitJob(ctx context.Context, spec idlegrid.JobSpec) (*idlegrid.Job, error) {
	j, _, err := s.SubmitJobOnce(ctx, spec, "")
	return j, err
}

// checkTrustLevel refuses a job's least trust level above the trust
// policy's highest, which no node could ever reach.
func (s *Server) checkTrustLevel(level int) error {
	rules := s.trust.policy.Levels.Rules
	if level <= len(rules) {
		return nil
	}
	top := len(rules)
	name := reputation.NewcomerName
	if top > 0 {
		name = rules[top-1].Name
	}
	return idlegrid.Invalid("job.min_trust_level", "the trust policy's highest level is %d (%s); no node can reach %d", top, name, level)
}

// SubmitJobOnce is SubmitJob with the renter's idempotency key ("" for
// none): a submission sent again with the same key and the same spec
// answers with the job the first one made, and replayed says so; with
// another spec it is refused (ECONFLICT), since the key names a job
// already. Two renters' keys never meet.
func (s *Server) SubmitJobOnce(ctx context.Context, spec idlegrid.JobSpec, key string) (j *idlegrid.Job, replayed bool, err error) {
	c, err := requireUse(ctx, idlegrid.RoleRenter)
	if err != nil {
		return nil, false, err
	}
	now := s.Now()
	spec.Normalize()
	if err := spec.Validate(now); err != nil {
		return nil, false, err
	} else if spec.VerifiesLeaseID != "" {
		return nil, false, idlegrid.Invalid("job.verifies_lease_id", "only the market sets it, on the re-runs it makes; leave it out")
	} else if err := s.checkTrustLevel(spec.MinTrustLevel); err != nil {
		return nil, false, err
	} else if err := s.keyRoutingAllows(ctx, c, &spec); err != nil { // keyrouting.go
		return nil, false, err
	} else if key != "" {
		if err := ledger.CheckIdempotencyKey("idempotency_key", key); err != nil {
			return nil, false, err
		}
		if j, err := s.submitted(ctx, c.AccountID, key, spec); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			return j, err == nil, err
		}
	}
	j = &idlegrid.Job{
		ID: idlegrid.NewID("job"), RenterID: c.AccountID, SubmittedByKey: c.KeyID, IdempotencyKey: key, JobSpec: spec,
		State: idlegrid.JobQueued, Reason: idlegrid.MatcherPendingReason,
		CreatedAt: now, UpdatedAt: now,
	}
	if err := s.store.CreateJob(ctx, j); idlegrid.ErrorCode(err) == idlegrid.ECONFLICT && key != "" {
		j, err := s.submitted(ctx, c.AccountID, key, spec) // sent twice at once: the other was stored
		return j, err == nil, err
	} else if err != nil {
		return nil, false, err
	}
	s.Kick()
	return j, false, nil
}

// submitted returns the renter's job submitted with key, if its spec is
// spec (a requeue's checkpoint aside); ENOTFOUND when the key names no
// job, ECONFLICT when it names one of another spec.
func (s *Server) submitted(ctx context.Context, renterID, key string, spec idlegrid.JobSpec) (*idlegrid.Job, error) {
	j, err := s.findSubmission(ctx, renterID, key) // a key past its retention is freed: expiry.go
	if err != nil {
		return nil, err
	}
	if s.sameSpan(j, spec.Deadline) {
		spec.Deadline = j.Deadline
	}
	was, err := json.Marshal(j.JobSpec.Submitted())
	if err != nil {
		return nil, err
	}
	now, err := json.Marshal(spec.Submitted())
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(was, now) {
		return nil, &idlegrid.Error{Code: idlegrid.ECONFLICT, Field: "idempotency_key", Message: fmt.Sprintf(
			"idempotency key %q was used for job %s, whose spec differs; use a new key for a new job", key, j.ID)}
	}
	return j, nil
}

// sameSpan reports whether deadline, sent again with job j's key, is the
// span from now that j's deadline was when j was submitted: a client that
// reads "--deadline 2h" as a time, and sends the same command again after
// an answer that never came, sends a deadline later by the time between
// the two, give or take spanSlack.
func (s *Server) sameSpan(j *idlegrid.Job, deadline *time.Time) bool {
	if j.Deadline == nil || deadline == nil || deadline.Equal(*j.Deadline) {
		return false
	}
	later, between := deadline.Sub(*j.Deadline), s.Now().Sub(j.CreatedAt)
	return later > 0 && (later-between).Abs() <= spanSlack
}

// spanSlack is how far a deadline sent again may be from the span its
// first sending gave: the two requests' trips, and the client's clock
// against the server's between them.
const spanSlack = time.Minute

// ListJobs lists the caller's jobs; admins may list anyone's.
func (s *Server) ListJobs(ctx context.Context, f idlegrid.JobFilter) ([]*idlegrid.Job, error) {
	c, err := requireRole(ctx, idlegrid.RoleRenter, idlegrid.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if c.Role == idlegrid.RoleRenter {
		f.RenterID = c.AccountID
	}
	if err := checkLimit(f.Limit); err != nil {
		return nil, err
	} else if len(f.NamePrefix) > 100 || !idlegrid.IsText(f.NamePrefix) {
		return nil, idlegrid.Invalid("name", "the start of a job name: text of at most 100 characters")
	}
	if f.Before != "" {
		if f.OldestFirst {
			return nil, idlegrid.Invalid("before", "pages newest first; it does not go with the oldest first")
		} else if _, err := s.FindJob(ctx, f.Before); idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
			return nil, idlegrid.Invalid("before", "no job %s of yours to list from; give the last job ID of the page before", f.Before)
		} else if err != nil {
			return nil, err
		}
	}
	return s.store.ListJobs(ctx, f)
}

// FindJob returns one of the caller's jobs.
func (s *Server) FindJob(ctx context.Context, id string) (*idlegrid.Job, error) {
	c, err := requireRole(ctx, idlegrid.RoleRenter, idlegrid.RoleAdmin)
	if err != nil {
		return nil, err
	}
	j, err := s.store.FindJob(ctx, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND || (err == nil && !c.IsAdmin() && j.RenterID != c.AccountID) {
		return nil, notFound("job", id)
	}
	return j, err
}

// CancelJob cancels a job. A queued job is cancelled at once; a running one
// has its leases stopped and is cancelled when they have ended, paying for
// what ran. The store keeps the cancel with the job, in the transaction
// that stops its leases, so that nothing that ends them afterwards (a node
// lost, a provider's failure) requeues the job instead.
func (s *Server) CancelJob(ctx context.Context, id string) (*idlegrid.Job, error) {
	if _, err := requireUse(ctx); err != nil {
		return nil, err
	}
	j, err := s.FindJob(ctx, id)
	if err != nil {
		return nil, err
	}
	stopping, err := s.store.CancelJob(ctx, j.ID, idlegrid.RenterCancelReason, s.Now())
	if err != nil {
		return nil, err
	}
	if len(stopping) == 0 { // it was queued and is cancelled: the engine forgets it
		s.markJob(j.ID)
	}
	s.jobChanged(j.ID)
	if err := s.stopCancelled(ctx, stopping); err != nil {
		return nil, err
	}
	return s.store.FindJob(ctx, id)
}

// stopCancelled follows up a renter's cancel the store recorded: the
// leases it asked to stop that had not started end at once, cancelled; the
// nodes of the others are told.
func (s *Server) stopCancelled(ctx context.Context, stopping []*idlegrid.Lease) error {
	for _, l := range stopping {
		if l.State == idlegrid.LeaseAssigned {
			err := s.endLease(ctx, l, leaseEnd{to: idlegrid.LeaseCancelled, reason: idlegrid.RenterCancelReason})
			if err == nil {
				continue
			} else if idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
				return err
			}
			// The agent started it meanwhile: its node stops it like any running lease.
		}
		s.markLease(l.ID)
		s.waiters.notify(l.NodeID)
	}
	return nil
}

// stopLease ends an unstarted lease at once or asks its agent to stop. An
// unstarted lease given a bronze notice (reason begins noticePrefix) ends
// preempted, so that its job waits queued again, as a started one's does;
// any other ends cancelled.
func (s *Server) stopLease(ctx context.Context, l *idlegrid.Lease, reason string) error {
	if l.State == idlegrid.LeaseAssigned {
		to := idlegrid.LeaseCancelled
		if strings.HasPrefix(reason, noticePrefix) {
			to = idlegrid.LeasePreempted
		}
		err := s.endLease(ctx, l, leaseEnd{to: to, reason: reason})
		if idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			return err
		}
		// The agent started it meanwhile: ask it to stop like any running lease.
	}
	if l.StopRequested != "" && (!strings.HasPrefix(l.StopRequested, noticePrefix) || strings.HasPrefix(reason, noticePrefix)) {
		return nil // the first stop stands, but for a notice, which a cancel replaces
	}
	err := s.store.RequestLeaseStop(ctx, l.ID, reason, s.Now())
	if idlegrid.ErrorCode(err) == idlegrid.ECONFLICT {
		return nil // it ended on its own
	} else if err != nil {
		return err
	}
	s.markLease(l.ID)
	s.waiters.notify(l.NodeID)
	s.jobChanged(l.JobID)
	return nil
}

var liveLeaseStates = []idlegrid.LeaseState{idlegrid.LeaseAssigned, idlegrid.LeaseRunning}

// ListLeases lists leases the caller may see: a renter's own, a provider's
// nodes', or any for admins.
func (s *Server) ListLeases(ctx context.Context, f idlegrid.LeaseFilter) ([]*idlegrid.Lease, error) {
	c, err := account(ctx)
	if err != nil {
		return nil, err
	}
	switch c.Role {
	case idlegrid.RoleRenter:
		f.RenterID = c.AccountID
	case idlegrid.RoleProvider:
		f.ProviderID = c.AccountID
	}
	if err := checkLimit(f.Limit); err != nil {
		return nil, err
	}
	if f.Before != "" {
		if _, err := s.visibleLease(ctx, f.Before); idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
			return nil, idlegrid.Invalid("before", "no lease %s of yours to list from; give the last lease ID of the page before", f.Before)
		} else if err != nil {
			return nil, err
		}
	}
	ls, err := s.store.ListLeases(ctx, f)
	s.withPulls(ls...)
	return ls, err
}

// FindLease returns a lease the caller may see, with its history.
func (s *Server) FindLease(ctx context.Context, id string) (*idlegrid.Lease, []*idlegrid.LeaseEvent, error) {
	l, err := s.visibleLease(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	s.withPulls(l)
	events, err := s.store.ListLeaseEvents(ctx, id)
	return l, events, err
}

func (s *Server) visibleLease(ctx context.Context, id string) (*idlegrid.Lease, error) {
	c, err := account(ctx)
	if err != nil {
		return nil, err
	}
	l, err := s.store.FindLease(ctx, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, notFound("lease", id)
	} else if err != nil {
		return nil, err
	}
	if c.IsAdmin() || (c.Role == idlegrid.RoleRenter && l.RenterID == c.AccountID) ||
		(c.Role == idlegrid.RoleProvider && l.ProviderID == c.AccountID) {
		return l, nil
	}
	return nil, notFound("lease", id)
}

// LeaseLogs returns the lines of a lease's output f selects.
func (s *Server) LeaseLogs(ctx context.Context, f idlegrid.LogFilter) ([]idlegrid.LogLine, error) {
	if _, err := s.visibleLease(ctx, f.LeaseID); err != nil {
		return nil, err
	}
	if f.Limit == 0 {
		f.Limit = 1000
	} else if f.Limit < 0 || f.Limit > 10000 {
		return nil, idlegrid.Invalid("limit", "must be between 1 and 10000")
	}
	if f.After < 0 {
		return nil, idlegrid.Invalid("after", "must not be negative")
	}
	return s.store.ListLogs(ctx, f)
}
