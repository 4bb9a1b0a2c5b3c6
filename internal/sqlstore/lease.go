package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
)

// PlaceJob stores a placement in one transaction: the job, still queued at
// p.Attempt, becomes running; each lease is inserted with a claim on each of
// its GPUs and an opening event; the holds are posted. A job that moved on or
// a GPU already claimed is ECONFLICT, a hold beyond the renter's balance or
// beyond a spend limit of the account or of the key that submitted the job
// EPAYMENT; either way nothing is written.
func (db *DB) PlaceJob(ctx context.Context, p *idlegrid.Placement) error {
	if err := checkPlacement(p); err != nil {
		return err
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		var later laterRows
		if err := db.placeJob(ctx, tx, p, &later); err != nil {
			return err
		}
		return later.insert(ctx, tx)
	})
}

// checkPlacement refuses a placement that could never be stored.
func checkPlacement(p *idlegrid.Placement) error {
	if err := required("placement.job_id", p.JobID); err != nil {
		return err
	} else if len(p.Leases) == 0 {
		return idlegrid.Invalid("placement.leases", "a placement needs at least one lease")
	} else if p.At.IsZero() {
		return idlegrid.Invalid("placement.at", "required")
	}
	return nil
}

// placeJob is PlaceJob inside tx; PlaceJobs runs it once per placement.
// The rows nothing reads back in the transaction go to later, which the
// caller inserts before it commits.
func (db *DB) placeJob(ctx context.Context, tx *sql.Tx, p *idlegrid.Placement, later *laterRows) error {
	j, err := later.job(ctx, tx, db.dialect, p)
	if err != nil {
		return err
	} else if j.State != idlegrid.JobQueued || j.Attempts != p.Attempt {
		err := idlegrid.Errorf(idlegrid.ECONFLICT, "job %s moved on: %s at attempt %d, placement was for queued at attempt %d",
			j.ID, j.State, j.Attempts, p.Attempt)
		err.Field = idlegrid.FieldPlacementAttempt
		return err
	}
	if err := checkSpendLimits(ctx, tx, db.dialect, j, placementHold(p), p.At, later); err != nil {
		return err
	}
	for i, l := range p.Leases {
		if err := db.insertLease(ctx, tx, j, p, l, later); err != nil {
			return fmt.Errorf("lease %d: %w", i, err)
		}
	}
	for _, t := range p.Transfers {
		if t.CreatedAt.IsZero() {
			t.CreatedAt = p.At
		}
	}
	if err := postTransfersLater(ctx, tx, p.Transfers, later); err != nil {
		return err
	}
	if err := leaveCheckpoint(ctx, tx, j, p); err != nil {
		return err
	}
	return later.startJob(ctx, tx, j, len(p.Leases), p.At)
}

// leaveCheckpoint forgets the run a job's checkpoint holds when the job is
// placed on another node than the one that keeps the checkpoint: there it
// starts over.
func leaveCheckpoint(ctx context.Context, tx *sql.Tx, j *idlegrid.Job, p *idlegrid.Placement) error {
	if j.CheckpointNodeID == "" || slices.ContainsFunc(p.Leases, func(l *idlegrid.Lease) bool { return l.NodeID == j.CheckpointNodeID }) {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE jobs SET resume_seconds = 0, checkpoint_node_id = '' WHERE id = $1`, j.ID)
	return err
}

// placementHold is what a placement escrows in all.
func placementHold(p *idlegrid.Placement) idlegrid.Micros {
	var hold idlegrid.Micros
	for _, l := range p.Leases {
		hold += l.HoldMicros
	}
	return hold
}

// insertLease checks l against its job and placement, fills in what the
// store knows, and inserts it with its GPU claims and its opening event.
func (db *DB) insertLease(ctx context.Context, tx *sql.Tx, j *idlegrid.Job, p *idlegrid.Placement, l *idlegrid.Lease, later *laterRows) error {
	if err := checkLease(j, p, l); err != nil {
		return err
	}
	n, err := later.node(ctx, tx, l.NodeID)
	if err != nil {
		return err
	} else if n.State != idlegrid.NodeOnline {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "node %s is %s, not online", n.ID, n.State)
	} else if l.ProviderID != "" && l.ProviderID != n.ProviderID {
		return idlegrid.Invalid("lease.provider_id", "node %s belongs to %s, not %s", n.ID, n.ProviderID, l.ProviderID)
	}
	l.JobID, l.RenterID, l.ProviderID, l.Attempt = j.ID, j.RenterID, n.ProviderID, p.Attempt+1
	if l.State == "" {
		l.State = idlegrid.LeaseAssigned
	}
	if l.Tier == "" {
		l.Tier = j.Tier
	}
	if l.CreatedAt.IsZero() {
		l.CreatedAt = p.At
	}
	row, err := leaseRow(l)
	if err != nil {
		return err
	}
	claims := make([][]any, len(l.GPUUUIDs))
	for i, gpu := range l.GPUUUIDs {
		claims[i] = []any{l.NodeID, gpu, l.ID}
	}
	if later.batched {
		later.leases, later.claims = append(later.leases, row), append(later.claims, claims...)
	} else if err := db.insertLeaseNow(ctx, tx, l, row, claims); err != nil {
		return err
	}
	later.events = append(later.events, []any{l.ID, 1, "", string(l.State), l.Reason, timeArg(l.CreatedAt)})
	return later.audit(tx, func() (audit.Entry, error) {
		return audit.LeaseEntry(l, idlegrid.LeaseEvent{LeaseID: l.ID, To: l.State, Reason: l.Reason, At: l.CreatedAt})
	})
}

const (
	leaseInsert = `INSERT INTO leases (id, job_id, renter_id, node_id, provider_id, attempt, gpu_uuids, tier,
		price_micros, price_note, limit_seconds, hold_micros, charged_micros, state, reason, fault,
		stop_requested, exit_code, progress, created_at, started_at, ended_at, events, log_lines,
		notice_seconds, checkpoint_ref, start_by)`
	claimInsert = `INSERT INTO gpu_claims (node_id, gpu_uuid, lease_id)`
)

// leaseRow is a new lease's row for leaseInsert: its first event is the
// one it opens with, and it has no log lines yet.
func leaseRow(l *idlegrid.Lease) ([]any, error) {
	gpus, err := jsonArg(l.GPUUUIDs)
	if err != nil {
		return nil, err
	}
	return []any{l.ID, l.JobID, l.RenterID, l.NodeID, l.ProviderID, l.Attempt, gpus, string(l.Tier),
		int64(l.PriceMicrosPerGPUHour), l.PriceNote, l.LimitSeconds, int64(l.HoldMicros), int64(l.ChargedMicros),
		string(l.State), l.Reason, string(l.Fault), l.StopRequested, exitCodeArg(l.ExitCode), l.Progress,
		timeArg(l.CreatedAt), timePtrArg(l.StartedAt), timePtrArg(l.EndedAt), 1, 0, l.NoticeSeconds, l.CheckpointRef, timePtrArg(l.StartBy)}, nil
}

// insertLeaseNow inserts lease l's row and its GPU claims, and says which
// conflicted.
func (db *DB) insertLeaseNow(ctx context.Context, tx *sql.Tx, l *idlegrid.Lease, row []any, claims [][]any) error {
	err := insertRows(ctx, tx, leaseInsert, [][]any{row})
	if isCode(db.dialect.translate(err), idlegrid.ECONFLICT) {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %q already exists", l.ID)
	} else if err != nil {
		return err
	}
	err = insertRows(ctx, tx, claimInsert, claims)
	if isCode(db.dialect.translate(err), idlegrid.ECONFLICT) {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "GPU %s on node %s is already claimed",
			strings.Join(l.GPUUUIDs, ", "), l.NodeID)
	}
	return err
}

func checkLease(j *idlegrid.Job, p *idlegrid.Placement, l *idlegrid.Lease) error {
	switch {
	case l.ID == "":
		return idlegrid.Invalid("lease.id", "required")
	case l.NodeID == "":
		return idlegrid.Invalid("lease.node_id", "required")
	case len(l.GPUUUIDs) == 0:
		return idlegrid.Invalid("lease.gpu_uuids", "a lease needs at least one GPU")
	case l.JobID != "" && l.JobID != j.ID:
		return idlegrid.Invalid("lease.job_id", "is %s, but the placement is for %s", l.JobID, j.ID)
	case l.RenterID != "" && l.RenterID != j.RenterID:
		return idlegrid.Invalid("lease.renter_id", "is %s, but job %s belongs to %s", l.RenterID, j.ID, j.RenterID)
	case l.Attempt != 0 && l.Attempt != p.Attempt+1:
		return idlegrid.Invalid("lease.attempt", "must be the placement's attempt + 1 (%d), got %d", p.Attempt+1, l.Attempt)
	case l.State != "" && l.State.Terminal():
		return idlegrid.Invalid("lease.state", "a new lease cannot be %s", l.State)
	}
	return nil
}

func exitCodeArg(c *int) any {
	if c == nil {
		return nil
	}
	return int64(*c)
}

const leaseColumns = `id, job_id, renter_id, node_id, provider_id, attempt, gpu_uuids, tier, price_micros,
	price_note, limit_seconds, hold_micros, charged_micros, state, reason, fault, stop_requested, exit_code,
	progress, created_at, started_at, ended_at, notice_seconds, notice_at, checkpoint_ref, checkpoint_at, start_by`

func scanLease(s scanner) (*idlegrid.Lease, error) {
	var l idlegrid.Lease
	var gpus string
	var exit, created, started, ended, noticeAt, checkpointAt, startBy sql.NullInt64
	if err := s.Scan(&l.ID, &l.JobID, &l.RenterID, &l.NodeID, &l.ProviderID, &l.Attempt, &gpus, &l.Tier,
		&l.PriceMicrosPerGPUHour, &l.PriceNote, &l.LimitSeconds, &l.HoldMicros, &l.ChargedMicros, &l.State,
		&l.Reason, &l.Fault, &l.StopRequested, &exit, &l.Progress, &created, &started, &ended,
		&l.NoticeSeconds, &noticeAt, &l.CheckpointRef, &checkpointAt, &startBy); err != nil {
		return nil, err
	}
	if err := jsonOf(gpus, &l.GPUUUIDs); err != nil {
		return nil, err
	}
	if exit.Valid {
		c := int(exit.Int64)
		l.ExitCode = &c
	}
	l.CreatedAt, l.StartedAt, l.EndedAt = timeOf(created), timePtrOf(started), timePtrOf(ended)
	l.NoticeAt, l.CheckpointAt, l.StartBy = timePtrOf(noticeAt), timePtrOf(checkpointAt), timePtrOf(startBy)
	return &l, nil
}

func findLease(ctx context.Context, tx *sql.Tx, id, lock string) (*idlegrid.Lease, error) {
	l, err := scanLease(tx.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE id = $1`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("lease", id)
	}
	return l, err
}

func queryLeases(ctx context.Context, tx *sql.Tx, q string, a ...any) ([]*idlegrid.Lease, error) {
	rows, err := tx.QueryContext(ctx, q, a...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*idlegrid.Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// FindLease returns the lease with id.
func (db *DB) FindLease(ctx context.Context, id string) (*idlegrid.Lease, error) {
	var l *idlegrid.Lease
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		l, err = findLease(ctx, tx, id, "")
		return err
	})
	return l, err
}

// ListLeases returns the leases that match f, newest first.
func (db *DB) ListLeases(ctx context.Context, f idlegrid.LeaseFilter) ([]*idlegrid.Lease, error) {
	var a args
	q := `SELECT ` + leaseColumns + ` FROM leases WHERE 1 = 1`
	for _, c := range []struct{ column, v string }{
		{"job_id", f.JobID}, {"node_id", f.NodeID}, {"provider_id", f.ProviderID}, {"renter_id", f.RenterID},
	} {
		if c.v != "" {
			q += ` AND ` + c.column + ` = ` + a.add(c.v)
		}
	}
	if len(f.States) > 0 {
		q += ` AND state IN ` + in(&a, f.States)
	}
	if f.Before != "" { // the page after Before's; none if it is not a lease
		q += ` AND (created_at, id) < (SELECT created_at, id FROM leases WHERE id = ` + a.add(f.Before) + `)`
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ` + a.add(limitOf(f.Limit))
	var out []*idlegrid.Lease
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryLeases(ctx, tx, q, a...)
		return err
	})
	return out, err
}

// LeasesToReap returns the live leases that meet any of q's conditions,
// newest first. The conditions are checked in the database, on the
// columns alone, so the other leases are never read.
func (db *DB) LeasesToReap(ctx context.Context, q idlegrid.ReapQuery) ([]*idlegrid.Lease, error) {
	var a args
	assigned, running := a.add(string(idlegrid.LeaseAssigned)), a.add(string(idlegrid.LeaseRunning))
	var or []string
	if !q.AssignedBefore.IsZero() {
		or = append(or, `(state = `+assigned+` AND created_at < `+a.add(timeArg(q.AssignedBefore))+`)`)
	}
	if !q.LimitBefore.IsZero() {
		or = append(or, `(state = `+running+` AND started_at + limit_seconds * 1000000 < `+a.add(timeArg(q.LimitBefore))+`)`)
	}
	if !q.NoticeBefore.IsZero() {
		or = append(or, `(stop_requested <> '' AND notice_at + notice_seconds * 1000000 < `+a.add(timeArg(q.NoticeBefore))+`)`)
	}
	if !q.ReceiptsBefore.IsZero() {
		or = append(or, `(state = `+running+` AND stop_requested = '' AND (SELECT r.end_at FROM lease_receipts r
			WHERE r.lease_id = leases.id ORDER BY r.seq DESC LIMIT 1) < `+a.add(timeArg(q.ReceiptsBefore))+`)`)
	}
	if len(or) == 0 {
		return nil, nil
	}
	query := `SELECT ` + leaseColumns + ` FROM leases WHERE state IN (` + assigned + `, ` + running + `)
		AND (` + strings.Join(or, ` OR `) + `) ORDER BY created_at DESC, id DESC`
	var out []*idlegrid.Lease
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryLeases(ctx, tx, query, a...)
		return err
	})
	return out, err
}

// RenterStakes returns the stake of every renter with live leases, by
// renter ID, in one query. AtMost is summed in the database with
// idlegrid.CostOf's integer steps; a lease's GPUs are counted as the
// commas of its JSON list of UUIDs, plus one, so a UUID with a comma in it
// could only make the sum larger.
func (db *DB) RenterStakes(ctx context.Context) ([]*idlegrid.RenterStake, error) {
	const gpuSeconds = `(LENGTH(gpu_uuids) - LENGTH(REPLACE(gpu_uuids, ',', '')) + 1) * limit_seconds`
	var a args
	live := in(&a, liveStates)
	query := `SELECT c.renter_id, c.at_most,
			(SELECT CAST(COALESCE(SUM(b.balance), 0) AS BIGINT) FROM balances b
				WHERE b.account IN ('renter:' || c.renter_id || ':available', 'renter:' || c.renter_id || ':held')),
			EXISTS (SELECT 1 FROM spend_limits s WHERE s.scope IN (` + a.add(string(idlegrid.SpendAccount)) + `, ` + a.add(string(idlegrid.SpendKey)) + `)
				AND s.account_id = c.renter_id)
		FROM (SELECT renter_id, CAST(SUM(price_micros * (` + gpuSeconds + ` / 3600) + price_micros * (` + gpuSeconds + ` % 3600) / 3600) AS BIGINT) AS at_most
			FROM leases WHERE state IN ` + live + ` GROUP BY renter_id) c
		ORDER BY c.renter_id`
	var out []*idlegrid.RenterStake
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, query, a...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			st := &idlegrid.RenterStake{}
			if err := rows.Scan(&st.RenterID, &st.AtMost, &st.Funds, &st.Limited); err != nil {
				return err
			}
			out = append(out, st)
		}
		return rows.Err()
	})
	return out, err
}

// ListLeaseEvents returns the lease's state changes in order, its placement
// (from "") first.
func (db *DB) ListLeaseEvents(ctx context.Context, leaseID string) ([]*idlegrid.LeaseEvent, error) {
	var out []*idlegrid.LeaseEvent
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		if _, err := findLease(ctx, tx, leaseID, ""); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT lease_id, from_state, to_state, reason, at FROM lease_events
			WHERE lease_id = $1 ORDER BY seq`, leaseID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e idlegrid.LeaseEvent
			var at sql.NullInt64
			if err := rows.Scan(&e.LeaseID, &e.From, &e.To, &e.Reason, &at); err != nil {
				return err
			}
			e.At = timeOf(at)
			out = append(out, &e)
		}
		return rows.Err()
	})
	return out, err
}

// RequestLeaseStop asks the agent to stop a live lease; ECONFLICT once the
// lease has ended.
func (db *DB) RequestLeaseStop(ctx context.Context, leaseID, reason string, at time.Time) error {
	if reason == "" {
		return idlegrid.Invalid("stop.reason", "required")
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		l, err := findLease(ctx, tx, leaseID, db.dialect.forUpdate)
		if err != nil {
			return err
		} else if l.State.Terminal() {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s is already %s", leaseID, l.State)
		}
		switch {
		case l.StopRequested == "":
			_, err = tx.ExecContext(ctx, `UPDATE leases SET stop_requested = $1, notice_at = $2 WHERE id = $3`,
				reason, timeArg(at), leaseID)
		case strings.HasPrefix(l.StopRequested, idlegrid.NoticeStopPrefix) && !strings.HasPrefix(reason, idlegrid.NoticeStopPrefix):
			// A cancel outranks a notice: the lease ends cancelled, and its
			// job with it; the notice's time stands.
			_, err = tx.ExecContext(ctx, `UPDATE leases SET stop_requested = $1 WHERE id = $2`, reason, leaseID)
		}
		return err // otherwise the first stop and its notice stand
	})
}

// maxClockSkew is how far ahead of the server's clock a node's report of
// a checkpoint may be: nodes' clocks drift.
const maxClockSkew = time.Minute

// SetLeaseProgress records the agent's progress, 0..1, of a running lease,
// and the time of its workload's last checkpoint when it moved on. A
// checkpoint a little ahead of at counts as at.
func (db *DB) SetLeaseProgress(ctx context.Context, p idlegrid.LeaseProgress, at time.Time) (checkpointed bool, err error) {
	if !(p.Progress >= 0 && p.Progress <= 1) {
		return false, idlegrid.Invalid("lease.progress", "must be between 0 and 1")
	}
	err = db.update(ctx, func(tx *sql.Tx) error {
		l, err := findLease(ctx, tx, p.LeaseID, db.dialect.forUpdate)
		if err != nil {
			return err
		} else if l.State != idlegrid.LeaseRunning {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s is %s, not running", p.LeaseID, l.State)
		}
		ck, err := laterCheckpoint(l, p.CheckpointAt, at)
		if err != nil {
			return err
		}
		checkpointed = ck != l.CheckpointAt
		_, err = tx.ExecContext(ctx, `UPDATE leases SET progress = $1, checkpoint_at = $2 WHERE id = $3`,
			p.Progress, timePtrArg(ck), p.LeaseID)
		return err
	})
	return checkpointed, err
}

// laterCheckpoint is the lease's checkpoint after a report of one at c
// (nil: none), received at at: the later of the two, or l's own when c
// is not later. A checkpoint cannot be older than the lease's start, nor
// more than maxClockSkew ahead of at.
func laterCheckpoint(l *idlegrid.Lease, c *time.Time, at time.Time) (*time.Time, error) {
	if c == nil {
		return l.CheckpointAt, nil
	}
	if c.After(at.Add(maxClockSkew)) {
		return nil, idlegrid.Invalid("lease.checkpoint_at", "%s is ahead of the server's clock (%s); check the node's clock",
			c.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
	}
	if l.StartedAt != nil && c.Before(*l.StartedAt) {
		return nil, idlegrid.Invalid("lease.checkpoint_at", "%s is before the lease started (%s)",
			c.UTC().Format(time.RFC3339), l.StartedAt.UTC().Format(time.RFC3339))
	}
	t := c.UTC()
	if t.After(at) {
		t = at.UTC()
	}
	t = t.Truncate(time.Microsecond) // as the store keeps it, so that a repeated report is no news
	if l.CheckpointAt != nil && !t.After(l.CheckpointAt.Add(sameCheckpoint)) {
		return l.CheckpointAt, nil
	}
	return &t, nil
}

// sameCheckpoint is how much later a report may put the checkpoint kept
// and still be of the same one: a node says its checkpoint's age, which
// the server takes from its own clock, so each heartbeat reads the same
// checkpoint a little later by its transit. Were each a new checkpoint,
// the job would change, and the engine be told, at every heartbeat.
const sameCheckpoint = time.Second

// TransitionLease applies t and its transfers in one transaction: the lease
// changes state and gets an event; a lease that ends frees its GPUs and
// counts in its node's record; the job is charged and moved on by
// idlegrid.NextJobState over the leases of its current attempt.
func (db *DB) TransitionLease(ctx context.Context, t *idlegrid.LeaseTransition, transfers []*idlegrid.Transfer) error {
	if err := checkTransition(t); err != nil {
		return err
	}
	if f := t.FollowUp; f != nil {
		if err := checkFollowUp(f); err != nil {
			return err
		}
	}
	for _, x := range transfers {
		if x.CreatedAt.IsZero() {
			x.CreatedAt = t.At
		}
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		l, err := findLease(ctx, tx, t.LeaseID, db.dialect.forUpdate)
		if err != nil {
			return err
		} else if !stateIn(l.State, t.From) {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s is %s, not %s", l.ID, l.State, idlegrid.OrList(t.From))
		}
		j, err := findJob(ctx, tx, l.JobID, db.dialect.forUpdate)
		if err != nil {
			return err
		}
		if err := moveLease(ctx, tx, l, t); err != nil {
			return err
		} else if err := addSpent(ctx, tx, l.RenterID, j.SubmittedByKey, t.At, t.ChargedMicros); err != nil {
			return err
		}
		if t.To.Terminal() {
			if _, err := tx.ExecContext(ctx, `DELETE FROM gpu_claims WHERE lease_id = $1`, l.ID); err != nil {
				return err
			} else if err := recordLeaseEnd(ctx, tx, l.NodeID, t.To, t.Fault); err != nil {
				return err
			}
		}
		if err := postTransfers(ctx, tx, transfers); err != nil {
			return err
		}
		if t.FollowUp != nil {
			if err := insertFollowUp(ctx, tx, db.dialect, t.FollowUp); err != nil {
				return err
			}
		}
		return moveJob(ctx, tx, j, l.Attempt, t)
	})
}

func checkTransition(t *idlegrid.LeaseTransition) error {
	switch t.To {
	case idlegrid.LeaseAssigned, idlegrid.LeaseRunning, idlegrid.LeaseSucceeded, idlegrid.LeaseFailed,
		idlegrid.LeaseCancelled, idlegrid.LeaseLost, idlegrid.LeasePreempted:
	default:
		return idlegrid.Invalid("transition.to", "unknown lease state %q", t.To)
	}
	switch {
	case t.LeaseID == "":
		return idlegrid.Invalid("transition.lease_id", "required")
	case len(t.From) == 0:
		return idlegrid.Invalid("transition.from", "name the states the lease may be in")
	case t.At.IsZero():
		return idlegrid.Invalid("transition.at", "required")
	case t.ChargedMicros < 0:
		return idlegrid.Invalid("transition.charged_micros", "must not be negative")
	}
	return nil
}

func stateIn(s idlegrid.LeaseState, set []idlegrid.LeaseState) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

// moveLease writes t onto l and records the event.
func moveLease(ctx context.Context, tx *sql.Tx, l *idlegrid.Lease, t *idlegrid.LeaseTransition) error {
	ended := l.EndedAt
	if t.To.Terminal() && ended == nil {
		ended = &t.At
	}
	started := l.StartedAt
	if t.To == idlegrid.LeaseRunning && started == nil {
		started = &t.At
	}
	exit := l.ExitCode
	if t.ExitCode != nil {
		exit = t.ExitCode
	}
	var seq int64
	err := tx.QueryRowContext(ctx, `UPDATE leases SET state = $1, reason = $2, fault = $3, exit_code = $4,
		started_at = $5, ended_at = $6, charged_micros = charged_micros + $7, events = events + 1,
		checkpoint_ref = $8 WHERE id = $9 RETURNING events`,
		string(t.To), t.Reason, string(t.Fault), exitCodeArg(exit), timePtrArg(started), timePtrArg(ended),
		int64(t.ChargedMicros), orKeep(t.CheckpointRef, l.CheckpointRef), l.ID).Scan(&seq)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO lease_events (lease_id, seq, from_state, to_state, reason, at)
		VALUES ($1, $2, $3, $4, $5, $6)`, l.ID, seq, string(l.State), string(t.To), t.Reason, timeArg(t.At))
	if err != nil {
		return err
	}
	after := *l
	after.State, after.Fault, after.ChargedMicros = t.To, t.Fault, l.ChargedMicros+t.ChargedMicros
	return appendAudit(tx)(audit.LeaseEntry(&after, idlegrid.LeaseEvent{LeaseID: l.ID, From: l.State, To: t.To, Reason: t.Reason, At: t.At}))
}

// moveJob charges the job for t and, when the lease belongs to the job's
// current attempt, moves the job on by NextJobState: a job its renter
// cancelled ends cancelled, whatever t.
func moveJob(ctx context.Context, tx *sql.Tx, j *idlegrid.Job, attempt int, t *idlegrid.LeaseTransition) error {
	state, reason, ended := j.State, j.Reason, j.EndedAt
	if attempt == j.Attempts && !j.State.Terminal() {
		leases, err := queryLeases(ctx, tx, `SELECT `+leaseColumns+` FROM leases WHERE job_id = $1 AND attempt = $2`,
			j.ID, j.Attempts)
		if err != nil {
			return err
		}
		next, why := idlegrid.NextJobState(leases, j.CancelRequested())
		if next != j.State || why != "" {
			state, reason = next, why
		}
		if state == idlegrid.JobQueued {
			if err := resumeFrom(ctx, tx, j, leases, t); err != nil {
				return err
			}
		}
		if state.Terminal() && ended == nil {
			ended = &t.At
		}
	}
	_, err := tx.ExecContext(ctx, `UPDATE jobs SET state = $1, reason = $2, ended_at = $3, updated_at = $4,
		charged_micros = charged_micros + $5 WHERE id = $6`,
		string(state), reason, timePtrArg(ended), timeArg(t.At), int64(t.ChargedMicros), j.ID)
	return err
}

// resumeFrom hands a requeued job the checkpoint its leases last reported,
// so that the next placement resumes where the last one stopped, and the
// run that checkpoint holds (Job.ResumeSeconds): what the job held before,
// and what its lease ran from its start to the checkpoint. A checkpoint
// the ending report names was saved as the lease stopped; one reported
// before, at its CheckpointAt, when that is known.
func resumeFrom(ctx context.Context, tx *sql.Tx, j *idlegrid.Job, leases []*idlegrid.Lease, t *idlegrid.LeaseTransition) error {
	ref, saved, from := "", (*time.Time)(nil), (*idlegrid.Lease)(nil)
	for _, l := range leases {
		if l.ID == t.LeaseID && t.CheckpointRef != "" {
			ref, saved, from = t.CheckpointRef, &t.At, l
		} else if ref == "" && l.CheckpointRef != "" {
			ref, saved, from = l.CheckpointRef, l.CheckpointAt, l
		}
	}
	if ref == "" { // no lease of the attempt saved one: the job keeps what it had
		return nil
	}
	spec := j.JobSpec
	spec.CheckpointRef = ref
	arg, err := jsonArg(spec)
	if err != nil {
		return err
	}
	resume, node := min(j.ResumeSeconds+ranUntil(from, saved), j.DurationSeconds), from.NodeID // the runtime keeps it on the node
	if j.CheckpointEverySeconds == 0 || j.Nodes > 1 {
		// A job that says it cannot resume starts over wherever it goes; a
		// gang's checkpoints are spread over its nodes, which it seldom
		// gets again all together: the market counts its run from zero.
		resume, node = 0, ""
	}
	_, err = tx.ExecContext(ctx, `UPDATE jobs SET spec = $1, resume_seconds = $2, checkpoint_node_id = $3 WHERE id = $4`,
		arg, resume, node, j.ID)
	return err
}

// ranUntil is how long l ran from its start until saved, in whole
// seconds; 0 when either is unknown.
func ranUntil(l *idlegrid.Lease, saved *time.Time) int64 {
	if l.StartedAt == nil || saved == nil || !saved.After(*l.StartedAt) {
		return 0
	}
	return int64(saved.Sub(*l.StartedAt) / time.Second)
}

func orKeep(v, old string) string {
	if v == "" {
		return old
	}
	return v
}

// MaxLogLinesKept is how many of a lease's latest lines of output the
// store keeps: beyond it, AppendLogs drops the oldest, so that a job (or a
// node) that writes without end does not fill the database. The numbering
// goes on, so a reader sees where the lines begin.
const MaxLogLinesKept = 100_000

// AppendLogs appends lines to the lease's log, numbering them on from the
// last line stored; it sets each line's Seq, and keeps MaxLogLinesKept.
func (db *DB) AppendLogs(ctx context.Context, leaseID string, lines []idlegrid.LogLine) error {
	if len(lines) == 0 {
		return nil
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		var last int64
		err := tx.QueryRowContext(ctx, `UPDATE leases SET log_lines = log_lines + $1 WHERE id = $2
			RETURNING log_lines`, len(lines), leaseID).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("lease", leaseID)
		} else if err != nil {
			return err
		}
		first := last - int64(len(lines)) + 1
		for i := range lines {
			lines[i].Seq = first + int64(i)
			if _, err := tx.ExecContext(ctx, `INSERT INTO lease_logs (lease_id, seq, at, stream, text)
				VALUES ($1, $2, $3, $4, $5)`, leaseID, lines[i].Seq, timeArg(lines[i].At),
				lines[i].Stream, lines[i].Text); err != nil {
				return err
			}
		}
		kept := db.keptLogLines()
		if last <= kept {
			return nil
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM lease_logs WHERE lease_id = $1 AND seq <= $2`, leaseID, last-kept)
		return err
	})
}

func (db *DB) keptLogLines() int64 {
	if n := db.logsKept.Load(); n > 0 {
		return n
	}
	return MaxLogLinesKept
}

// ListLogs returns the lines f selects, in order.
func (db *DB) ListLogs(ctx context.Context, f idlegrid.LogFilter) ([]idlegrid.LogLine, error) {
	var out []idlegrid.LogLine
	query := `SELECT seq, at, stream, text FROM lease_logs
		WHERE lease_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`
	if f.Tail {
		query = `SELECT seq, at, stream, text FROM (SELECT seq, at, stream, text FROM lease_logs
			WHERE lease_id = $1 AND seq > $2 ORDER BY seq DESC LIMIT $3) AS tail ORDER BY seq`
	}
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		if _, err := findLease(ctx, tx, f.LeaseID, ""); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, query, f.LeaseID, f.After, limitOf(f.Limit))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l idlegrid.LogLine
			var at sql.NullInt64
			if err := rows.Scan(&l.Seq, &at, &l.Stream, &l.Text); err != nil {
				return err
			}
			l.At = timeOf(at)
			out = append(out, l)
		}
		return rows.Err()
	})
	return out, err
}
