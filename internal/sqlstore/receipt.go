package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
)

// AppendReceipts stores a lease's next receipts in one transaction. It
// locks the lease, so that receipts and the lease's end are applied one
// after the other: a lease that has ended takes no more receipts
// (ECONFLICT), and the first receipt must follow the last stored in Seq and
// chain (ECONFLICT otherwise, e.g. when a concurrent call stored it first).
// The receipts' contents are the caller's to check.
func (db *DB) AppendReceipts(ctx context.Context, leaseID string, rs []idlegrid.Receipt) error {
	if len(rs) == 0 {
		return nil
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		l, err := findLease(ctx, tx, leaseID, db.dialect.forUpdate)
		if err != nil {
			return err
		} else if l.State.Terminal() {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s has already ended (%s); it takes no more receipts", leaseID, l.State)
		}
		last, err := lastReceipt(ctx, tx, leaseID)
		if err != nil {
			return err
		}
		for i := range rs {
			if err := appendReceipt(ctx, tx, leaseID, last, &rs[i]); err != nil {
				return err
			} else if err := appendAudit(tx)(audit.ReceiptEntry(l, &rs[i], rs[i].End)); err != nil {
				return err
			}
			last = &rs[i]
		}
		return nil
	})
}

// appendReceipt inserts r if it follows last.
func appendReceipt(ctx context.Context, tx *sql.Tx, leaseID string, last, r *idlegrid.Receipt) error {
	wantSeq, wantPrev := int64(1), ""
	if last != nil {
		wantSeq, wantPrev = last.Seq+1, last.Hash()
	}
	switch {
	case r.LeaseID != leaseID:
		return idlegrid.Invalid("receipt.lease_id", "receipt %d is for lease %s, not %s", r.Seq, r.LeaseID, leaseID)
	case r.Seq != wantSeq || r.PrevHash != wantPrev:
		return idlegrid.Errorf(idlegrid.ECONFLICT, "receipt %d of lease %s does not follow the last stored; the next is %d",
			r.Seq, leaseID, wantSeq)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO lease_receipts (lease_id, seq, start_at, end_at, gpu_seconds,
		avg_util_pct, energy_wh, prev_hash, hash, signature) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		leaseID, r.Seq, r.Start.UnixMicro(), r.End.UnixMicro(), r.GPUSeconds, int64(r.AvgUtilPct), r.EnergyWh,
		r.PrevHash, r.Hash(), r.Signature)
	return err
}

const receiptColumns = `lease_id, seq, start_at, end_at, gpu_seconds, avg_util_pct, energy_wh, prev_hash, signature`

func scanReceipt(s scanner) (idlegrid.Receipt, error) {
	var r idlegrid.Receipt
	var start, end sql.NullInt64
	err := s.Scan(&r.LeaseID, &r.Seq, &start, &end, &r.GPUSeconds, &r.AvgUtilPct, &r.EnergyWh, &r.PrevHash, &r.Signature)
	r.Start, r.End = timeOf(start), timeOf(end)
	return r, err
}

// lastReceipt returns the lease's receipt with the highest Seq, or nil.
func lastReceipt(ctx context.Context, tx *sql.Tx, leaseID string) (*idlegrid.Receipt, error) {
	r, err := scanReceipt(tx.QueryRowContext(ctx, `SELECT `+receiptColumns+` FROM lease_receipts
		WHERE lease_id = $1 ORDER BY seq DESC LIMIT 1`, leaseID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return &r, nil
}

// ListReceipts returns every receipt of the lease, in Seq order.
func (db *DB) ListReceipts(ctx context.Context, leaseID string) ([]idlegrid.Receipt, error) {
	var out []idlegrid.Receipt
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		if _, err := findLease(ctx, tx, leaseID, ""); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+receiptColumns+` FROM lease_receipts
			WHERE lease_id = $1 ORDER BY seq`, leaseID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanReceipt(rows)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}

// lastReceiptsChunk is how many leases one LastReceipts query names, well
// under the bind-variable limits of SQLite and PostgreSQL.
const lastReceiptsChunk = 500

// LastReceipts returns the last receipt of each of the leases that has one,
// by lease ID, from one snapshot, a query per lastReceiptsChunk leases.
func (db *DB) LastReceipts(ctx context.Context, leaseIDs []string) (map[string]*idlegrid.Receipt, error) {
	out := make(map[string]*idlegrid.Receipt, len(leaseIDs))
	err := db.view(ctx, func(tx *sql.Tx) error {
		clear(out)
		for chunk := range slices.Chunk(leaseIDs, lastReceiptsChunk) {
			if err := lastReceiptsOf(ctx, tx, chunk, out); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

func lastReceiptsOf(ctx context.Context, tx *sql.Tx, leaseIDs []string, out map[string]*idlegrid.Receipt) error {
	var a args
	in := make([]string, len(leaseIDs))
	for i, id := range leaseIDs {
		in[i] = a.add(id)
	}
	last, err := queryAll(ctx, tx, scanReceiptPtr, `SELECT `+receiptColumns+` FROM lease_receipts
		WHERE lease_id IN (`+strings.Join(in, ", ")+`)
		AND seq = (SELECT MAX(m.seq) FROM lease_receipts m WHERE m.lease_id = lease_receipts.lease_id)`, a...)
	for _, r := range last {
		out[r.LeaseID] = r
	}
	return err
}

func scanReceiptPtr(s scanner) (*idlegrid.Receipt, error) {
	r, err := scanReceipt(s)
	return &r, err
}

// ReceiptUsage returns the sum of the lease's receipts' GPU-seconds and its
// last receipt (nil when it has none), from one snapshot.
func (db *DB) ReceiptUsage(ctx context.Context, leaseID string) (int64, *idlegrid.Receipt, error) {
	var sum int64
	var last *idlegrid.Receipt
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		if _, err := findLease(ctx, tx, leaseID, ""); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(gpu_seconds), 0) FROM lease_receipts
			WHERE lease_id = $1`, leaseID).Scan(&sum); err != nil {
			return err
		}
		last, err = lastReceipt(ctx, tx, leaseID)
		return err
	})
	return sum, last, err
}
