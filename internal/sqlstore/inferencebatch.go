package sqlstore

import (
	"context"
	"database/sql"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

// The gateway's meter hands RecordInference up to a few hundred charges at
// a time. Recorded one by one, each costs a savepoint and about ten
// statements (its usage row, its transfer, an entry and a balance per
// ledger account, an audit entry). recordBatch writes a whole batch with
// one multi-row statement per table instead, and posts the batch's
// charges as one transfer (ledger.InferenceBatch): its entries are the
// charges' entries summed per account, so each balance moves once by the
// batch's net, and the ledger and the audit log grow by one posting, not
// one per request. Every usage row names the posting that charged it. It
// gives up, undoing what it wrote, whenever the batch would not leave the
// balances exactly as one by one would: a balance that would go below
// zero (which charge is refused depends on their order), or an account
// both debited and credited (its path, not just its end, must stay at or
// above zero). The caller then records the charges one by one, each
// posting its own transfer. Either way a posting has its entries and its
// audit entry in the same transaction as its usage rows.

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
// undone. Its charges are posted as one transfer (ledger.InferenceBatch),
// whose ID every charged usage row names.
func writeBatch(ctx context.Context, tx *sql.Tx, cs []idlegrid.InferenceCharge) (ok bool, err error) {
	posting := idlegrid.NewID("tr")
	usage := make([][]any, len(cs))
	for i, c := range cs {
		u := c.Usage
		transferID := ""
		if c.Transfer != nil {
			transferID = posting
		}
		usage[i] = []any{u.ID, u.RenterID, u.KeyID, u.ProviderID, u.NodeID, u.Model, u.Endpoint, u.Stream,
			u.InputTokens, u.OutputTokens, string(u.Source), int64(u.ChargeMicros), int64(u.FeeMicros),
			u.LatencyMicros, u.TTFTMicros, u.Attempts, u.Status, timeArg(u.CreatedAt), transferID}
	}
	stored := make(map[string]bool, len(cs))
	err = writeRows(ctx, tx, `INSERT INTO inference_usage (id, renter_id, key_id, provider_id, node_id,
		model, endpoint, stream, input_tokens, output_tokens, source, charge_micros, fee_micros,
		latency_micros, ttft_micros, attempts, status, created_at, transfer_id)`, `ON CONFLICT (id) DO NOTHING RETURNING id`, usage,
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
	if err := addBatchSpent(ctx, tx, cs, stored); err != nil {
		return false, err
	}
	var ts []*idlegrid.Transfer
	first := ""
	for _, c := range cs {
		if c.Transfer != nil && stored[c.Usage.ID] { // a usage row seen before was charged with it
			delete(stored, c.Usage.ID) // the same ID twice in one batch is charged once
			ts = append(ts, c.Transfer)
			if first == "" {
				first = c.Usage.ID
			}
		}
	}
	if len(ts) == 0 {
		return true, nil
	}
	var all []idlegrid.Entry
	for _, t := range ts {
		all = append(all, t.Entries...)
	}
	if mixed(all) {
		return false, nil
	}
	// A request is charged only in the transaction that first stores its
	// usage row, so a newly stored row's own key was never posted.
	t := ledger.InferenceBatch(ts, first)
	t.ID = posting
	return postBatch(ctx, tx, t)
}

// addBatchSpent counts the charges of the batch's usage rows newly stored
// in their renters' and keys' spend, once per row.
func addBatchSpent(ctx context.Context, tx *sql.Tx, cs []idlegrid.InferenceCharge, stored map[string]bool) error {
	sums := spendSums{}
	counted := make(map[string]bool, len(stored))
	for _, c := range cs {
		if u := c.Usage; stored[u.ID] && !counted[u.ID] {
			counted[u.ID] = true
			sums.add(u.RenterID, u.KeyID, u.CreatedAt, u.ChargeMicros)
		}
	}
	return sums.write(ctx, tx)
}

// postBatch posts a batch's transfer, as postTransfer would, or says it
// cannot post it as one.
func postBatch(ctx context.Context, tx *sql.Tx, t *idlegrid.Transfer) (ok bool, err error) {
	if err := t.Validate(); err != nil {
		return false, nil // the one-by-one path names the charge at fault
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO transfers (id, idempotency_key, kind, lease_id, memo, created_at, gpu_seconds)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (idempotency_key) DO NOTHING`,
		t.ID, t.IdempotencyKey, string(t.Kind), t.LeaseID, t.Memo, timeArg(t.CreatedAt), t.GPUSeconds)
	if err := expectOne(res, err, func() error { return errSeen }); err == errSeen {
		return false, nil
	} else if err != nil {
		return false, err
	}
	entries := make([][]any, len(t.Entries))
	for j, e := range t.Entries {
		entries[j] = []any{t.ID, j, string(e.Account), e.Account.Owner(), int64(e.Amount)}
	}
	if err := writeRows(ctx, tx, `INSERT INTO ledger_entries (transfer_id, idx, account, owner, amount)`, ``, entries, nil); err != nil {
		return false, err
	}
	overdrawn := false
	if err := writeRows(ctx, tx, balancesInsert, balancesUpsert, balanceRows(netMoves(movesOf(t))),
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
	if err := appendAudit(tx)(audit.PostingEntry(t)); err != nil {
		return false, err
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
