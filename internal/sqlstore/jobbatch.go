package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	"github.com/idlegrid/idlegrid"
)

// maxJobBatch bounds the jobs one commit stores, and jobQueueDepth the
// submissions that may wait for one; callers beyond that wait to queue.
const (
	maxJobBatch   = 256
	jobQueueDepth = 4096
)

// jobSubmissions is DB's group commit of CreateJob calls.
func (db *DB) jobSubmissions() *groupCommit[jobRow] {
	return db.jobQueue.get(maxJobBatch, jobQueueDepth, db.storeJobs)
}

// jobRow is a job ready to insert: its columns' values, in jobColumns order.
type jobRow struct {
	id, renterID, key string // key: the submission's idempotency key, or ""
	values            []any
}

func newJobRow(j *idlegrid.Job, spec string) jobRow {
	return jobRow{id: j.ID, renterID: j.RenterID, key: j.IdempotencyKey, values: []any{
		j.ID, j.RenterID, spec, string(j.State), j.Reason, j.Attempts,
		timeArg(j.CreatedAt), timeArg(j.UpdatedAt), timePtrArg(j.StartedAt), timePtrArg(j.EndedAt),
		int64(j.ChargedMicros), j.SubmittedByKey, j.IdempotencyKey, string(j.Tier),
	}}
}

// submission is a renter's idempotency key, which names one job.
type submission struct{ renterID, key string }

// errRowFailed says that a multi-row insert failed for a row that must
// then be found and failed alone.
var errRowFailed = errors.New("a row of the batch failed")

// storeJobs is the leader's commit of a batch of submissions. It first
// inserts them all with a few multi-row statements. If a row breaks such a
// statement (its renter is missing), that transaction is rolled back and a
// second one stores each job behind a savepoint of its own, so that only
// the bad one fails. A failed transaction fails every job in it, and none
// of them is stored.
func (db *DB) storeJobs(ctx context.Context, take func() []*pending[jobRow]) {
	commitBatch(ctx, db, take, db.insertJobsTogether, db.insertJobsAlone)
}

// insertJobsTogether inserts the batch with multi-row statements. A job
// whose ID or idempotency key is taken, in the store or earlier in the
// batch, is ECONFLICT and the others are stored; any other failure of a
// row is errRowFailed.
func (db *DB) insertJobsTogether(ctx context.Context, tx *sql.Tx, batch []*pending[jobRow], errs []error) error {
	var rows []jobRow
	first := map[string]int{}     // job ID → its index in batch
	keys := map[submission]bool{} // the keys of the rows taken
	for i, p := range batch {
		if _, dup := first[p.item.id]; dup {
			errs[i] = jobExists(p.item.id)
			continue
		}
		if s := (submission{p.item.renterID, p.item.key}); s.key != "" {
			if keys[s] {
				errs[i] = keyUsed(s.key)
				continue
			}
			keys[s] = true
		}
		first[p.item.id] = i
		rows = append(rows, p.item)
	}
	stored, err := insertJobRows(ctx, tx, rows)
	if err != nil {
		if db.dialect.retryable(err) {
			return err
		}
		return errRowFailed // which row and why, insertJobsAlone finds
	}
	for _, r := range rows {
		if !stored[r.id] {
			errs[first[r.id]] = notStored(r)
		}
	}
	return nil
}

// insertJobsAlone inserts each job of the batch behind a savepoint, so
// that one that fails is rolled back alone.
func (db *DB) insertJobsAlone(ctx context.Context, tx *sql.Tx, batch []*pending[jobRow], errs []error) error {
	for i, p := range batch {
		if _, err := tx.ExecContext(ctx, `SAVEPOINT job`); err != nil {
			return err
		}
		stored, err := insertJobRows(ctx, tx, []jobRow{p.item})
		switch {
		case err != nil && db.dialect.retryable(err):
			return err
		case err != nil:
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT job`); err != nil {
				return err
			}
			errs[i] = jobRowError(db.dialect.translate(err), p.item)
		case !stored[p.item.id]:
			errs[i] = notStored(p.item)
		}
		if _, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT job`); err != nil {
			return err
		}
	}
	return nil
}

// jobRowError says why one job could not be inserted.
func jobRowError(err error, r jobRow) error {
	switch {
	case isCode(err, idlegrid.ENOTFOUND):
		return notFound("account", r.renterID)
	case isCode(err, idlegrid.ECONFLICT):
		return jobExists(r.id)
	}
	return err
}

func jobExists(id string) error {
	return idlegrid.Errorf(idlegrid.ECONFLICT, "job %q already exists", id)
}

// keyUsed is CreateJob's answer for a job whose idempotency key names
// another of its renter's jobs.
func keyUsed(key string) error {
	return &idlegrid.Error{Code: idlegrid.ECONFLICT, Field: "job.idempotency_key",
		Message: "idempotency key " + strconv.Quote(key) + " names another job"}
}

// notStored says why a row the insert skipped was: its key was taken, or
// else its ID (a random ID is taken only by the same job sent twice).
func notStored(r jobRow) error {
	if r.key != "" {
		return keyUsed(r.key)
	}
	return jobExists(r.id)
}

const insertJobs = `INSERT INTO jobs (id, renter_id, spec, state, reason, attempts, created_at, updated_at,
	started_at, ended_at, charged_micros, submitted_by_key, idempotency_key, tier)`

// insertJobRows inserts rows, skipping those whose ID is taken, and
// returns the IDs it stored.
func insertJobRows(ctx context.Context, tx *sql.Tx, rows []jobRow) (map[string]bool, error) {
	stored := make(map[string]bool, len(rows))
	values := make([][]any, len(rows))
	for i, r := range rows {
		values[i] = r.values
	}
	err := writeRows(ctx, tx, insertJobs, `ON CONFLICT DO NOTHING RETURNING id`, values, func(rs *sql.Rows) error {
		var id string
		if err := rs.Scan(&id); err != nil {
			return err
		}
		stored[id] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	return stored, nil
}
