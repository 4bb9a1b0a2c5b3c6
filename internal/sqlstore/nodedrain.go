package sqlstore

import (
	"context"
	"database/sql"
	"time"

	"github.com/idlegrid/idlegrid"
)

// SetNodeDraining starts draining the node at since, keeping the start of a
// drain already under way, or ends it (since nil). It returns the node as
// it is then.
func (db *DB) SetNodeDraining(ctx context.Context, nodeID string, since *time.Time) (*idlegrid.Node, error) {
	var n *idlegrid.Node
	err := db.update(ctx, func(tx *sql.Tx) error {
		if _, err := lockNodeState(ctx, tx, nodeID, db.dialect.forNodeUpdate); err != nil { // two drains at once keep one start
			return err
		}
		var err error
		if n, err = findNode(ctx, tx, nodeID); err != nil {
			return err
		}
		switch {
		case since == nil:
			n.DrainingSince = nil
		case n.DrainingSince == nil:
			at := *since
			n.DrainingSince = &at
		default:
			return nil // draining already, since then
		}
		if _, err = tx.ExecContext(ctx, `UPDATE nodes SET draining_since = $1 WHERE id = $2`, timePtrArg(n.DrainingSince), nodeID); err != nil {
			return err
		}
		n, err = findNode(ctx, tx, nodeID) // as stored, to the microsecond
		return err
	})
	return n, err
}
