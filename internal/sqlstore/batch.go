package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
)

// PlaceJobs stores many placements in one transaction. Each is applied as
// PlaceJob applies it, and one that fails is rolled back alone, its error
// returned at its index, while the others commit together. A failure of
// the transaction itself (the commit, a lost connection) is returned at
// every index, and nothing is stored.
//
// The batch is first placed without savepoints. Only when a placement
// fails is the whole transaction rolled back and the batch placed again,
// each placement behind a savepoint of its own (placeBatch): placements
// seldom fail, since the engine knows what the store holds.
//
// One commit for many placements is what lets the coordinator place
// thousands of jobs a second: a commit, not a row, is the expensive part of
// a durable write.
func (db *DB) PlaceJobs(ctx context.Context, ps []*idlegrid.Placement) []error {
	errs := make([]error, len(ps))
	if len(ps) == 0 {
		return errs
	}
	// The transaction ends when ctx does; its statements need not each
	// watch ctx too, which costs the driver a goroutine per statement.
	stmtCtx := context.WithoutCancel(ctx)
	err := db.update(ctx, func(tx *sql.Tx) error {
		return db.placeBatch(stmtCtx, tx, ps, errs, false)
	})
	if errors.Is(err, errPlacedFast) {
		db.batchesRedone.Add(1)
		err = db.update(ctx, func(tx *sql.Tx) error {
			return db.placeBatch(stmtCtx, tx, ps, errs, true)
		})
	}
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// errPlacedFast ends a batch placed without savepoints at its first
// placement that fails: the transaction rolls back whole, and PlaceJobs
// places the batch again, each placement behind a savepoint.
var errPlacedFast = errors.New("a placement failed in a batch placed without savepoints")

// placeBatch applies the placements ps in tx, each one's failure in errs.
// Without savepoints (the common case, when every placement succeeds) a
// failure ends the batch with errPlacedFast, since the failed placement
// may have written part of itself; behind savepoints each failure is
// rolled back alone and the rest go on. A savepoint costs two statements,
// and SQLite copies every page a placement changes into the savepoint's
// journal first.
func (db *DB) placeBatch(ctx context.Context, tx *sql.Tx, ps []*idlegrid.Placement, errs []error, savepoints bool) error {
	clear(errs) // a retried transaction starts over
	later := laterRows{batched: !savepoints}
	if later.batched {
		var err error
		if later.read, err = readBatch(ctx, tx, db.dialect, ps); err != nil {
			return err
		}
	}
	for i, p := range ps {
		if errs[i] = checkPlacement(p); errs[i] != nil {
			continue
		}
		if !savepoints {
			if failed := db.placeJob(ctx, tx, p, &later); failed != nil {
				if db.dialect.retryable(failed) {
					return failed // update retries the transaction whole
				}
				return errPlacedFast
			}
			continue
		}
		failed, err := db.placeBehindSavepoint(ctx, tx, p, &later)
		if err != nil {
			return err
		}
		errs[i] = failed
	}
	err := later.insert(ctx, tx)
	if err != nil && later.batched && !db.dialect.retryable(err) {
		return errPlacedFast // which placement failed is found behind savepoints
	}
	return err
}

// placeBehindSavepoint applies p inside a savepoint and rolls it back if
// the placement fails. It returns the placement's failure, translated, and
// separately an error that breaks the whole transaction.
func (db *DB) placeBehindSavepoint(ctx context.Context, tx *sql.Tx, p *idlegrid.Placement, later *laterRows) (failed, err error) {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT placement`); err != nil {
		return nil, err
	}
	mark, laterMark := auditMark(tx), later.mark()
	if failed = db.placeJob(ctx, tx, p, later); failed != nil {
		if db.dialect.retryable(failed) {
			return nil, failed // a deadlock aborted the transaction: update retries it whole
		}
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT placement`); err != nil {
			return nil, err
		}
		auditUndo(tx, mark)
		later.undo(laterMark)
	}
	if _, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT placement`); err != nil {
		return nil, err
	}
	return db.dialect.translate(failed), nil
}

// findNodeState reads what a placement needs of a node, its owner and
// state, without decoding its offer.
func findNodeState(ctx context.Context, tx *sql.Tx, id string) (*idlegrid.Node, error) {
	return lockNodeState(ctx, tx, id, "")
}

// lockNodeState is findNodeState that also locks the node's row for the
// rest of the transaction (forUpdate: the dialect's forNodeUpdate), so that a read of
// the node and the write that follows (its offer, schedule, quarantine,
// drain or current fingerprint) are not raced by another transaction on
// PostgreSQL, whose write transactions see whatever committed by then.
func lockNodeState(ctx context.Context, tx *sql.Tx, id, forUpdate string) (*idlegrid.Node, error) {
	n := &idlegrid.Node{ID: id}
	err := tx.QueryRowContext(ctx, `SELECT provider_id, state FROM nodes WHERE id = $1`+forUpdate, id).Scan(&n.ProviderID, &n.State)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("node", id)
	}
	return n, err
}

// laterRows are rows of placements and postings that nothing reads back in
// their transaction and that cannot conflict: a lease's opening event, a
// transfer's entries. They wait, in memory, and a batch of placements
// inserts them together with a few multi-row statements before it commits,
// instead of one statement each. A placement rolled back behind its
// savepoint takes its rows with it (mark, undo).
//
// In a batch placed without savepoints (batched) the rows that can
// conflict wait too: leases, GPU claims, transfers, and the balances the
// transfers move, summed by account; and the jobs' updates, one statement
// for all that become the same. A conflict among them, or a balance taken
// below zero, fails the batch, which is then placed again behind
// savepoints, where each placement writes them at once and fails alone.
// A read that sums them (a spend limit's) inserts them first. Their audit
// entries wait as well, to be encoded and hashed on a goroutine of their
// own while the rows are inserted, and logged in the order they came. What
// the batch reads of its jobs, nodes and limits it reads up front
// (batchRead), and placeJob asks laterRows for it.
type laterRows struct {
	batched                   bool
	read                      *batchRead         // batched: the batch's jobs, nodes and limits, read up front
	started                   map[jobStart][]any // batched: the IDs of the jobs placed, by what they become
	leases, claims, transfers [][]any
	moves                     []balanceMove // the transfers' entries, for the balances
	audits                    []func() (audit.Entry, error)
	events, entries           [][]any
}

// job reads placement p's job, locked, from the batch's reads or the
// store.
func (r *laterRows) job(ctx context.Context, tx *sql.Tx, d *dialect, p *idlegrid.Placement) (*idlegrid.Job, error) {
	if r.batched {
		return r.read.job(ctx, tx, p)
	}
	return findPlacedJob(ctx, tx, p, d.forUpdate)
}

// node reads what a placement needs of node id, from the batch's reads or
// the store.
func (r *laterRows) node(ctx context.Context, tx *sql.Tx, id string) (*idlegrid.Node, error) {
	if r.batched {
		return r.read.node(id)
	}
	return findNodeState(ctx, tx, id)
}

// startJob writes that job j is placed at at on so many nodes: now, or
// batched, with the batch's rows.
func (r *laterRows) startJob(ctx context.Context, tx *sql.Tx, j *idlegrid.Job, nodes int, at time.Time) error {
	reason := fmt.Sprintf("running on %d node(s)", nodes)
	if r.batched {
		r.read.started(j, at)
		if r.started == nil {
			r.started = map[jobStart][]any{}
		}
		js := jobStart{reason, at}
		r.started[js] = append(r.started[js], j.ID)
		return nil
	}
	started := j.StartedAt
	if started == nil {
		started = &at
	}
	_, err := tx.ExecContext(ctx, `UPDATE jobs SET state = $1, reason = $2, attempts = attempts + 1,
		started_at = $3, updated_at = $4 WHERE id = $5`,
		string(idlegrid.JobRunning), reason, timePtrArg(started), timeArg(at), j.ID)
	return err
}

// audit logs the entry that makeEntry returns in tx, now or, batched, when
// the rows are inserted.
func (r *laterRows) audit(tx *sql.Tx, makeEntry func() (audit.Entry, error)) error {
	if r.batched {
		r.audits = append(r.audits, makeEntry)
		return nil
	}
	return appendAudit(tx)(makeEntry())
}

type laterMark struct{ events, entries int }

// mark and undo serve placements behind savepoints, which leave only
// events and entries here.
func (r *laterRows) mark() laterMark { return laterMark{len(r.events), len(r.entries)} }

func (r *laterRows) undo(m laterMark) {
	clear(r.events[m.events:])
	clear(r.entries[m.entries:])
	r.events, r.entries = r.events[:m.events], r.entries[:m.entries]
}

// insertBatched inserts the rows of a batch placed without savepoints now.
// Behind savepoints leases are written at once, and what waits must wait:
// a placement rolled back to its savepoint would take the rows of those
// before it along.
func (r *laterRows) insertBatched(ctx context.Context, tx *sql.Tx) error {
	if !r.batched {
		return nil
	}
	return r.insert(ctx, tx)
}

// insert writes the rows, parents before the rows that refer to them, moves
// the balances, logs the audit entries, and forgets them all.
func (r *laterRows) insert(ctx context.Context, tx *sql.Tx) error {
	encoded := encodeAudit(r.audits)
	r.audits = nil
	err := r.write(ctx, tx)
	rows, encodeErr := encoded()
	if err != nil {
		return err
	} else if encodeErr != nil {
		return encodeErr
	}
	addAudit(tx, rows...)
	return nil
}

// encodeAudit makes, encodes and hashes the entries of makers on a
// goroutine of its own and returns the wait for their rows.
func encodeAudit(makers []func() (audit.Entry, error)) (wait func() ([]auditEntry, error)) {
	if len(makers) == 0 {
		return func() ([]auditEntry, error) { return nil, nil }
	}
	rows := make([]auditEntry, 0, len(makers))
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, makeEntry := range makers {
			var row auditEntry
			if row, err = encodeEntry(makeEntry()); err != nil {
				return
			}
			rows = append(rows, row)
		}
	}()
	return func() ([]auditEntry, error) {
		<-done
		return rows, err
	}
}

// write inserts the rows, moves the balances and starts the jobs.
func (r *laterRows) write(ctx context.Context, tx *sql.Tx) error {
	if err := startJobs(ctx, tx, r.started); err != nil {
		return err
	}
	r.started = nil
	for _, w := range []struct {
		head string
		rows *[][]any
	}{
		{leaseInsert, &r.leases},
		{claimInsert, &r.claims},
		{`INSERT INTO lease_events (lease_id, seq, from_state, to_state, reason, at)`, &r.events},
		{transferInsert, &r.transfers},
		{`INSERT INTO ledger_entries (transfer_id, idx, account, owner, amount)`, &r.entries},
	} {
		if err := insertRows(ctx, tx, w.head, *w.rows); err != nil {
			return err
		}
		*w.rows = nil
	}
	moves := r.moves
	r.moves = nil
	return moveBalances(ctx, tx, moves)
}

// findPlacedJob reads what placing a job needs of it, locked: its spec is
// decoded only when a lease leaves its tier to the job's.
func findPlacedJob(ctx context.Context, tx *sql.Tx, p *idlegrid.Placement, lock string) (*idlegrid.Job, error) {
	j := &idlegrid.Job{ID: p.JobID}
	var spec string
	var started sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT renter_id, state, attempts, started_at, submitted_by_key, checkpoint_node_id, spec
		FROM jobs WHERE id = $1`+lock, p.JobID).Scan(&j.RenterID, &j.State, &j.Attempts, &started, &j.SubmittedByKey, &j.CheckpointNodeID, &spec)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("job", p.JobID)
	} else if err != nil {
		return nil, err
	}
	j.StartedAt = timePtrOf(started)
	for _, l := range p.Leases {
		if l.Tier == "" {
			return j, jsonOf(spec, &j.JobSpec)
		}
	}
	return j, nil
}
