package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
)

// The audit log (internal/audit, docs/trust.md). Every posting, receipt
// and lease transition calls appendAudit in its own transaction; the
// entries wait, in memory, until the transaction is about to commit, and
// then flushAudit numbers and writes them as its last statements.
//
// Numbering last is what keeps the log gapless without deadlocks: an
// entry's index comes from the one audit_log row, which each appending
// transaction raises under that row's lock until it commits. Taken at the
// start, the lock would be held while the transaction waits for balances,
// leases and nodes that another transaction holds while it waits for the
// log: a deadlock on PostgreSQL. Taken last, it is never held while
// waiting for anything else.
//
// An entry appended behind a savepoint that is rolled back must go with
// it: placeBehindSavepoint marks the pending entries before the savepoint
// (auditMark) and drops those appended after it on rollback (auditUndo).

// auditEntry is an entry ready to be written.
type auditEntry struct {
	kind     string
	at       int64 // unix microseconds
	entry    string
	leafHash string
	subjects []string
}

// pendingAudit holds each open transaction's entries until it commits.
var pendingAudit = struct {
	sync.Mutex
	m map[*sql.Tx][]auditEntry
}{m: map[*sql.Tx][]auditEntry{}}

// appendAudit logs, in tx, the entry one of audit's makers returns:
//
//	return appendAudit(tx)(audit.PostingEntry(t))
//
// A maker's error (an entry that cannot be logged) fails the transaction.
func appendAudit(tx *sql.Tx) func(audit.Entry, error) error {
	return func(e audit.Entry, err error) error {
		row, err := encodeEntry(e, err)
		if err != nil {
			return err
		}
		addAudit(tx, row)
		return nil
	}
}

// encodeEntry is the row of the entry one of audit's makers returned, or
// its error.
func encodeEntry(e audit.Entry, err error) (auditEntry, error) {
	if err != nil {
		return auditEntry{}, fmt.Errorf("audit entry: %w", err)
	}
	return auditRow(e)
}

// addAudit logs rows, encoded, in tx.
func addAudit(tx *sql.Tx, rows ...auditEntry) {
	pendingAudit.Lock()
	defer pendingAudit.Unlock()
	pendingAudit.m[tx] = append(pendingAudit.m[tx], rows...)
}

// auditRow encodes e, which audit's makers have validated.
func auditRow(e audit.Entry) (auditEntry, error) {
	e.At = e.At.UTC()
	leaf, err := e.LeafHash()
	if err != nil {
		return auditEntry{}, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return auditEntry{}, fmt.Errorf("encode audit entry: %w", err)
	}
	return auditEntry{
		kind: string(e.Kind), at: e.At.UnixMicro(), entry: strings.TrimSpace(buf.String()),
		leafHash: leaf.String(), subjects: e.Subjects,
	}, nil
}

// auditMark is how many entries tx has pending.
func auditMark(tx *sql.Tx) int {
	pendingAudit.Lock()
	defer pendingAudit.Unlock()
	return len(pendingAudit.m[tx])
}

// auditUndo drops the entries tx appended after mark.
func auditUndo(tx *sql.Tx, mark int) {
	pendingAudit.Lock()
	defer pendingAudit.Unlock()
	if p := pendingAudit.m[tx]; len(p) > mark {
		pendingAudit.m[tx] = p[:mark]
	}
}

// auditDrop forgets tx's pending entries; every transaction ends with it.
func auditDrop(tx *sql.Tx) {
	pendingAudit.Lock()
	defer pendingAudit.Unlock()
	delete(pendingAudit.m, tx)
}

// flushAudit writes tx's pending entries at the end of the log and returns
// the index of the first. It is the last thing a transaction does before
// it commits.
func flushAudit(ctx context.Context, tx *sql.Tx) (uint64, error) {
	pendingAudit.Lock()
	rows := pendingAudit.m[tx]
	delete(pendingAudit.m, tx)
	pendingAudit.Unlock()
	if len(rows) == 0 {
		return 0, nil
	}
	var size int64
	err := tx.QueryRowContext(ctx, `UPDATE audit_log SET size = size + $1 WHERE id = 1 RETURNING size`,
		len(rows)).Scan(&size)
	if err != nil {
		return 0, err
	}
	first := size - int64(len(rows))
	var entries, subjects [][]any
	for i, r := range rows {
		idx := first + int64(i)
		entries = append(entries, []any{idx, r.kind, r.at, r.entry, r.leafHash})
		for _, s := range r.subjects {
			subjects = append(subjects, []any{s, idx})
		}
	}
	if err := insertRows(ctx, tx, `INSERT INTO audit_entries (idx, kind, at, entry, leaf_hash)`, entries); err != nil {
		return 0, err
	}
	return uint64(first), insertRows(ctx, tx, `INSERT INTO audit_subjects (subject, idx)`, subjects)
}

// AuditSize returns the number of entries in the audit log.
func (db *DB) AuditSize(ctx context.Context) (uint64, error) {
	var size int64
	err := db.view(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT size FROM audit_log WHERE id = 1`).Scan(&size)
	})
	return uint64(size), err
}

// AuditLeafHashes returns the leaf hashes of entries [start, end).
func (db *DB) AuditLeafHashes(ctx context.Context, start, end uint64) ([][32]byte, error) {
	if start > end {
		return nil, idlegrid.Invalid("start", "%d is after end %d", start, end)
	}
	out := make([][32]byte, 0, end-start)
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, `SELECT idx, leaf_hash FROM audit_entries
			WHERE idx >= $1 AND idx < $2 ORDER BY idx`, int64(start), int64(end))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var idx int64
			var h string
			if err := rows.Scan(&idx, &h); err != nil {
				return err
			}
			leaf, err := parseLeafHash(idx, h)
			if err != nil {
				return err
			}
			out = append(out, leaf)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	} else if uint64(len(out)) != end-start {
		return nil, idlegrid.Invalid("end", "the audit log has no entries [%d, %d): it has %d of them", start, end, len(out))
	}
	return out, nil
}

func parseLeafHash(idx int64, s string) ([32]byte, error) {
	var h [32]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("audit entry %d has a corrupt leaf hash %q", idx, s)
	}
	copy(h[:], b)
	return h, nil
}

// ListAuditEntries returns the entries f selects, in log order.
func (db *DB) ListAuditEntries(ctx context.Context, f idlegrid.AuditFilter) ([]*idlegrid.AuditEntry, error) {
	var a args
	q := `SELECT e.idx, e.entry, e.leaf_hash FROM audit_entries e WHERE e.idx >= ` + a.add(int64(f.From))
	if f.Subject != "" {
		q += ` AND e.idx IN (SELECT idx FROM audit_subjects WHERE subject = ` + a.add(f.Subject) +
			` AND idx >= ` + a.add(int64(f.From)) + `)`
	}
	if f.Before > 0 {
		q += ` AND e.idx < ` + a.add(int64(f.Before))
	}
	q += ` ORDER BY e.idx LIMIT ` + a.add(limitOf(f.Limit))
	var out []*idlegrid.AuditEntry
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, q, a...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var idx int64
			var entry, leaf string
			if err := rows.Scan(&idx, &entry, &leaf); err != nil {
				return err
			}
			e, err := scanAuditEntry(idx, entry, leaf)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}

func scanAuditEntry(idx int64, entry, leaf string) (*idlegrid.AuditEntry, error) {
	var e audit.Entry
	if err := json.Unmarshal([]byte(entry), &e); err != nil {
		return nil, fmt.Errorf("audit entry %d is corrupt: %w", idx, err)
	}
	h, err := parseLeafHash(idx, leaf)
	if err != nil {
		return nil, err
	}
	return &idlegrid.AuditEntry{
		Index: uint64(idx), Kind: string(e.Kind), Subjects: e.Subjects, Payload: e.Payload,
		At: e.At.UTC(), LeafHash: h,
	}, nil
}

// AppendAudit logs entries that record no other change, in one
// transaction, and returns the index of the first.
func (db *DB) AppendAudit(ctx context.Context, entries []*idlegrid.AuditEntry) (uint64, error) {
	if len(entries) == 0 {
		return 0, idlegrid.Invalid("entries", "give at least one entry")
	}
	var first uint64
	err := db.update(ctx, func(tx *sql.Tx) error {
		for i, e := range entries {
			x := audit.EntryOf(e)
			if err := appendAudit(tx)(x, x.Validate()); err != nil {
				return fmt.Errorf("entry %d: %w", i, err)
			}
		}
		var err error
		first, err = flushAudit(ctx, tx)
		return err
	})
	if err != nil {
		return 0, err
	}
	for i, e := range entries {
		x := audit.EntryOf(e)
		h, _ := x.LeafHash() // appendAudit checked it
		e.Index, e.LeafHash = first+uint64(i), h
	}
	return first, nil
}

// AuditSigner returns the key recorded as the log's signer, if any.
func (db *DB) AuditSigner(ctx context.Context) (idlegrid.AuditSigner, error) {
	var s idlegrid.AuditSigner
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		s, err = auditSigner(ctx, tx)
		return err
	})
	return s, err
}

// ClaimAuditSigner records s as the log's signer unless one is recorded.
func (db *DB) ClaimAuditSigner(ctx context.Context, s idlegrid.AuditSigner) (idlegrid.AuditSigner, error) {
	var f idlegrid.Faults
	f.Check(s.PublicKey != "", "audit_signer.public_key", "is required")
	f.Check(!s.Since.IsZero(), "audit_signer.since", "is required")
	if err := f.Err(); err != nil {
		return idlegrid.AuditSigner{}, err
	}
	var got idlegrid.AuditSigner
	err := db.update(ctx, func(tx *sql.Tx) (err error) {
		if _, err := tx.ExecContext(ctx, `UPDATE audit_log SET signer = $1, signer_since = $2 WHERE id = 1 AND signer = ''`,
			s.PublicKey, timeArg(s.Since)); err != nil {
			return err
		}
		got, err = auditSigner(ctx, tx)
		return err
	})
	return got, err
}

func auditSigner(ctx context.Context, tx *sql.Tx) (idlegrid.AuditSigner, error) {
	var key string
	var since sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT signer, signer_since FROM audit_log WHERE id = 1`).Scan(&key, &since); err != nil {
		return idlegrid.AuditSigner{}, err
	}
	if key == "" {
		return idlegrid.AuditSigner{}, nil
	}
	return idlegrid.AuditSigner{PublicKey: key, Since: timeOf(since)}, nil
}
