package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/idlegrid/idlegrid"
)

var _ idlegrid.InferenceStore = (*DB)(nil)

// RecordInference stores the gateway's metered requests and posts their
// charges, in one transaction: all at once when it can (recordBatch),
// otherwise each behind a savepoint.
func (db *DB) RecordInference(ctx context.Context, cs []idlegrid.InferenceCharge) []error {
	invalid := make([]error, len(cs))
	var valid []idlegrid.InferenceCharge
	for i, c := range cs {
		if c.Usage == nil {
			invalid[i] = idlegrid.Invalid("inference_usage", "required")
		} else if err := c.Usage.Validate(); err != nil {
			invalid[i] = err
		} else {
			valid = append(valid, c)
		}
	}
	errs := make([]error, len(cs))
	err := db.update(ctx, func(tx *sql.Tx) error {
		copy(errs, invalid) // a retried transaction starts again
		if len(valid) > 0 {
			if done, err := db.recordBatch(ctx, tx, valid); err != nil || done {
				return err
			}
		}
		for i, c := range cs {
			if errs[i] != nil {
				continue
			}
			failed, err := db.recordBehindSavepoint(ctx, tx, c)
			if err != nil {
				return err
			}
			errs[i] = failed
		}
		return nil
	})
	if err != nil {
		err = db.dialect.translate(err)
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs
}

// recordBehindSavepoint stores one charge, rolling it back alone when it
// fails; err breaks the whole transaction.
func (db *DB) recordBehindSavepoint(ctx context.Context, tx *sql.Tx, c idlegrid.InferenceCharge) (failed, err error) {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT inference`); err != nil {
		return nil, err
	}
	mark := auditMark(tx)
	if failed = recordInference(ctx, tx, c); failed != nil {
		if db.dialect.retryable(failed) {
			return nil, failed
		}
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT inference`); err != nil {
			return nil, err
		}
		auditUndo(tx, mark)
	}
	if _, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT inference`); err != nil {
		return nil, err
	}
	if failed == errSeen {
		failed = nil
	}
	return db.dialect.translate(failed), nil
}

func recordInference(ctx context.Context, tx *sql.Tx, c idlegrid.InferenceCharge) error {
	u := c.Usage
	transferID := ""
	if c.Transfer != nil {
		if c.Transfer.ID == "" {
			c.Transfer.ID = idlegrid.NewID("xfer")
		}
		transferID = c.Transfer.ID
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO inference_usage (id, renter_id, key_id, provider_id, node_id,
		model, endpoint, stream, input_tokens, output_tokens, source, charge_micros, fee_micros,
		latency_micros, ttft_micros, attempts, status, created_at, transfer_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
		ON CONFLICT (id) DO NOTHING`,
		u.ID, u.RenterID, u.KeyID, u.ProviderID, u.NodeID, u.Model, u.Endpoint, u.Stream,
		u.InputTokens, u.OutputTokens, string(u.Source), int64(u.ChargeMicros), int64(u.FeeMicros),
		u.LatencyMicros, u.TTFTMicros, u.Attempts, u.Status, timeArg(u.CreatedAt), transferID)
	if err := expectOne(res, err, func() error { return errSeen }); err != nil {
		return err
	}
	if err := addSpent(ctx, tx, u.RenterID, u.KeyID, u.CreatedAt, u.ChargeMicros); err != nil {
		return err
	}
	if c.Transfer == nil {
		return nil
	}
	return postTransfer(ctx, tx, c.Transfer)
}

// InferenceTotals adds up a month of a renter's requests by model, or of a
// provider's by node and model, each node named as its offer names it.
func (db *DB) InferenceTotals(ctx context.Context, f idlegrid.SettlementFilter) ([]*idlegrid.InferenceTotal, error) {
	if (f.RenterID == "") == (f.ProviderID == "") {
		return nil, idlegrid.Invalid("filter", "name exactly one of a renter and a provider")
	} else if !f.From.Before(f.To) {
		return nil, idlegrid.Invalid("filter.from", "must be before to")
	}
	who, node, by := "renter_id", "''", "model"
	if f.ProviderID != "" {
		who, node, by = "provider_id", "node_id", "node_id, model"
	}
	q := `SELECT ` + node + `, model, COUNT(*), CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT),
		CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT), CAST(COALESCE(SUM(charge_micros), 0) AS BIGINT),
		CAST(COALESCE(SUM(fee_micros), 0) AS BIGINT) FROM inference_usage
		WHERE ` + who + ` = $1 AND created_at >= $2 AND created_at < $3 GROUP BY ` + by + ` ORDER BY ` + by
	var out []*idlegrid.InferenceTotal
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		err := queryEach(ctx, tx, q, []any{f.RenterID + f.ProviderID, timeArg(f.From), timeArg(f.To)}, func(rows *sql.Rows) error {
			var x idlegrid.InferenceTotal
			if err := rows.Scan(&x.NodeID, &x.Model, &x.Requests, &x.InputTokens, &x.OutputTokens,
				&x.ChargedMicros, &x.FeesMicros); err != nil {
				return err
			}
			out = append(out, &x)
			return nil
		})
		if err != nil {
			return err
		}
		return nameNodes(ctx, tx, out)
	})
	return out, err
}

// nameNodes sets each total's node name from its node's offer.
func nameNodes(ctx context.Context, tx *sql.Tx, ts []*idlegrid.InferenceTotal) error {
	names := map[string]string{}
	for _, x := range ts {
		if x.NodeID == "" {
			continue
		}
		if _, ok := names[x.NodeID]; !ok {
			name, err := nodeName(ctx, tx, x.NodeID)
			if err != nil {
				return err
			}
			names[x.NodeID] = name
		}
		x.NodeName = names[x.NodeID]
	}
	return nil
}

// nodeName is the name node id's offer gives it: "" for a node no longer
// stored.
func nodeName(ctx context.Context, tx *sql.Tx, id string) (string, error) {
	var offer string
	err := tx.QueryRowContext(ctx, `SELECT offer FROM nodes WHERE id = $1`, id).Scan(&offer)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	var o idlegrid.Offer
	err = jsonOf(offer, &o)
	return o.Name, err
}

// ListInferenceUsage returns an account's records, as renter or provider,
// newest first.
func (db *DB) ListInferenceUsage(ctx context.Context, f idlegrid.UsageFilter) ([]*idlegrid.InferenceUsage, error) {
	a := args{f.AccountID}
	q := `SELECT id, renter_id, key_id, provider_id, node_id, model, endpoint,
		stream, input_tokens, output_tokens, source, charge_micros, fee_micros, latency_micros,
		ttft_micros, attempts, status, created_at, transfer_id FROM inference_usage
		WHERE (renter_id = $1 OR provider_id = $1)`
	if f.Before != "" {
		before := a.add(f.Before)
		at := `(SELECT created_at FROM inference_usage WHERE id = ` + before + `)`
		q += ` AND (created_at < ` + at + ` OR (created_at = ` + at + ` AND id < ` + before + `))`
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ` + a.add(limitOf(f.Limit))
	var out []*idlegrid.InferenceUsage
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		if err := checkCursor(ctx, tx, "inference_usage", `(renter_id = $1 OR provider_id = $1)`, args{f.AccountID}, f.Before, "request"); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, q, a...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var u idlegrid.InferenceUsage
			var created sql.NullInt64
			if err := rows.Scan(&u.ID, &u.RenterID, &u.KeyID, &u.ProviderID, &u.NodeID, &u.Model, &u.Endpoint,
				&u.Stream, &u.InputTokens, &u.OutputTokens, &u.Source, &u.ChargeMicros, &u.FeeMicros,
				&u.LatencyMicros, &u.TTFTMicros, &u.Attempts, &u.Status, &created, &u.TransferID); err != nil {
				return err
			}
			u.CreatedAt = timeOf(created)
			out = append(out, &u)
		}
		return rows.Err()
	})
	return out, err
}
