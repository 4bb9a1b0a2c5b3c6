package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/idlegrid/idlegrid"
)

// PlaceJobs stores many placements in one transaction. Each is applied as
// PlaceJob applies it, behind a savepoint of its own: one that fails is
// rolled back alone, and its error is returned at its index, while the
// others commit together. A failure of the transaction itself (the commit,
// a lost connection) is returned at every index, and nothing is stored.
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
		clear(errs) // a retried transaction starts over
		var later laterRows
		for i, p := range ps {
			if errs[i] = checkPlacement(p); errs[i] != nil {
				continue
			}
			failed, err := db.placeBehindSavepoint(stmtCtx, tx, p, &later)
			if err != nil {
				return err
			}
			errs[i] = failed
		}
		return later.insert(stmtCtx, tx)
	})
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
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
	n := &idlegrid.Node{ID: id}
	err := tx.QueryRowContext(ctx, `SELECT provider_id, state FROM nodes WHERE id = $1`, id).Scan(&n.ProviderID, &n.State)
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
type laterRows struct {
	events, entries [][]any
}

type laterMark struct{ events, entries int }

func (r *laterRows) mark() laterMark { return laterMark{len(r.events), len(r.entries)} }

func (r *laterRows) undo(m laterMark) {
	clear(r.events[m.events:])
	clear(r.entries[m.entries:])
	r.events, r.entries = r.events[:m.events], r.entries[:m.entries]
}

// insert writes the rows and forgets them.
func (r *laterRows) insert(ctx context.Context, tx *sql.Tx) error {
	if err := insertRows(ctx, tx, `INSERT INTO lease_events (lease_id, seq, from_state, to_state, reason, at)`, r.events); err != nil {
		return err
	}
	if err := insertRows(ctx, tx, `INSERT INTO ledger_entries (transfer_id, idx, account, owner, amount)`, r.entries); err != nil {
		return err
	}
	r.events, r.entries = nil, nil
	return nil
}

// findPlacedJob reads what placing a job needs of it, locked: its spec is
// decoded only when a lease leaves its tier to the job's.
func findPlacedJob(ctx context.Context, tx *sql.Tx, p *idlegrid.Placement, lock string) (*idlegrid.Job, error) {
	j := &idlegrid.Job{ID: p.JobID}
	var spec string
	var started sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT renter_id, state, attempts, started_at, submitted_by_key, spec
		FROM jobs WHERE id = $1`+lock, p.JobID).Scan(&j.RenterID, &j.State, &j.Attempts, &started, &j.SubmittedByKey, &spec)
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
