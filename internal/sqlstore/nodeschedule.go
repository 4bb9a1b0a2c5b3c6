package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/idlegrid/idlegrid"
)

// FindNodeSchedule returns the node's schedules: the one in force, its
// owner's and its agent's.
func (db *DB) FindNodeSchedule(ctx context.Context, nodeID string) (*idlegrid.NodeSchedule, error) {
	var ns *idlegrid.NodeSchedule
	err := db.view(ctx, func(tx *sql.Tx) error {
		n, err := findNode(ctx, tx, nodeID)
		if err != nil {
			return err
		}
		ns, err = nodeSchedule(ctx, tx, n)
		return err
	})
	return ns, err
}

// SetNodeSchedule keeps owner as the schedule the node's owner chose, or
// removes it when owner is nil, and applies the schedule that results to the
// node's offer in the same transaction. It does not change the node's state.
func (db *DB) SetNodeSchedule(ctx context.Context, nodeID string, owner *idlegrid.Schedule, at time.Time) (*idlegrid.NodeSchedule, error) {
	var ns *idlegrid.NodeSchedule
	err := db.update(ctx, func(tx *sql.Tx) error {
		if _, err := lockNodeState(ctx, tx, nodeID, db.dialect.forNodeUpdate); err != nil { // the agent's new offer waits (UpdateOffer)
			return err
		}
		n, err := findNode(ctx, tx, nodeID)
		if err != nil {
			return err
		}
		cur, err := nodeSchedule(ctx, tx, n)
		if err != nil {
			return err
		}
		if owner == nil {
			_, err = tx.ExecContext(ctx, `DELETE FROM node_schedules WHERE node_id = $1`, nodeID)
		} else {
			err = putNodeSchedule(ctx, tx, nodeID, *owner, cur.Published, at)
		}
		if err != nil {
			return err
		}
		n.Schedule = idlegrid.EffectiveSchedule(cur.Published, owner, at)
		if err := setOffer(ctx, tx, n); err != nil {
			return err
		}
		ns = &idlegrid.NodeSchedule{NodeID: nodeID, Schedule: n.Schedule, Owner: owner, Published: cur.Published}
		if owner != nil {
			ns.UpdatedAt = at
		}
		return nil
	})
	return ns, err
}

// nodeSchedule reads n's owner schedule, if any. Without one, the node's
// offer holds the agent's schedule as published.
func nodeSchedule(ctx context.Context, tx *sql.Tx, n *idlegrid.Node) (*idlegrid.NodeSchedule, error) {
	ns := &idlegrid.NodeSchedule{NodeID: n.ID, Schedule: n.Schedule, Published: n.Schedule}
	var owner, published string
	var updated sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT owner, published, updated_at FROM node_schedules WHERE node_id = $1`, n.ID).
		Scan(&owner, &published, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return ns, nil
	} else if err != nil {
		return nil, err
	}
	ns.Owner = new(idlegrid.Schedule)
	if err := jsonOf(owner, ns.Owner); err != nil {
		return nil, err
	}
	ns.Published = idlegrid.Schedule{} // decode afresh: it shares slices with ns.Schedule
	if err := jsonOf(published, &ns.Published); err != nil {
		return nil, err
	}
	ns.UpdatedAt = timeOf(updated)
	return ns, nil
}

func putNodeSchedule(ctx context.Context, tx *sql.Tx, nodeID string, owner, published idlegrid.Schedule, at time.Time) error {
	o, err := jsonArg(owner)
	if err != nil {
		return err
	}
	p, err := jsonArg(published)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO node_schedules (node_id, owner, published, updated_at)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (node_id) DO UPDATE SET owner = excluded.owner, published = excluded.published,
			updated_at = excluded.updated_at`,
		nodeID, o, p, timeArg(at))
	return err
}

// applyOwnerSchedule is UpdateOffer's part: it records the schedule the
// agent publishes in o and returns o with the schedule in force instead.
func applyOwnerSchedule(ctx context.Context, tx *sql.Tx, nodeID string, o idlegrid.Offer, at time.Time) (idlegrid.Offer, error) {
	var owner string
	err := tx.QueryRowContext(ctx, `SELECT owner FROM node_schedules WHERE node_id = $1`, nodeID).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return o, nil
	} else if err != nil {
		return o, err
	}
	var s idlegrid.Schedule
	if err := jsonOf(owner, &s); err != nil {
		return o, err
	}
	p, err := jsonArg(o.Schedule)
	if err != nil {
		return o, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE node_schedules SET published = $1 WHERE node_id = $2`, p, nodeID); err != nil {
		return o, err
	}
	o.Schedule = idlegrid.EffectiveSchedule(o.Schedule, &s, at)
	return o, nil
}

// setOffer writes n's offer as it is, leaving its state alone.
func setOffer(ctx context.Context, tx *sql.Tx, n *idlegrid.Node) error {
	offer, err := jsonArg(n.Offer)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE nodes SET offer = $1, serves_models = $2 WHERE id = $3`, offer, len(n.Models) > 0, n.ID)
	return expectOne(res, err, func() error { return notFound("node", n.ID) })
}
