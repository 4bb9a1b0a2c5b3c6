package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"

	"github.com/idlegrid/idlegrid"
)

var _ idlegrid.VerificationStore = (*DB)(nil)

// verificationColumns are the lookup columns of a verification, beside
// its body.
func verificationArgs(v *idlegrid.Verification) ([]any, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	tb, tp := "", ""
	if v.Tiebreak != nil {
		tb, tp = v.Tiebreak.JobID, v.Tiebreak.ProviderID
	}
	return []any{string(v.State), v.Rerun.JobID, v.Rerun.ProviderID, tb, tp, string(body), timeArg(v.UpdatedAt)}, nil
}

func checkVerification(v *idlegrid.Verification) error {
	switch {
	case v.ID == "" || v.RenterID == "":
		return idlegrid.Invalid("verification", "id and renter_id are required")
	case v.Original.LeaseID == "" || v.Original.ProviderID == "" || v.Original.Digest == "":
		return idlegrid.Invalid("verification.original", "the lease, its provider and its digest are required")
	case v.Rerun.JobID == "":
		return idlegrid.Invalid("verification.rerun.job_id", "required")
	case v.CreatedAt.IsZero() || v.UpdatedAt.IsZero():
		return idlegrid.Invalid("verification.created_at", "required")
	}
	return nil
}

// CreateVerification stores a new verification; a lease is verified at
// most once (ECONFLICT).
func (db *DB) CreateVerification(ctx context.Context, v *idlegrid.Verification, run *idlegrid.Job) error {
	if err := checkVerification(v); err != nil {
		return err
	}
	a, err := verificationArgs(v)
	if err != nil {
		return err
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		if err := insertRun(ctx, tx, run); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO verifications (id, renter_id, original_lease_id, original_provider,
			created_at, state, rerun_job_id, rerun_provider, tiebreak_job_id, tiebreak_provider, body, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			append([]any{v.ID, v.RenterID, v.Original.LeaseID, v.Original.ProviderID, timeArg(v.CreatedAt)}, a...)...)
		if idlegrid.ErrorCode(db.dialect.translate(err)) == idlegrid.ECONFLICT {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s is already being verified", v.Original.LeaseID)
		}
		return err
	})
}

func scanVerification(s scanner) (*idlegrid.Verification, error) {
	var body string
	if err := s.Scan(&body); err != nil {
		return nil, err
	}
	var v idlegrid.Verification
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// FindVerificationByJob returns the verification whose re-run or
// tie-break is job jobID.
func (db *DB) FindVerificationByJob(ctx context.Context, jobID string) (*idlegrid.Verification, error) {
	var v *idlegrid.Verification
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		v, err = scanVerification(tx.QueryRowContext(ctx, `SELECT body FROM verifications
			WHERE rerun_job_id = $1 OR tiebreak_job_id = $1`, jobID))
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("verification of job", jobID)
		}
		return err
	})
	return v, err
}

// UpdateVerification stores v if the stored one is still in state from.
func (db *DB) UpdateVerification(ctx context.Context, v *idlegrid.Verification, from idlegrid.VerificationState, run *idlegrid.Job) error {
	if err := checkVerification(v); err != nil {
		return err
	}
	a, err := verificationArgs(v)
	if err != nil {
		return err
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		if err := insertRun(ctx, tx, run); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE verifications SET state = $1, rerun_job_id = $2, rerun_provider = $3,
			tiebreak_job_id = $4, tiebreak_provider = $5, body = $6, updated_at = $7 WHERE id = $8 AND state = $9`,
			append(a, v.ID, string(from))...)
		if n, err := rowsAffected(res, err); err != nil {
			return err
		} else if n == 0 {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "verification %s is no longer %s", v.ID, from)
		}
		return nil
	})
}

// ListVerifications returns the verifications f selects, newest first.
func (db *DB) ListVerifications(ctx context.Context, f idlegrid.VerificationFilter) ([]*idlegrid.Verification, error) {
	var a args
	scope := verificationScope(&a, f)
	scopeArgs := slices.Clone(a)
	q := newestFirst(`SELECT body FROM verifications WHERE `+scope, &a, "verifications", "created_at", f.Before, f.Limit)
	var out []*idlegrid.Verification
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		if err := checkCursor(ctx, tx, "verifications", scope, scopeArgs, f.Before, "verification"); err != nil {
			return err
		}
		out, err = queryAll(ctx, tx, scanVerification, q, a...)
		return err
	})
	return out, err
}

// verificationScope is the condition on verifications of f's renter,
// provider and states, over a.
func verificationScope(a *args, f idlegrid.VerificationFilter) string {
	q := `1 = 1`
	if f.RenterID != "" {
		q += ` AND renter_id = ` + a.add(f.RenterID)
	}
	if f.ProviderID != "" {
		p := a.add(f.ProviderID)
		q += ` AND (original_provider = ` + p + ` OR rerun_provider = ` + p + ` OR tiebreak_provider = ` + p + `)`
	}
	if len(f.States) > 0 {
		q += ` AND state IN ` + in(a, f.States)
	}
	return q
}

// insertRun stores a verification's re-run or tie-break job, if any, in tx.
func insertRun(ctx context.Context, tx *sql.Tx, run *idlegrid.Job) error {
	if run == nil {
		return nil
	} else if err := required("job.id", run.ID); err != nil {
		return err
	}
	spec, err := jsonArg(run.JobSpec)
	if err != nil {
		return err
	}
	if run.State == "" {
		run.State = idlegrid.JobQueued
	}
	if run.UpdatedAt.IsZero() {
		run.UpdatedAt = run.CreatedAt
	}
	stored, err := insertJobRows(ctx, tx, []jobRow{newJobRow(run, spec)})
	if err != nil {
		return err
	} else if !stored[run.ID] {
		return jobExists(run.ID)
	}
	return nil
}
