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
		for i, p := range ps {
			if errs[i] = checkPlacement(p); errs[i] != nil {
				continue
			}
			failed, err := db.placeBehindSavepoint(stmtCtx, tx, p)
			if err != nil {
				return err
			}
			errs[i] = failed
		}
		return nil
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
func (db *DB) placeBehindSavepoint(ctx context.Context, tx *sql.Tx, p *idlegrid.Placement) (failed, err error) {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT placement`); err != nil {
		return nil, err
	}
	mark := auditMark(tx)
	if failed = db.placeJob(ctx, tx, p); failed != nil {
		if db.dialect.retryable(failed) {
			return nil, failed // a deadlock aborted the transaction: update retries it whole
		}
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT placement`); err != nil {
			return nil, err
		}
		auditUndo(tx, mark)
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
