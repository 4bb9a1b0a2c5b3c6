package sqlstore

import (
	"context"
	"database/sql"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
)

// The gateway's meter hands RecordInference up to a few hundred charges at
// a time. Recorded one by one, each costs a savepoint and about ten
// statements (its usage row, its transfer, an entry and a balance per
// ledger account); recordBatch writes a whole batch with one multi-row
// statement per table instead, and moves each balance once by the batch's
// net. It gives up, undoing what it wrote, whenever the batch would not
// record exactly as one by one would: a balance that would go below zero
// (which charge is refused depends on their order), an account both
// debited and credited (its path, not just its end, must stay at or above
// zero), or a transfer whose idempotency key was seen before. The caller
// then records the charges one by one. Every posting still has its entries
// and its audit entry, in the same transaction as its usage row.

// recordBatch records cs, whose errs are nil, in one go behind a
// savepoint; done false: it changed nothing and the caller must record
// them one by one. err breaks the whole transaction.
func (db *DB) recordBatch(ctx context.Context, tx *sql.Tx, cs []idlegrid.InferenceCharge) (done bool, err error) {
	for _, c := range cs {
		if t := c.Transfer; t != nil && (t.Validate() != nil || t.CreatedAt.IsZero()) {
			return false, nil // the one-by-one path names the charge at fault
		}
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT inference_batch`); err != nil {
		return false, err
	}
	mark := auditMark(tx)
	ok, err := writeBatch(ctx, tx, cs)
	if err != nil && db.dialect.retryable(err) {
		return false, err
	}
	if err != nil || !ok {
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT inference_batch`); err != nil {
			return false, err
		}
		auditUndo(tx, mark)
	}
	if _, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT inference_batch`); err != nil {
		return false, err
	}
	return ok && err == nil, nil
}

// writeBatch writes the batch; ok false (or an error) when it must be
// undone.
func writeBatch(ctx context.Context, tx *sql.Tx, cs []idlegrid.InferenceCharge) (ok bool, err error) {
	usage := make([][]any, len(cs))
	for i, c := range cs {
		u := c.Usage
		usage[i] = []any{u.ID, u.RenterID, u.KeyID, u.ProviderID, u.NodeID, u.Model, u.Endpoint, u.Stream,
			u.InputTokens, u.OutputTokens, string(u.Source), int64(u.ChargeMicros), int64(u.FeeMicros),
			u.LatencyMicros, u.TTFTMicros, u.Attempts, u.Status, timeArg(u.CreatedAt)}
	}
	stored := make(map[string]bool, len(cs))
	err = writeRows(ctx, tx, `INSERT INTO inference_usage (id, renter_id, key_id, provider_id, node_id,
		model, endpoint, stream, input_tokens, output_tokens, source, charge_micros, fee_micros,
		latency_micros, ttft_micros, attempts, status, created_at)`, `ON CONFLICT (id) DO NOTHING RETURNING id`, usage,
		func(rows *sql.Rows) error {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			stored[id] = true
			return nil
		})
	if err != nil {
		return false, err
	}
	var ts []*idlegrid.Transfer
	for _, c := range cs {
		if c.Transfer != nil && stored[c.Usage.ID] { // a usage row seen before was charged with it
			delete(stored, c.Usage.ID) // the same ID twice in one batch is charged once
			ts = append(ts, c.Transfer)
		}
	}
	if len(ts) == 0 {
		return true, nil
	}
	return postBatch(ctx, tx, ts)
}

// postBatch posts transfers as postTransfer would each, or says it cannot.
func postBatch(ctx context.Context, tx *sql.Tx, ts []*idlegrid.Transfer) (ok bool, err error) {
	var all []idlegrid.Entry
	for _, t := range ts {
		all = append(all, t.Entries...)
	}
	if mixed(all) {
		return false, nil
	}
	transfers := make([][]any, len(ts))
	var entries [][]any
	for i, t := range ts {
		if t.ID == "" {
			t.ID = idlegrid.NewID("xfer")
		}
		transfers[i] = []any{t.ID, t.IdempotencyKey, string(t.Kind), t.LeaseID, t.Memo, timeArg(t.CreatedAt), t.GPUSeconds}
		for j, e := range t.Entries {
			entries = append(entries, []any{t.ID, j, string(e.Account), e.Account.Owner(), int64(e.Amount)})
		}
	}
	posted := 0
	if err := writeRows(ctx, tx, `INSERT INTO transfers (id, idempotency_key, kind, lease_id, memo, created_at, gpu_seconds)`,
		`ON CONFLICT (idempotency_key) DO NOTHING RETURNING id`, transfers,
		func(*sql.Rows) error { posted++; return nil }); err != nil {
		return false, err
	} else if posted != len(ts) {
		return false, nil // a key seen before: one by one, that charge is no error and no posting
	}
	if err := writeRows(ctx, tx, `INSERT INTO ledger_entries (transfer_id, idx, account, owner, amount)`, ``, entries, nil); err != nil {
		return false, err
	}
	nets := netEntries(all)
	balances := make([][]any, len(nets))
	for i, e := range nets {
		balances[i] = []any{string(e.Account), int64(e.Amount)}
	}
	overdrawn := false
	if err := writeRows(ctx, tx, `INSERT INTO balances (account, balance)`,
		`ON CONFLICT (account) DO UPDATE SET balance = balances.balance + excluded.balance RETURNING account, balance`, balances,
		func(rows *sql.Rows) error {
			var acct idlegrid.LedgerAccount
			var after int64
			if err := rows.Scan(&acct, &after); err != nil {
				return err
			}
			overdrawn = overdrawn || (after < 0 && !acct.MayGoNegative())
			return nil
		}); err != nil {
		return false, err
	} else if overdrawn {
		return false, nil
	}
	for _, t := range ts {
		if err := appendAudit(tx)(audit.PostingEntry(t)); err != nil {
			return false, err
		}
	}
	return true, nil
}

// mixed reports whether some account that may not go negative is both
// debited and credited among entries: only its net is checked in a batch.
func mixed(entries []idlegrid.Entry) bool {
	sign := map[idlegrid.LedgerAccount]int{}
	for _, e := range entries {
		if e.Account.MayGoNegative() || e.Amount == 0 {
			continue
		}
		s := 1
		if e.Amount < 0 {
			s = -1
		}
		if prev, ok := sign[e.Account]; ok && prev != s {
			return true
		}
		sign[e.Account] = s
	}
	return false
}
