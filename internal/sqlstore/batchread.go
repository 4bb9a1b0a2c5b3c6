package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// batchRead is what a batch placed without savepoints reads up front of
// its jobs, their renters' spend limits and its nodes: each in a few
// statements for the whole batch, where a placement on its own reads each
// with a statement of its own. Locks are taken as the single reads take
// them (the jobs and limits, FOR UPDATE on PostgreSQL).
type batchRead struct {
	jobs   map[string]*idlegrid.Job  // as findPlacedJob reads them, without their specs
	nodes  map[string]*idlegrid.Node // ID, owner and state only
	limits map[spendKey]*idlegrid.SpendLimit
}

type spendKey struct {
	scope            idlegrid.SpendScope
	accountID, keyID string
}

// readBatch reads what placing ps needs, in d's dialect.
func readBatch(ctx context.Context, tx *sql.Tx, d *dialect, ps []*idlegrid.Placement) (*batchRead, error) {
	r := &batchRead{jobs: map[string]*idlegrid.Job{}, nodes: map[string]*idlegrid.Node{}, limits: map[spendKey]*idlegrid.SpendLimit{}}
	var jobIDs, nodeIDs []string
	for _, p := range ps {
		jobIDs = append(jobIDs, p.JobID)
		for _, l := range p.Leases {
			nodeIDs = append(nodeIDs, l.NodeID)
		}
	}
	err := selectIn(ctx, tx, `SELECT id, renter_id, state, attempts, started_at, submitted_by_key, checkpoint_node_id FROM jobs WHERE id`,
		` ORDER BY id`+d.forUpdate, jobIDs, r.scanJob)
	if err != nil {
		return nil, err
	}
	if err := selectIn(ctx, tx, `SELECT id, provider_id, state FROM nodes WHERE id`, "", nodeIDs, r.scanNode); err != nil {
		return nil, err
	}
	var renters []string
	for _, j := range r.jobs {
		renters = append(renters, j.RenterID)
	}
	return r, selectIn(ctx, tx, `SELECT `+spendLimitColumns+` FROM spend_limits WHERE account_id`,
		` ORDER BY account_id, scope, key_id`+d.forUpdate, renters, r.scanLimit)
}

func (r *batchRead) scanJob(rs *sql.Rows) error {
	j := &idlegrid.Job{}
	var started sql.NullInt64
	if err := rs.Scan(&j.ID, &j.RenterID, &j.State, &j.Attempts, &started, &j.SubmittedByKey, &j.CheckpointNodeID); err != nil {
		return err
	}
	j.StartedAt = timePtrOf(started)
	r.jobs[j.ID] = j
	return nil
}

func (r *batchRead) scanNode(rs *sql.Rows) error {
	n := &idlegrid.Node{}
	if err := rs.Scan(&n.ID, &n.ProviderID, &n.State); err != nil {
		return err
	}
	r.nodes[n.ID] = n
	return nil
}

func (r *batchRead) scanLimit(rs *sql.Rows) error {
	l, err := scanSpendLimit(rs)
	if err != nil {
		return err
	}
	r.limits[spendKey{l.Scope, l.AccountID, l.KeyID}] = l
	return nil
}

// job is placement p's job as findPlacedJob would read it now: its spec
// is read, and decoded, only when a lease leaves its tier to the job's.
func (r *batchRead) job(ctx context.Context, tx *sql.Tx, p *idlegrid.Placement) (*idlegrid.Job, error) {
	read, ok := r.jobs[p.JobID]
	if !ok {
		return nil, notFound("job", p.JobID)
	}
	j := *read
	for _, l := range p.Leases {
		if l.Tier == "" {
			var spec string
			if err := tx.QueryRowContext(ctx, `SELECT spec FROM jobs WHERE id = $1`, j.ID).Scan(&spec); err != nil {
				return nil, err
			}
			return &j, jsonOf(spec, &j.JobSpec)
		}
	}
	return &j, nil
}

// started records what placing job j writes of it, for a later read in
// the batch: it runs, one attempt on, started at the latest at at.
func (r *batchRead) started(j *idlegrid.Job, at time.Time) {
	read := r.jobs[j.ID]
	read.State, read.Attempts = idlegrid.JobRunning, read.Attempts+1
	if read.StartedAt == nil {
		read.StartedAt = &at
	}
}

// node is node id's owner and state.
func (r *batchRead) node(id string) (*idlegrid.Node, error) {
	n, ok := r.nodes[id]
	if !ok {
		return nil, notFound("node", id)
	}
	return n, nil
}

// selectIn runs "head IN (…) tail" for ids, each once and in sorted
// order, several a statement, and reads every row with scan. With a tail
// that orders by the same key, rows are locked in one order whatever the
// batch: two coordinators placing the same jobs on PostgreSQL wait for
// each other instead of deadlocking.
func selectIn(ctx context.Context, tx *sql.Tx, head, tail string, ids []string, scan func(*sql.Rows) error) error {
	sorted := slices.Compact(slices.Sorted(slices.Values(ids)))
	unique := make([]any, len(sorted))
	for i, id := range sorted {
		unique[i] = id
	}
	for len(unique) > 0 {
		n := rowsPerStatement(len(unique))
		if err := queryEach(ctx, tx, head+" IN "+params(1, n)+tail, unique[:n], scan); err != nil {
			return fmt.Errorf("read the batch's rows: %w", err)
		}
		unique = unique[n:]
	}
	return nil
}

// params is "($first, …)", n parameters.
func params(first, n int) string {
	var b strings.Builder
	b.WriteByte('(')
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(first+i))
	}
	b.WriteByte(')')
	return b.String()
}

// jobStart is what placing a job writes of it, for laterRows.
type jobStart struct {
	reason string
	at     time.Time
}

// startJobs updates the jobs placed in a batch, the same update for many
// jobs in one statement: they run, one attempt on, started at the latest
// at their placement's time.
func startJobs(ctx context.Context, tx *sql.Tx, jobs map[jobStart][]any) error {
	for js, ids := range jobs {
		for len(ids) > 0 {
			n := rowsPerStatement(len(ids))
			args := append([]any{string(idlegrid.JobRunning), js.reason, timeArg(js.at), timeArg(js.at)}, ids[:n]...)
			_, err := tx.ExecContext(ctx, `UPDATE jobs SET state = $1, reason = $2, attempts = attempts + 1,
				started_at = COALESCE(started_at, $3), updated_at = $4 WHERE id IN `+params(5, n), args...)
			if err != nil {
				return err
			}
			ids = ids[n:]
		}
	}
	return nil
}
