package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/idlegrid/idlegrid"
)

// CreateJob stores a new job, queued. The caller sets ID, RenterID and
// CreatedAt; UpdatedAt defaults to CreatedAt.
//
// Concurrent calls are committed together (groupcommit.go): CreateJob
// returns once the transaction that stores its job has committed, and a job
// that cannot be stored (a missing renter, a taken ID) fails alone.
func (db *DB) CreateJob(ctx context.Context, j *idlegrid.Job) error {
	if err := required("job.id", j.ID); err != nil {
		return err
	} else if err := required("job.renter_id", j.RenterID); err != nil {
		return err
	}
	spec, err := jsonArg(j.JobSpec)
	if err != nil {
		return err
	}
	if j.State == "" {
		j.State = idlegrid.JobQueued
	}
	if j.UpdatedAt.IsZero() {
		j.UpdatedAt = j.CreatedAt
	}
	return db.jobSubmissions().submit(ctx, newJobRow(j, spec))
}

const jobColumns = `id, renter_id, spec, state, reason, attempts, created_at, updated_at,
	started_at, ended_at, charged_micros, submitted_by_key, idempotency_key, resume_seconds, checkpoint_node_id,
	cancel_requested_at`

func scanJob(s scanner) (*idlegrid.Job, error) {
	var j idlegrid.Job
	var spec string
	var created, updated, started, ended, cancel sql.NullInt64
	if err := s.Scan(&j.ID, &j.RenterID, &spec, &j.State, &j.Reason, &j.Attempts,
		&created, &updated, &started, &ended, &j.ChargedMicros, &j.SubmittedByKey, &j.IdempotencyKey, &j.ResumeSeconds,
		&j.CheckpointNodeID, &cancel); err != nil {
		return nil, err
	}
	if err := jsonOf(spec, &j.JobSpec); err != nil {
		return nil, err
	}
	j.CreatedAt, j.UpdatedAt = timeOf(created), timeOf(updated)
	j.StartedAt, j.EndedAt, j.CancelRequestedAt = timePtrOf(started), timePtrOf(ended), timePtrOf(cancel)
	return &j, nil
}

// findJob reads a job; lock makes concurrent writers of the job queue.
func findJob(ctx context.Context, tx *sql.Tx, id, lock string) (*idlegrid.Job, error) {
	j, err := scanJob(tx.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("job", id)
	}
	return j, err
}

// FindJob returns the job with id.
func (db *DB) FindJob(ctx context.Context, id string) (*idlegrid.Job, error) {
	var j *idlegrid.Job
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		j, err = findJob(ctx, tx, id, "")
		return err
	})
	return j, err
}

// FindJobByIdempotencyKey returns the renter's job submitted with key.
func (db *DB) FindJobByIdempotencyKey(ctx context.Context, renterID, key string) (*idlegrid.Job, error) {
	if key == "" {
		return nil, idlegrid.Invalid("job.idempotency_key", "required")
	}
	var j *idlegrid.Job
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		j, err = scanJob(tx.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE renter_id = $1 AND idempotency_key = $2`, renterID, key))
		if errors.Is(err, sql.ErrNoRows) {
			return idlegrid.Errorf(idlegrid.ENOTFOUND, "no job of %s was submitted with idempotency key %q", renterID, key)
		}
		return err
	})
	return j, err
}

// ListJobs returns the jobs that match f, newest first unless
// f.OldestFirst.
func (db *DB) ListJobs(ctx context.Context, f idlegrid.JobFilter) ([]*idlegrid.Job, error) {
	var a args
	q := `SELECT ` + jobColumns + ` FROM jobs WHERE 1 = 1`
	if f.RenterID != "" {
		q += ` AND renter_id = ` + a.add(f.RenterID)
	}
	if len(f.States) > 0 {
		q += ` AND state IN ` + in(&a, f.States)
	}
	if len(f.Tiers) > 0 {
		q += ` AND tier IN ` + in(&a, f.Tiers)
	}
	if f.NamePrefix != "" { // substr, not LIKE: the same on both databases, case and all
		q += ` AND substr(` + db.dialect.jsonText("spec", "name") + `, 1, ` + a.add(utf8.RuneCountInString(f.NamePrefix)) + `) = ` + a.add(f.NamePrefix)
	}
	if f.Before != "" { // the page after Before's, in the same order; none if it is not a job
		q += ` AND (created_at, id) < (SELECT created_at, id FROM jobs WHERE id = ` + a.add(f.Before) + `)`
	}
	if f.After != "" { // the same, oldest first
		q += ` AND (created_at, id) > (SELECT created_at, id FROM jobs WHERE id = ` + a.add(f.After) + `)`
	}
	order := ` ORDER BY created_at DESC, id DESC`
	if f.OldestFirst {
		order = ` ORDER BY created_at, id`
	}
	q += order + ` LIMIT ` + a.add(limitOf(f.Limit))
	var out []*idlegrid.Job
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryAll(ctx, tx, scanJob, q, a...)
		return err
	})
	return out, err
}

// SetJobReason records why a queued job waits; a no-op once it is not queued.
func (db *DB) SetJobReason(ctx context.Context, jobID, reason string, at time.Time) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		j, err := findJob(ctx, tx, jobID, db.dialect.forUpdate)
		if err != nil || j.State != idlegrid.JobQueued {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE jobs SET reason = $1, updated_at = $2 WHERE id = $3`,
			reason, timeArg(at), jobID)
		return err
	})
}

// CancelQueuedJob cancels a queued job. A job that is running or over is an
// ECONFLICT: a running job is cancelled by stopping its leases.
func (db *DB) CancelQueuedJob(ctx context.Context, jobID, reason string, at time.Time) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		j, err := findJob(ctx, tx, jobID, db.dialect.forUpdate)
		if err != nil {
			return err
		} else if j.State != idlegrid.JobQueued {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "job %s is %s, not queued", jobID, j.State)
		}
		_, err = tx.ExecContext(ctx, `UPDATE jobs SET state = $1, reason = $2, updated_at = $3, ended_at = $3
			WHERE id = $4`, string(idlegrid.JobCancelled), reason, timeArg(at), jobID)
		return err
	})
}

// CancelJob records the renter's cancel of a job, in one transaction with
// what it stops. A queued job ends cancelled at once. A running one keeps
// the cancel (Job.CancelRequestedAt), so that it ends cancelled however
// its leases end, and each of its live leases is asked to stop for reason
// as RequestLeaseStop would; those leases are returned, for the caller to
// end the unstarted ones and tell the nodes. A job that has ended is
// ECONFLICT. The job is read and written under its lock, so a requeue
// that races the cancel either happened before (the job is cancelled
// queued) or sees the cancel.
func (db *DB) CancelJob(ctx context.Context, jobID, reason string, at time.Time) ([]*idlegrid.Lease, error) {
	if reason == "" {
		return nil, idlegrid.Invalid("cancel.reason", "required")
	}
	var stopping []*idlegrid.Lease
	err := db.update(ctx, func(tx *sql.Tx) error {
		// Its live leases first, then the job: the order a lease's
		// transition takes them in, so the two cannot deadlock.
		if _, err := tx.ExecContext(ctx, `SELECT id FROM leases WHERE job_id = $1 AND state IN ($2, $3) ORDER BY id`+db.dialect.forUpdate,
			jobID, string(idlegrid.LeaseAssigned), string(idlegrid.LeaseRunning)); err != nil {
			return err
		}
		j, err := findJob(ctx, tx, jobID, db.dialect.forUpdate)
		if err != nil {
			return err
		}
		switch {
		case j.State.Terminal():
			return idlegrid.Errorf(idlegrid.ECONFLICT, "job %s already %s", jobID, j.State)
		case j.State == idlegrid.JobQueued:
			stopping = nil
			_, err = tx.ExecContext(ctx, `UPDATE jobs SET state = $1, reason = $2, updated_at = $3, ended_at = $3,
				cancel_requested_at = $3 WHERE id = $4`, string(idlegrid.JobCancelled), reason, timeArg(at), jobID)
			return err
		}
		stopping, err = stopJobLeases(ctx, tx, j, reason, at)
		return err
	})
	return stopping, err
}

// stopJobLeases keeps the renter's cancel on running job j and asks each
// of its live leases to stop for reason: one with no stop yet gets it, and
// a notice gives way to it (RequestLeaseStop). It returns the live leases
// as they are then.
func stopJobLeases(ctx context.Context, tx *sql.Tx, j *idlegrid.Job, reason string, at time.Time) ([]*idlegrid.Lease, error) {
	cancelAt := at
	if j.CancelRequestedAt != nil {
		cancelAt = *j.CancelRequestedAt // the first cancel stands
	}
	if _, err := tx.ExecContext(ctx, `UPDATE jobs SET cancel_requested_at = $1, updated_at = $2 WHERE id = $3`,
		timeArg(cancelAt), timeArg(at), j.ID); err != nil {
		return nil, err
	}
	live := []any{j.ID, string(idlegrid.LeaseAssigned), string(idlegrid.LeaseRunning)}
	if _, err := tx.ExecContext(ctx, `UPDATE leases SET stop_requested = $4, notice_at = $5
		WHERE job_id = $1 AND state IN ($2, $3) AND stop_requested = ''`, append(live, reason, timeArg(at))...); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE leases SET stop_requested = $4
		WHERE job_id = $1 AND state IN ($2, $3) AND substr(stop_requested, 1, $5) = $6`,
		append(live, reason, len(idlegrid.NoticeStopPrefix), idlegrid.NoticeStopPrefix)...); err != nil {
		return nil, err
	}
	return queryLeases(ctx, tx, `SELECT `+leaseColumns+` FROM leases WHERE job_id = $1 AND state IN ($2, $3)
		ORDER BY created_at, id`, live...)
}
