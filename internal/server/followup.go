package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// This file is the outbox of what follows a lease's end. The transaction
// that ends a lease also stores a follow-up (idlegrid.FollowUp) naming it:
// its node's reputation facts, the verification its run advances, the
// conviction for a broken notice, and the stop of the rest of its gang.
// endLease does them at once and removes the follow-up when all succeeded.
// When they did not (the coordinator stopped after the commit, or a store
// call failed), the reaper does them again from the stored row once it is
// due (redoFollowUps), until they succeed. Each is safe to do twice:
// reputation facts are keyed by lease, a lease is verified once and a run
// counts only while its verification awaits it (verify.go), a conviction
// of the same offence on the same lease changes nothing (dispute.go), and
// a gang lease that ended or was asked to stop is left be.

// The kinds of follow-up: a lease's end's, a failed hardware challenge's
// conviction (attest.go), and an upheld dispute's offence hold
// (offencehold.go).
const (
	followUpLeaseEnded      = "lease_ended"
	followUpChallengeFailed = "challenge_failed"
	followUpProviderHeld    = "provider_held"
)

// followUpDelay is how long after a commit the reaper leaves its
// follow-up to the live path, which gives up after followUpTimeout.
const followUpDelay = 2 * followUpTimeout

// followUpBatch is the most follow-ups one reaper pass does.
const followUpBatch = 100

// maxFollowUpWait is the longest the reaper waits to try a failing
// follow-up again.
const maxFollowUpWait = time.Hour

// endedWork is what a lease's end leaves to do that the stored lease does
// not say, kept as the follow-up's body.
type endedWork struct {
	GPUSeconds   int64  `json:"gpu_seconds"` // charged for (noteLeaseEnded)
	OutputDigest string `json:"output_digest,omitempty"`
	// BrokeNotice: the node stopped a lease guaranteed notice without it;
	// Harm is the work the stop threw away (brokenNotice).
	BrokeNotice bool            `json:"broke_notice,omitempty"`
	Harm        idlegrid.Micros `json:"harm_micros,omitempty"`
}

// leaseFollowUp is the follow-up of lease leaseID's end at now.
func (s *Server) leaseFollowUp(leaseID string, w endedWork, now time.Time) (*idlegrid.FollowUp, error) {
	body, err := json.Marshal(w)
	if err != nil {
		return nil, err
	}
	return &idlegrid.FollowUp{ID: "lease:" + leaseID, Kind: followUpLeaseEnded, Body: string(body),
		DueAt: now.Add(followUpDelay), CreatedAt: now}, nil
}

// followLease does what follows lease l's end by t and removes the
// follow-up f when it all succeeded; otherwise the reaper does it again.
func (s *Server) followLease(ctx context.Context, f *idlegrid.FollowUp, l *idlegrid.Lease, t *idlegrid.LeaseTransition, w endedWork) {
	if completed, err := s.leaseEnded(ctx, l, t, w, f.ID); !completed { // else removed with the node's reputation
		s.followed(ctx, f, err)
	}
}

// leaseEnded does what follows the end of l by t: l as it was before, or
// as stored after. Errors are joined. The node's reputation comes last:
// its save removes the follow-up fID when it has something to save
// (completed), since what it adds is not all keyed (noteLeaseEnded).
func (s *Server) leaseEnded(ctx context.Context, l *idlegrid.Lease, t *idlegrid.LeaseTransition, w endedWork, fID string) (completed bool, err error) {
	ended := *l // as it is now, for verify.go: a provider's fault requeues a re-run
	ended.State, ended.Fault = t.To, t.Fault
	err = s.noteRun(ctx, &ended, t.To, w.OutputDigest)
	if w.BrokeNotice {
		err = errors.Join(err, s.brokenNotice(ctx, l, t.To, t.Reason, w.Harm))
	}
	if err = errors.Join(err, s.afterLeaseEnded(ctx, l, t.To, t.Fault)); err != nil {
		return false, err
	}
	return s.noteLeaseEnded(ctx, l, t, w.GPUSeconds, fID)
}

// redoFollowUps does the follow-ups that are due, a batch a pass, and
// removes each that succeeds; one that fails waits longer each time.
func (s *Server) redoFollowUps(ctx context.Context) error {
	now := s.Now()
	due, err := s.store.DueFollowUps(ctx, now, followUpBatch)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range due {
		if err := s.redo(ctx, f); err != nil {
			s.metrics.redone.WithLabelValues(f.Kind, "failed").Inc()
			errs = append(errs, fmt.Errorf("follow-up %s (try %d): %w", f.ID, f.Tries+1, err),
				s.store.DeferFollowUp(ctx, f.ID, now.Add(followUpWait(f.Tries))))
			continue
		}
		s.metrics.redone.WithLabelValues(f.Kind, "done").Inc()
		errs = append(errs, s.store.DoneFollowUp(ctx, f.ID))
	}
	return errors.Join(errs...)
}

// followUpWait is how long the reaper waits after a follow-up's tries
// failed: twice as long each time, at most maxFollowUpWait.
func followUpWait(tries int) time.Duration {
	wait := followUpDelay
	for range tries {
		if wait *= 2; wait >= maxFollowUpWait {
			return maxFollowUpWait
		}
	}
	return wait
}

// redo does follow-up f again, as the reaper found it.
func (s *Server) redo(ctx context.Context, f *idlegrid.FollowUp) error {
	ctx, cancel := followUp(ctx)
	defer cancel()
	switch f.Kind {
	case followUpLeaseEnded:
		return s.redoLeaseEnded(ctx, f)
	case followUpChallengeFailed:
		return s.redoChallengeFailed(ctx, f)
	case followUpProviderHeld:
		return s.redoProviderHeld(ctx, f)
	}
	return fmt.Errorf("unknown kind %q", f.Kind)
}

// redoLeaseEnded does again what follows a lease's end, from the stored
// lease and the follow-up's body.
func (s *Server) redoLeaseEnded(ctx context.Context, f *idlegrid.FollowUp) error {
	var w endedWork
	if err := json.Unmarshal([]byte(f.Body), &w); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	id, ok := strings.CutPrefix(f.ID, "lease:")
	if !ok {
		return errors.New("not a lease's follow-up")
	}
	l, err := s.store.FindLease(ctx, id)
	if err != nil {
		return err
	}
	if !l.State.Terminal() || l.EndedAt == nil {
		return fmt.Errorf("lease %s is %s, not ended", l.ID, l.State)
	}
	t := &idlegrid.LeaseTransition{LeaseID: l.ID, To: l.State, Fault: l.Fault, Reason: l.Reason, At: *l.EndedAt}
	s.log.Info("lease follow-up done again", "lease", l.ID, "state", l.State, "tries", f.Tries)
	_, err = s.leaseEnded(ctx, l, t, w, f.ID)
	return err
}

// challengeFollowUp is the follow-up of challenge c's failure at now: the
// conviction of its provider for fake hardware.
func challengeFollowUp(c *idlegrid.Challenge, now time.Time) *idlegrid.FollowUp {
	return &idlegrid.FollowUp{ID: "challenge:" + c.ID, Kind: followUpChallengeFailed, Body: "{}",
		DueAt: now.Add(followUpDelay), CreatedAt: now}
}

// followed removes follow-up f (nil: none) when the work it stands for
// succeeded (err nil); otherwise the reaper does it again.
func (s *Server) followed(ctx context.Context, f *idlegrid.FollowUp, err error) {
	if f == nil {
		return
	}
	if err != nil {
		s.log.Warn("follow-up left to the reaper", "follow_up", f.ID, "err", err)
		return
	}
	if err := s.store.DoneFollowUp(ctx, f.ID); err != nil {
		s.log.Error("remove follow-up", "follow_up", f.ID, "err", err)
	}
}

// redoChallengeFailed convicts again the provider of a node whose
// challenge failed, unless it was convicted of fake hardware in the
// quarantine it is in (convictedInQuarantine: one offence, one penalty;
// it says yes, too, once the quarantine was lifted).
func (s *Server) redoChallengeFailed(ctx context.Context, f *idlegrid.FollowUp) error {
	id, ok := strings.CutPrefix(f.ID, "challenge:")
	if !ok {
		return errors.New("not a challenge's follow-up")
	}
	c, err := s.store.FindChallenge(ctx, id)
	if err != nil {
		return err
	}
	if c.State != idlegrid.ChallengeFailed || s.convictedInQuarantine(ctx, c.NodeID) {
		return nil
	}
	q, err := s.store.FindQuarantine(ctx, c.NodeID)
	if err != nil {
		return err
	}
	s.log.Info("challenge follow-up done again", "challenge", c.ID, "node", c.NodeID, "tries", f.Tries)
	return s.fakeHardware(ctx, c, q.Reason)
}
