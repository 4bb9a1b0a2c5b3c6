package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/pressly/goose/v3"

	"github.com/idlegrid/idlegrid"
)

// jobTierMigration (29) adds jobs.tier, the spec's SLA tier: under a
// backlog the scheduler reads, beyond the oldest queued jobs, the younger
// ones of the tiers that outrank them (idlegrid.JobFilter.Tiers), so that
// a gold job is read at once however many older jobs of lower tiers wait.
// It has no index of its own: one would cost every submission and
// placement, and those reads, rare, walk the queued jobs by (state,
// created_at) instead. It is a Go migration because it reads the stored
// specs' JSON.
var jobTierMigration = goose.NewGoMigration(29,
	&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE jobs ADD COLUMN tier TEXT NOT NULL DEFAULT ''`); err != nil {
			return err
		}
		byTier, err := storedTiers(ctx, tx)
		if err != nil {
			return err
		}
		for tier, ids := range byTier { // after the read: PostgreSQL runs one statement at a time on a transaction
			for len(ids) > 0 {
				n := min(len(ids), 500)
				var a args
				q := `UPDATE jobs SET tier = ` + a.add(string(tier)) + ` WHERE id IN ` + in(&a, ids[:n])
				if _, err := tx.ExecContext(ctx, q, a...); err != nil {
					return err
				}
				ids = ids[n:]
			}
		}
		return nil
	}},
	&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `ALTER TABLE jobs DROP COLUMN tier`)
		return err
	}},
)

// storedTiers reads every stored job's tier from its spec: the job IDs by
// tier.
func storedTiers(ctx context.Context, tx *sql.Tx) (map[idlegrid.Tier][]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, spec FROM jobs`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[idlegrid.Tier][]string{}
	for rows.Next() {
		var id, spec string
		if err := rows.Scan(&id, &spec); err != nil {
			return nil, err
		}
		var s struct {
			Tier idlegrid.Tier `json:"tier"`
		}
		if err := json.Unmarshal([]byte(spec), &s); err != nil {
			return nil, err
		}
		out[s.Tier] = append(out[s.Tier], id)
	}
	return out, rows.Err()
}
