package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Expiry: three things the coordinator keeps only for a while
// (docs/api.md).
//
// A job submission's Idempotency-Key is kept while its job is live and for
// jobKeyRetention after the job ends; after that the job no longer shows
// it, and a submission with it is a new one. A job waits in the queue for
// as long as it must, so a retry is never too late while the first
// submission can still run; counting from the submission, as a payment API
// would, could run the same job twice.
//
// A renter's registry login expires once it has been neither set nor
// handed to a node for registryLoginIdle: it is not handed out, not
// listed, and the sweep deletes it. A renter who keeps renting keeps its
// logins; one who left does not leave its credentials behind.
//
// A response of the Responses API that the gateway keeps for its renter
// (idlegrid.KeptResponse) is kept until its ExpiresAt, which the gateway
// sets when it keeps it, 30 days on by default: till then the renter may
// read it back or continue its conversation, and from then on it is gone,
// and the sweep deletes it, freeing the room its input and output took.
//
// All are read as expired from the moment they are due, so nothing a
// renter sees depends on when the sweep last ran; the sweep, part of every
// reaper pass, only frees the rows.
//
// The idempotency keys of money (top-ups, payouts and their settlements,
// bonds) never expire: each is a column of the ledger row it made, kept
// as long as the ledger, so a retry however late is never applied twice.

const (
	jobKeyRetention   = 24 * time.Hour
	registryLoginIdle = 90 * 24 * time.Hour
	// registryLoginTouch is how often a login in use has its use recorded:
	// the use of a login expiring in months need not be written on every
	// start.
	registryLoginTouch = 24 * time.Hour

	// A sweep changes at most expiryBatch rows a transaction and
	// expiryBatches transactions of each kind a pass; a backlog is worked
	// off over passes.
	expiryBatch   = 500
	expiryBatches = 20
)

// findSubmission returns the renter's job submitted with key, as
// FindJobByIdempotencyKey does, unless the key is past its retention: then
// it frees the key now, as the sweep would, and says ENOTFOUND, so that a
// submission with the key is a new one whether or not the sweep has run.
func (s *Server) findSubmission(ctx context.Context, renterID, key string) (*idlegrid.Job, error) {
	j, err := s.store.FindJobByIdempotencyKey(ctx, renterID, key)
	if err != nil {
		return j, err
	}
	before := s.Now().Add(-jobKeyRetention)
	if !j.State.Terminal() || j.EndedAt == nil || !j.EndedAt.Before(before) {
		return j, nil
	}
	if err := s.store.ForgetJobIdempotencyKey(ctx, renterID, key, before); err != nil {
		return nil, err
	}
	return nil, idlegrid.Errorf(idlegrid.ENOTFOUND, "idempotency key %q of job %s expired %s after the job ended", key, j.ID, jobKeyRetention)
}

// activeRegistryLogin returns the account's login to registry for a node to
// pull with now, sealed; ENOTFOUND when it keeps none, or only an idle one.
// A use more than registryLoginTouch after the last one recorded is
// recorded; a failure to record it is logged, and the login used all the
// same.
func (s *Server) activeRegistryLogin(ctx context.Context, accountID, registry string) (*idlegrid.RegistryLogin, error) {
	now := s.Now()
	l, active, err := s.store.FindActiveRegistryLogin(ctx, accountID, registry, now.Add(-registryLoginIdle))
	if err != nil {
		return nil, err
	}
	if now.Sub(active) >= registryLoginTouch {
		if err := s.store.TouchRegistryLogin(ctx, accountID, registry, now); err != nil && ctx.Err() == nil {
			s.log.Warn("a registry login's use could not be recorded", "account", accountID, "registry", registry, "err", err)
		}
	}
	return l, nil
}

// activeRegistryLogins lists the account's logins that are not idle,
// without their secrets.
func (s *Server) activeRegistryLogins(ctx context.Context, accountID string) ([]*idlegrid.RegistryLogin, error) {
	return s.store.ListActiveRegistryLogins(ctx, accountID, s.Now().Add(-registryLoginIdle))
}

// sweepExpired frees what is past its time: submissions' idempotency keys
// past their retention, idle registry logins, and kept responses past
// their ExpiresAt. It runs on every reaper pass; it takes the store's
// write lock only when something is due.
func (s *Server) sweepExpired(ctx context.Context) error {
	now := s.Now()
	keys, keysErr := sweepBatches(ctx, func(ctx context.Context) (int, error) {
		return s.store.ForgetJobIdempotencyKeys(ctx, now.Add(-jobKeyRetention), expiryBatch)
	})
	logins, loginsErr := sweepBatches(ctx, func(ctx context.Context) (int, error) {
		return s.store.DeleteIdleRegistryLogins(ctx, now.Add(-registryLoginIdle), expiryBatch)
	})
	responses, responsesErr := sweepBatches(ctx, func(ctx context.Context) (int, error) {
		return s.store.ForgetResponses(ctx, now, expiryBatch)
	})
	s.metrics.expired.WithLabelValues("job_idempotency_key").Add(float64(keys))
	s.metrics.expired.WithLabelValues("registry_login").Add(float64(logins))
	s.metrics.expired.WithLabelValues("kept_response").Add(float64(responses))
	if keysErr != nil {
		keysErr = fmt.Errorf("forget expired idempotency keys: %w", keysErr)
	}
	if loginsErr != nil {
		loginsErr = fmt.Errorf("delete idle registry logins: %w", loginsErr)
	}
	if responsesErr != nil {
		responsesErr = fmt.Errorf("forget expired kept responses: %w", responsesErr)
	}
	return errors.Join(keysErr, loginsErr, responsesErr)
}

// sweepBatches runs batch until it changes fewer than expiryBatch rows, at
// most expiryBatches times, and returns the rows changed.
func sweepBatches(ctx context.Context, batch func(context.Context) (int, error)) (int, error) {
	total := 0
	for range expiryBatches {
		n, err := batch(ctx)
		total += n
		if err != nil || n < expiryBatch {
			return total, err
		}
	}
	return total, nil
}
