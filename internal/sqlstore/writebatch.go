package sqlstore

import (
	"context"
	"database/sql"

	"github.com/idlegrid/idlegrid"
)

// Heartbeats are the store's most frequent writes: every node sends one
// every heartbeat interval (10 s), and the coordinator records each twice
// (the node's last heartbeat, its heartbeat span). Alone, each is a
// transaction of a statement or three, whose commit costs more than its
// rows: on SQLite, whose one writer they share with placements, about
// 6,000 heartbeats a second at most, the heartbeats of 60,000 nodes. So
// they go through a group commit (groupcommit.go): writes that arrive
// together share a transaction, and 64 senders record over 30,000 a
// second (BenchmarkHeartbeats).

// maxWriteBatch bounds the writes one commit holds, and writeQueueDepth
// those that may wait for one; callers beyond that wait to queue.
const (
	maxWriteBatch   = 512
	writeQueueDepth = 8192
)

// write is one caller's write, run in a transaction shared with others.
// An error of its own (an *idlegrid.Error, such as not found) is its
// caller's alone, and must leave the transaction usable.
type write func(ctx context.Context, tx *sql.Tx) error

// writes is DB's group commit of small writes.
func (db *DB) writes() *groupCommit[write] {
	return db.writeQueue.get(maxWriteBatch, writeQueueDepth, db.commitWrites)
}

// commitWrites is the leader's commit of a batch of writes, in the order
// they were queued, in one transaction. If a write fails with an error of
// the database's (a missing node's span breaks a foreign key), that
// transaction is rolled back and a second one runs each write behind a
// savepoint of its own, so that only the bad one fails (on PostgreSQL any
// failed statement spoils its transaction). A failed transaction fails
// every write in it; a retried one runs them all again.
func (db *DB) commitWrites(ctx context.Context, take func() []*pending[write]) {
	commitBatch(ctx, db, take, db.writeTogether, db.writeAlone)
}

// writeTogether runs the batch's writes one after another; a write that
// fails with the database's error is errRowFailed, unless the whole
// transaction should be retried.
func (db *DB) writeTogether(ctx context.Context, tx *sql.Tx, batch []*pending[write], errs []error) error {
	for i, p := range batch {
		switch err := p.item(ctx, tx); {
		case err == nil:
		case idlegrid.ErrorCode(err) != idlegrid.EINTERNAL:
			errs[i] = err
		case db.dialect.retryable(err):
			return err
		default:
			return errRowFailed // which write and why, writeAlone finds
		}
	}
	return nil
}

// writeAlone runs each write behind a savepoint, so that one that fails is
// rolled back alone, with its error translated.
func (db *DB) writeAlone(ctx context.Context, tx *sql.Tx, batch []*pending[write], errs []error) error {
	for i, p := range batch {
		if _, err := tx.ExecContext(ctx, `SAVEPOINT write`); err != nil {
			return err
		}
		err := p.item(ctx, tx)
		if idlegrid.ErrorCode(err) == idlegrid.EINTERNAL {
			if db.dialect.retryable(err) {
				return err
			}
			if _, rerr := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT write`); rerr != nil {
				return rerr
			}
			err = db.dialect.translate(err)
		}
		errs[i] = err
		if _, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT write`); err != nil {
			return err
		}
	}
	return nil
}
