package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"

	"github.com/idlegrid/idlegrid"
	"github.com/pressly/goose/v3"
)

// What a search of the market's nodes filters on is kept beside each
// node's offer: its region in nodes.region, its GPU count, its largest
// GPU memory in nodes.vram_mb and its floor per tier in nodes.floor_gold,
// floor_silver and floor_bronze (0: not sold), all written with the
// offer; and its GPU models in node_gpu_models, one row a model. So a
// renter's search of the nodes on offer (NodeFilter) is filtered and
// sorted by the database rather than by decoding every offer.

// offerColumns are the nodes' columns a search reads, beside the offer.
const offerColumns = `gpu_count, vram_mb, floor_gold, floor_silver, floor_bronze, serves_models, region, name`

// offerValues are offerColumns' values for o.
func offerValues(o idlegrid.Offer) []any {
	vram := 0
	for _, g := range o.GPUs {
		vram = max(vram, g.VRAMMB)
	}
	floor := o.Ask.FloorMicrosPerGPUHour
	return []any{len(o.GPUs), vram, floor[idlegrid.TierGold], floor[idlegrid.TierSilver], floor[idlegrid.TierBronze],
		len(o.Models) > 0, o.Region, o.Name}
}

// floorColumn is the column of tier's floor; "" for a tier not known.
func floorColumn(tier idlegrid.Tier) string {
	switch tier {
	case idlegrid.TierGold, idlegrid.TierSilver, idlegrid.TierBronze:
		return "floor_" + string(tier)
	}
	return ""
}

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

// nodeSearchFilter adds f's search of the offers to q. The IDs, which
// may be thousands, travel as one JSON array.
func (db *DB) nodeSearchFilter(q string, a *args, f idlegrid.NodeFilter) (string, error) {
	if f.IDs != nil {
		ids, err := json.Marshal(f.IDs)
		if err != nil {
			return "", err
		}
		q += ` AND id IN (` + db.dialect.texts(a.add(string(ids))) + `)`
	}
	if f.Name != "" {
		q += ` AND name = ` + a.add(f.Name)
	}
	if len(f.Regions) > 0 {
		q += ` AND region IN ` + in(a, f.Regions)
	}
	if len(f.GPUModels) > 0 {
		q += ` AND id IN (SELECT node_id FROM node_gpu_models WHERE model IN ` + in(a, f.GPUModels) + `)`
	}
	if f.MinGPUs > 0 {
		q += ` AND gpu_count >= ` + a.add(f.MinGPUs)
	}
	if f.MinVRAMMB > 0 {
		q += ` AND vram_mb >= ` + a.add(f.MinVRAMMB)
	}
	if f.MinLevel > 0 {
		q += ` AND level >= ` + a.add(f.MinLevel)
	}
	if col := floorColumn(f.Tier); col != "" {
		q += ` AND ` + col + ` > 0`
		if f.MaxFloor > 0 {
			q += ` AND ` + col + ` <= ` + a.add(int64(f.MaxFloor))
		}
	}
	return q, nil
}

// nodesAfter is the condition that keeps the nodes after f.After in
// nodeOrder's order, as the node's row stands now; "" without one.
func nodesAfter(a *args, f idlegrid.NodeFilter) string {
	if f.After == "" {
		return ""
	}
	id := a.add(f.After)
	at := func(col string) string { return `(SELECT ` + col + ` FROM nodes WHERE id = ` + id + `)` }
	later := `(created_at > ` + at("created_at") + ` OR (created_at = ` + at("created_at") + ` AND id > ` + id + `))`
	switch col := floorColumn(f.Tier); {
	case f.Sort == idlegrid.NodesCheapest && col != "":
		return ` AND (` + col + ` > ` + at(col) + ` OR (` + col + ` = ` + at(col) + ` AND ` + later + `))`
	case f.Sort == idlegrid.NodesReliable:
		return ` AND (reliability < ` + at("reliability") + ` OR (reliability = ` + at("reliability") + ` AND ` + later + `))`
	}
	return ` AND ` + later
}

// nodeOrder is the ORDER BY clause of f's sort, ties oldest first.
func nodeOrder(f idlegrid.NodeFilter) string {
	switch col := floorColumn(f.Tier); {
	case f.Sort == idlegrid.NodesCheapest && col != "":
		return ` ORDER BY ` + col + `, created_at, id`
	case f.Sort == idlegrid.NodesReliable:
		return ` ORDER BY reliability DESC, created_at, id`
	}
	return ` ORDER BY created_at, id`
}

// storedOffers reads every node's offer, by node ID: what a migration
// that keeps a new column beside the offer fills it from.
func storedOffers(ctx context.Context, tx *sql.Tx) (map[string]*idlegrid.Offer, error) {
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
	return offers, err
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
		offers, err := storedOffers(ctx, tx)
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

// nodePriceMigration (22) adds the nodes' largest GPU memory and floors
// per tier, and fills them from the stored offers, as
// nodeSearchMigration does.
var nodePriceMigration = goose.NewGoMigration(22,
	&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		for _, col := range []string{"vram_mb", "floor_gold", "floor_silver", "floor_bronze"} {
			if _, err := tx.ExecContext(ctx, `ALTER TABLE nodes ADD COLUMN `+col+` BIGINT NOT NULL DEFAULT 0`); err != nil {
				return err
			}
		}
		offers, err := storedOffers(ctx, tx)
		if err != nil {
			return err
		}
		for id, o := range offers { // as offerValues, as it was: a migration must not change with the code
			vram := 0
			for _, g := range o.GPUs {
				vram = max(vram, g.VRAMMB)
			}
			floor := o.Ask.FloorMicrosPerGPUHour
			if _, err := tx.ExecContext(ctx, `UPDATE nodes SET vram_mb = $1, floor_gold = $2, floor_silver = $3, floor_bronze = $4 WHERE id = $5`,
				vram, floor[idlegrid.TierGold], floor[idlegrid.TierSilver], floor[idlegrid.TierBronze], id); err != nil {
				return err
			}
		}
		return nil
	}},
	&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		for _, col := range []string{"vram_mb", "floor_gold", "floor_silver", "floor_bronze"} {
			if _, err := tx.ExecContext(ctx, `ALTER TABLE nodes DROP COLUMN `+col); err != nil {
				return err
			}
		}
		return nil
	}},
)

// nodeNameMigration (42) adds nodes.name, the offer's name, so that a
// node is found by name (NodeFilter.Name) without reading every offer,
// and fills it from the stored offers, as nodeSearchMigration does.
var nodeNameMigration = goose.NewGoMigration(42,
	&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		for _, q := range []string{
			`ALTER TABLE nodes ADD COLUMN name TEXT NOT NULL DEFAULT ''`,
			`CREATE INDEX nodes_name ON nodes (name)`,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		offers, err := storedOffers(ctx, tx)
		if err != nil {
			return err
		}
		for id, o := range offers {
			if _, err := tx.ExecContext(ctx, `UPDATE nodes SET name = $1 WHERE id = $2`, o.Name, id); err != nil {
				return err
			}
		}
		return nil
	}},
	&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		for _, q := range []string{`DROP INDEX nodes_name`, `ALTER TABLE nodes DROP COLUMN name`} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}},
)
