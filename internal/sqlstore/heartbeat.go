package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/idlegrid/idlegrid"
)

var _ idlegrid.HeartbeatStore = (*DB)(nil)

// NoteHeartbeat extends the node's latest heartbeat span, or starts one.
func (db *DB) NoteHeartbeat(ctx context.Context, nodeID string, at time.Time, interval, jitter time.Duration, pruneBefore time.Time) error {
	if interval <= 0 || jitter < 0 {
		return idlegrid.Invalid("heartbeat.interval", "must be positive, with a jitter allowance of 0 or more")
	}
	return db.writes().submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var start, end sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT start_at, end_at FROM heartbeat_spans
			WHERE node_id = $1 ORDER BY start_at DESC LIMIT 1`, nodeID).Scan(&start, &end)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case !at.Before(timeOf(start)) && !at.After(timeOf(end).Add(jitter)):
			// A heartbeat out of order (before the span's end) never shortens
			// it: nor does one another server notes at once (the end is
			// compared with the row's, not with what this one read).
			newEnd := at.Add(interval).UnixMicro()
			_, err := tx.ExecContext(ctx, `UPDATE heartbeat_spans SET heartbeats = heartbeats + 1,
				end_at = CASE WHEN end_at > $1 THEN end_at ELSE $1 END
				WHERE node_id = $2 AND start_at = $3`, newEnd, nodeID, start.Int64)
			return err
		case at.Before(timeOf(start)):
			return nil // older than the latest span: it tells nothing new
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO heartbeat_spans (node_id, start_at, end_at, heartbeats)
			VALUES ($1, $2, $3, 1)`, nodeID, timeArg(at), timeArg(at.Add(interval))); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM heartbeat_spans WHERE node_id = $1 AND end_at < $2`, nodeID, timeArg(pruneBefore))
		return err
	})
}

// ListHeartbeatSpans returns the node's spans overlapping [from, to).
func (db *DB) ListHeartbeatSpans(ctx context.Context, nodeID string, from, to time.Time) ([]idlegrid.HeartbeatSpan, error) {
	var out []idlegrid.HeartbeatSpan
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, `SELECT start_at, end_at, heartbeats FROM heartbeat_spans
			WHERE node_id = $1 AND end_at > $2 AND start_at < $3 ORDER BY start_at`, nodeID, timeArg(from), timeArg(to))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var start, end sql.NullInt64
			sp := idlegrid.HeartbeatSpan{NodeID: nodeID}
			if err := rows.Scan(&start, &end, &sp.Heartbeats); err != nil {
				return err
			}
			sp.Start, sp.End = timeOf(start), timeOf(end)
			out = append(out, sp)
		}
		return rows.Err()
	})
	return out, err
}
