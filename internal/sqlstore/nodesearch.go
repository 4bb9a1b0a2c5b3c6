package sqlstore

import (
	"context"
	"database/sql"
	"slices"

	"github.com/idlegrid/idlegrid"
	"github.com/pressly/goose/v3"
)

// What a search of the market's nodes filters on is kept beside each
// node's offer: its region in nodes.region (written with the offer), and
// its GPU models in node_gpu_models, one row a model, so that a renter's
// list of the nodes on offer (NodeFilter.Regions, GPUModels) is filtered
// by the database rather than by decoding every offer.

// setGPUModels writes node id's GPU models into node_gpu_models.
func setGPUModels(ctx context.Context, tx *sql.Tx, id string, gpus []idlegrid.GPU) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM node_gpu_models WHERE node_id = $1`, id); err != nil {
		return err
	}
	models := gpuModels(gpus)
	if len(models) == 0 {
		return nil
	}
	rows := make([][]any, len(models))
	for i, m := range models {
		rows[i] = []any{m, id}
	}
	q, args := valuesOf(`INSERT INTO node_gpu_models (model, node_id)`, "", rows)
	_, err := tx.ExecContext(ctx, q, args...)
	return err
}

// gpuModels is the distinct models of gpus, sorted.
func gpuModels(gpus []idlegrid.GPU) []string {
	var models []string
	for _, g := range gpus {
		models = append(models, g.Model)
	}
	slices.Sort(models)
	return slices.Compact(models)
}

// nodeSearchFilter adds f's region and GPU model filters to q.
func nodeSearchFilter(q string, a *args, f idlegrid.NodeFilter) string {
	if len(f.Regions) > 0 {
		q += ` AND region IN ` + in(a, f.Regions)
	}
	if len(f.GPUModels) > 0 {
		q += ` AND id IN (SELECT node_id FROM node_gpu_models WHERE model IN ` + in(a, f.GPUModels) + `)`
	}
	return q
}

// nodeSearchMigration (21) adds nodes.region and node_gpu_models and fills
// them from the stored offers. It is a Go migration because it reads the
// offers' JSON.
var nodeSearchMigration = goose.NewGoMigration(21,
	&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		for _, q := range []string{
			`ALTER TABLE nodes ADD COLUMN region TEXT NOT NULL DEFAULT ''`,
			`CREATE INDEX nodes_region ON nodes (region, state)`,
			`CREATE TABLE node_gpu_models (
				model   TEXT NOT NULL,
				node_id TEXT NOT NULL REFERENCES nodes (id),
				PRIMARY KEY (model, node_id)
			)`,
			`CREATE INDEX node_gpu_models_node ON node_gpu_models (node_id)`,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		offers := map[string]*idlegrid.Offer{}
		err := queryEach(ctx, tx, `SELECT id, offer FROM nodes`, nil, func(rows *sql.Rows) error {
			var id, offer string
			o := &idlegrid.Offer{}
			if err := rows.Scan(&id, &offer); err != nil {
				return err
			} else if err := jsonOf(offer, o); err != nil {
				return err
			}
			offers[id] = o
			return nil
		})
		if err != nil {
			return err
		}
		for id, o := range offers { // after the read: PostgreSQL runs one statement at a time on a transaction
			if _, err := tx.ExecContext(ctx, `UPDATE nodes SET region = $1 WHERE id = $2`, o.Region, id); err != nil {
				return err
			}
			if err := setGPUModels(ctx, tx, id, o.GPUs); err != nil {
				return err
			}
		}
		return nil
	}},
	&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		for _, q := range []string{
			`DROP TABLE node_gpu_models`,
			`DROP INDEX nodes_region`,
			`ALTER TABLE nodes DROP COLUMN region`,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}},
)
