package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/idlegrid/idlegrid"
)

func insertNode(ctx context.Context, tx *sql.Tx, d *dialect, n *idlegrid.Node) error {
	offer, err := jsonArg(n.Offer)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO nodes (id, provider_id, public_key, offer, state, last_heartbeat,
		agent_version, reliability, leases_completed, leases_failed, created_at, `+offerColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`,
		append([]any{n.ID, n.ProviderID, n.PublicKey, offer, string(n.State), timeArg(n.LastHeartbeat),
			n.AgentVersion, n.Reliability, n.LeasesCompleted, n.LeasesFailed, timeArg(n.CreatedAt)},
			offerValues(n.Offer)...)...)
	if isCode(d.translate(err), idlegrid.ECONFLICT) {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "node %q or its public key is already known", n.ID)
	} else if err != nil {
		return err
	}
	return setGPUModels(ctx, tx, n.ID, n.GPUs)
}

const nodeColumns = `id, provider_id, public_key, offer, state, last_heartbeat, agent_version,
	reliability, leases_completed, leases_failed, created_at, level, quarantined, draining_since`

func scanNode(s scanner) (*idlegrid.Node, error) {
	var n idlegrid.Node
	var offer string
	var heartbeat, created, draining sql.NullInt64
	if err := s.Scan(&n.ID, &n.ProviderID, &n.PublicKey, &offer, &n.State, &heartbeat, &n.AgentVersion,
		&n.Reliability, &n.LeasesCompleted, &n.LeasesFailed, &created, &n.Level, &n.Quarantined, &draining); err != nil {
		return nil, err
	}
	n.DrainingSince = timePtrOf(draining)
	if err := jsonOf(offer, &n.Offer); err != nil {
		return nil, err
	}
	n.LastHeartbeat, n.CreatedAt = timeOf(heartbeat), timeOf(created)
	return &n, nil
}

func findNode(ctx context.Context, tx *sql.Tx, id string) (*idlegrid.Node, error) {
	n, err := scanNode(tx.QueryRowContext(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("node", id)
	}
	return n, err
}

// FindNode returns the node with id.
func (db *DB) FindNode(ctx context.Context, id string) (*idlegrid.Node, error) {
	var n *idlegrid.Node
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		n, err = findNode(ctx, tx, id)
		return err
	})
	return n, err
}

// ListNodes returns the nodes that match f, oldest first.
func (db *DB) ListNodes(ctx context.Context, f idlegrid.NodeFilter) ([]*idlegrid.Node, error) {
	var a args
	q := `SELECT ` + nodeColumns + ` FROM nodes WHERE 1 = 1`
	if f.ProviderID != "" {
		q += ` AND provider_id = ` + a.add(f.ProviderID)
	}
	if len(f.States) > 0 {
		q += ` AND state IN ` + in(&a, f.States)
	}
	if f.ServesModels {
		q += ` AND serves_models = ` + a.add(true)
	}
	if f.Offered {
		q += ` AND state = ` + a.add(string(idlegrid.NodeOnline)) + ` AND quarantined = ` + a.add(false) + ` AND draining_since IS NULL`
	}
	q, err := db.nodeSearchFilter(q, &a, f)
	if err != nil {
		return nil, err
	}
	q += nodesAfter(&a, f) + nodeOrder(f)
	if f.Limit > 0 {
		q += ` LIMIT ` + a.add(f.Limit)
	}
	var out []*idlegrid.Node
	err = db.view(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryAll(ctx, tx, scanNode, q, a...)
		return err
	})
	return out, err
}

// OnlineHeartbeats returns the last heartbeat of every online node.
func (db *DB) OnlineHeartbeats(ctx context.Context) (map[string]time.Time, error) {
	return db.heartbeats(ctx, `SELECT id, last_heartbeat FROM nodes WHERE state = $1`, string(idlegrid.NodeOnline))
}

// LeavingHeartbeats returns the last heartbeat of every offline node that
// holds a live lease.
func (db *DB) LeavingHeartbeats(ctx context.Context) (map[string]time.Time, error) {
	return db.heartbeats(ctx, `SELECT id, last_heartbeat FROM nodes WHERE state = $1 AND EXISTS
		(SELECT 1 FROM leases WHERE leases.node_id = nodes.id AND leases.state IN ($2, $3))`,
		string(idlegrid.NodeOffline), string(idlegrid.LeaseAssigned), string(idlegrid.LeaseRunning))
}

// heartbeats returns the last heartbeats of the nodes q selects, by ID.
func (db *DB) heartbeats(ctx context.Context, q string, args ...any) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	err := db.view(ctx, func(tx *sql.Tx) error {
		clear(out) // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var heartbeat sql.NullInt64
			if err := rows.Scan(&id, &heartbeat); err != nil {
				return err
			}
			out[id] = timeOf(heartbeat)
		}
		return rows.Err()
	})
	return out, err
}

// UpdateOffer replaces what the node offers and marks it online at at.
// An owner's schedule (SetNodeSchedule) replaces the one in o.
func (db *DB) UpdateOffer(ctx context.Context, nodeID string, o idlegrid.Offer, agentVersion string, at time.Time) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		if _, err := lockNodeState(ctx, tx, nodeID, db.dialect.forNodeUpdate); err != nil { // the owner's schedule waits (SetNodeSchedule)
			return err
		}
		o, err := applyOwnerSchedule(ctx, tx, nodeID, o, at)
		if err != nil {
			return err
		}
		offer, err := jsonArg(o)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE nodes SET offer = $1, agent_version = $2, state = $3, last_heartbeat = $4,
			(`+offerColumns+`) = ($5, $6, $7, $8, $9, $10, $11, $12) WHERE id = $13 AND state <> $14`,
			append(append([]any{offer, agentVersion, string(idlegrid.NodeOnline), timeArg(at)}, offerValues(o)...), nodeID, string(idlegrid.NodeRetired))...)
		if err := expectOne(res, err, func() error { return notFound("node", nodeID) }); err != nil {
			return err
		}
		return setGPUModels(ctx, tx, nodeID, o.GPUs)
	})
}

// Heartbeat marks the node online at at, and returns its standing.
// Heartbeats from many nodes share their commits (writebatch.go).
func (db *DB) Heartbeat(ctx context.Context, nodeID string, at time.Time) (idlegrid.NodeStanding, error) {
	var st idlegrid.NodeStanding
	err := db.writes().submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var draining sql.NullInt64
		err := tx.QueryRowContext(ctx, `UPDATE nodes SET state = $1, last_heartbeat = $2 WHERE id = $3 AND state <> $4
			RETURNING draining_since, quarantined`, string(idlegrid.NodeOnline), timeArg(at), nodeID, string(idlegrid.NodeRetired)).Scan(&draining, &st.Quarantined)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("node", nodeID)
		}
		st.DrainingSince = timePtrOf(draining)
		return err
	})
	return st, err
}

// SetNodeState records the node's state. For an online node, at is its
// last heartbeat. For a lost one, at is the last heartbeat the caller saw:
// a node that has beaten since is not lost, and stays as it is (ECONFLICT).
// It is otherwise ignored.
func (db *DB) SetNodeState(ctx context.Context, nodeID string, s idlegrid.NodeState, at time.Time) error {
	switch s {
	case idlegrid.NodeOnline, idlegrid.NodeOffline, idlegrid.NodeLost, idlegrid.NodeRetired:
	default:
		return idlegrid.Invalid("node.state", "must be online, offline, lost or retired, got %q", s)
	}
	return db.update(ctx, func(tx *sql.Tx) error { return setNodeState(ctx, tx, nodeID, s, at) })
}

func setNodeState(ctx context.Context, tx *sql.Tx, nodeID string, s idlegrid.NodeState, at time.Time) error {
	q := `UPDATE nodes SET state = $1 WHERE id = $2`
	a := []any{string(s), nodeID}
	switch s {
	case idlegrid.NodeOnline:
		q = `UPDATE nodes SET state = $1, last_heartbeat = $3 WHERE id = $2`
		a = append(a, timeArg(at))
	case idlegrid.NodeLost:
		q += ` AND (last_heartbeat IS NULL OR last_heartbeat <= $3)`
		a = append(a, timeArg(at))
	}
	q += ` AND state <> '` + string(idlegrid.NodeRetired) + `'` // retired is final
	res, err := tx.ExecContext(ctx, q, a...)
	return expectOne(res, err, func() error { return stateNotSet(ctx, tx, nodeID, at) })
}

// stateNotSet says why setNodeState changed no node: there is none, it is
// retired, or it heartbeat after at, the last heartbeat the caller saw,
// and is not lost.
func stateNotSet(ctx context.Context, tx *sql.Tx, nodeID string, at time.Time) error {
	var beat sql.NullInt64
	var state string
	err := tx.QueryRowContext(ctx, `SELECT last_heartbeat, state FROM nodes WHERE id = $1`, nodeID).Scan(&beat, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("node", nodeID)
	} else if err != nil {
		return err
	} else if state == string(idlegrid.NodeRetired) {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "node %s is retired, for good", nodeID)
	}
	return idlegrid.Errorf(idlegrid.ECONFLICT, "node %s heartbeat at %s, after %s: it is not lost",
		nodeID, timeOf(beat).Format(time.RFC3339Nano), at.UTC().Format(time.RFC3339Nano))
}

// recordLeaseEnd updates the node's record for a lease that ended in state s
// with fault f, and its reliability with it.
func recordLeaseEnd(ctx context.Context, tx *sql.Tx, nodeID string, s idlegrid.LeaseState, f idlegrid.Fault) error {
	var completed, failed int64
	switch {
	case s == idlegrid.LeaseSucceeded, s == idlegrid.LeaseFailed && f == idlegrid.FaultWorkload:
		completed = 1
	case s == idlegrid.LeaseLost, s == idlegrid.LeaseFailed && f == idlegrid.FaultProvider:
		failed = 1
	default:
		return nil
	}
	err := tx.QueryRowContext(ctx, `UPDATE nodes SET leases_completed = leases_completed + $1,
		leases_failed = leases_failed + $2 WHERE id = $3 RETURNING leases_completed, leases_failed`,
		completed, failed, nodeID).Scan(&completed, &failed)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("node", nodeID)
	} else if err != nil {
		return err
	}
	// A node with a reputation (reputation.go) is ranked by its score.
	_, err = tx.ExecContext(ctx, `UPDATE nodes SET reliability = $1 WHERE id = $2 AND NOT EXISTS
		(SELECT 1 FROM reputations WHERE subject = 'node' AND subject_id = $2)`,
		idlegrid.ReliabilityOf(completed, failed), nodeID)
	return err
}
