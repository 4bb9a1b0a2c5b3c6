package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
)

// errSeen reports that a transfer's idempotency key was used before.
var errSeen = errors.New("idempotency key seen before")

// postTransfer validates t, records it and its entries, and moves the
// balances. An account that may not go negative never does: EPAYMENT. A
// transfer whose idempotency key was seen before is not applied: errSeen.
func postTransfer(ctx context.Context, tx *sql.Tx, t *idlegrid.Transfer) error {
	var later laterRows
	if err := postTransferLater(ctx, tx, t, &later); err != nil {
		return err
	}
	return later.insert(ctx, tx)
}

const transferInsert = `INSERT INTO transfers (id, idempotency_key, kind, lease_id, memo, created_at, gpu_seconds)`

// postTransferLater is postTransfer, but leaves t's entries to later,
// for the caller to insert before it commits. The transfer is recorded and
// the balances move now, unless later is a batch's (laterRows).
func postTransferLater(ctx context.Context, tx *sql.Tx, t *idlegrid.Transfer, later *laterRows) error {
	if err := t.Validate(); err != nil {
		return err
	} else if t.CreatedAt.IsZero() {
		return idlegrid.Invalid("transfer.created_at", "required")
	}
	if t.ID == "" {
		t.ID = idlegrid.NewID("xfer")
	}
	row := []any{t.ID, t.IdempotencyKey, string(t.Kind), t.LeaseID, t.Memo, timeArg(t.CreatedAt), t.GPUSeconds}
	if later.batched {
		later.transfers, later.moves = append(later.transfers, row), append(later.moves, movesOf(t)...)
	} else {
		res, err := tx.ExecContext(ctx, transferInsert+` VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (idempotency_key) DO NOTHING`, row...)
		if err := expectOne(res, err, func() error { return errSeen }); err != nil {
			return err
		}
		if err := moveBalances(ctx, tx, movesOf(t)); err != nil {
			return err
		}
	}
	for i, e := range t.Entries {
		later.entries = append(later.entries, []any{t.ID, i, string(e.Account), e.Account.Owner(), int64(e.Amount)})
	}
	return later.audit(tx, func() (audit.Entry, error) { return audit.PostingEntry(t) })
}

// balanceMove is what a write adds to an account's balance row: its net
// amount, and the credits in it and a penalty's refunds out of it
// (balances.credited and refunded), which Summary sums.
type balanceMove struct {
	account            idlegrid.LedgerAccount
	net                idlegrid.Micros
	credited, refunded idlegrid.Micros
}

// movesOf is t's entries as moves of their balances, one per entry.
func movesOf(t *idlegrid.Transfer) []balanceMove {
	ms := make([]balanceMove, len(t.Entries))
	for i, e := range t.Entries {
		ms[i] = balanceMove{account: e.Account, net: e.Amount}
		switch {
		case e.Amount > 0:
			ms[i].credited = e.Amount
		case t.Kind == idlegrid.TransferPenalty:
			ms[i].refunded = -e.Amount
		}
	}
	return ms
}

// netMoves sums ms per account, in account order.
func netMoves(ms []balanceMove) []balanceMove {
	sums := make(map[idlegrid.LedgerAccount]balanceMove, len(ms))
	for _, m := range ms {
		sum := sums[m.account]
		sum.account, sum.net, sum.credited, sum.refunded = m.account, sum.net+m.net, sum.credited+m.credited, sum.refunded+m.refunded
		sums[m.account] = sum
	}
	out := make([]balanceMove, 0, len(sums))
	for _, acct := range slices.Sorted(maps.Keys(sums)) {
		out = append(out, sums[acct])
	}
	return out
}

// balancesInsert and balancesUpsert head and tail the statement that
// moves balances by balanceRows, returning each account's balance after.
const (
	balancesInsert = `INSERT INTO balances (account, balance, credited, refunded)`
	balancesUpsert = `ON CONFLICT (account) DO UPDATE SET balance = balances.balance + excluded.balance,
		credited = balances.credited + excluded.credited, refunded = balances.refunded + excluded.refunded
		RETURNING account, balance`
)

// balanceRows is ms as rows of balancesInsert.
func balanceRows(ms []balanceMove) [][]any {
	rows := make([][]any, len(ms))
	for i, m := range ms {
		rows[i] = []any{string(m.account), int64(m.net), int64(m.credited), int64(m.refunded)}
	}
	return rows
}

// moveBalances moves each account's balance by its moves, summed, in
// multi-row statements, refusing to take an account that may not go
// negative below zero. It moves each account once, in account order, so
// that concurrent transactions lock balances in one order.
func moveBalances(ctx context.Context, tx *sql.Tx, moves []balanceMove) error {
	net := netMoves(moves)
	if len(net) == 0 {
		return nil
	}
	amounts := make(map[idlegrid.LedgerAccount]idlegrid.Micros, len(net))
	for _, m := range net {
		amounts[m.account] = m.net
	}
	var short error
	err := writeRows(ctx, tx, balancesInsert, balancesUpsert, balanceRows(net), func(rs *sql.Rows) error {
		var account idlegrid.LedgerAccount
		var after int64
		if err := rs.Scan(&account, &after); err != nil {
			return err
		}
		if e := amounts[account]; after < 0 && !account.MayGoNegative() && short == nil {
			short = overdrawn(account, -e, idlegrid.Micros(after)-e)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return short
}

// overdrawn is the EPAYMENT error for taking need from account, which has have.
func overdrawn(account idlegrid.LedgerAccount, need, have idlegrid.Micros) error {
	if strings.HasPrefix(string(account), "renter:") && strings.HasSuffix(string(account), ":available") {
		return idlegrid.Errorf(idlegrid.EPAYMENT, "renter balance too low: need %s, have %s; top up (account %s)",
			need, have, account)
	}
	if strings.HasPrefix(string(account), "provider:") && strings.HasSuffix(string(account), ":payable") {
		return idlegrid.Errorf(idlegrid.EPAYMENT, "payable earnings too low: need %s, have %s; earnings become payable once the payout hold after their settlement has passed (account %s)",
			need, have, account)
	}
	if strings.HasPrefix(string(account), "provider:") && strings.HasSuffix(string(account), ":bond") {
		return idlegrid.Errorf(idlegrid.EPAYMENT, "bond too low: need %s, have %s (account %s): a release takes at most the bond left, and a penalty upheld again is priced on what is left",
			need, have, account)
	}
	return idlegrid.Errorf(idlegrid.EPAYMENT, "ledger account %s too low: need %s, have %s", account, need, have)
}

// postTransfers applies transfers that belong to a lease change; a replayed
// idempotency key there means the change was already made: ECONFLICT.
func postTransfers(ctx context.Context, tx *sql.Tx, ts []*idlegrid.Transfer) error {
	var later laterRows
	if err := postTransfersLater(ctx, tx, ts, &later); err != nil {
		return err
	}
	return later.insert(ctx, tx)
}

// postTransfersLater is postTransfers, leaving the entries to later.
func postTransfersLater(ctx context.Context, tx *sql.Tx, ts []*idlegrid.Transfer, later *laterRows) error {
	for _, t := range ts {
		err := postTransferLater(ctx, tx, t, later)
		if errors.Is(err, errSeen) {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "transfer %q was already applied", t.IdempotencyKey)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// PostTransfer applies t. A transfer whose idempotency key was seen before
// is not applied again: the stored one is returned, and ECONFLICT if its
// entries differ from t's.
func (db *DB) PostTransfer(ctx context.Context, t *idlegrid.Transfer) (*idlegrid.Transfer, error) {
	var out *idlegrid.Transfer
	err := db.update(ctx, func(tx *sql.Tx) (err error) {
		if t.Kind == idlegrid.TransferMature { // refunds may have taken part of the earnings since it was made
			if err := db.checkLeaseEarnings(ctx, tx, t); err != nil {
				return err
			}
		}
		out, err = postOnce(ctx, tx, t)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReleaseBond posts t, a release of providerID's bond, unless a dispute
// against the provider is open or a verification of its runs is deciding;
// a release its idempotency key made before is returned whatever opened
// since. The provider's account row is locked first, as OpenDispute locks
// it, so the two cannot pass each other.
func (db *DB) ReleaseBond(ctx context.Context, t *idlegrid.Transfer, providerID string) (*idlegrid.Transfer, error) {
	var out *idlegrid.Transfer
	err := db.update(ctx, func(tx *sql.Tx) (err error) {
		if err := lockAccount(ctx, tx, providerID, db.dialect.forUpdate); err != nil {
			return err
		}
		if _, err := findTransferByKey(ctx, tx, t.IdempotencyKey); err == nil { // a retry answers as the first did, whatever opened since
			out, err = postOnce(ctx, tx, t)
			return err
		}
		var open string
		err = tx.QueryRowContext(ctx, `SELECT id FROM disputes WHERE provider_id = $1 AND state = $2 ORDER BY created_at LIMIT 1`,
			providerID, string(idlegrid.DisputeOpen)).Scan(&open)
		if err == nil {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "dispute %s against you is open; the bond can be released once it is resolved", open)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// A run of the provider's still being compared may convict it
		// (its tie-break decides between it and another).
		err = tx.QueryRowContext(ctx, `SELECT id FROM verifications WHERE (original_provider = $1 OR rerun_provider = $1)
			AND state IN ($2, $3) ORDER BY created_at LIMIT 1`,
			providerID, string(idlegrid.VerificationRerunning), string(idlegrid.VerificationTiebreaking)).Scan(&open)
		if err == nil {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "verification %s of your work is still deciding; the bond can be released once it is decided "+
				"(idlegrid dispute verifications shows it; a run no node takes is given up within a day)", open)
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		out, err = postOnce(ctx, tx, t)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// postOnce applies t, or returns the transfer stored under its idempotency
// key when that was applied before with the same entries.
func postOnce(ctx context.Context, tx *sql.Tx, t *idlegrid.Transfer) (*idlegrid.Transfer, error) {
	err := postTransfer(ctx, tx, t)
	if err == nil {
		return t, nil
	} else if !errors.Is(err, errSeen) {
		return nil, err
	}
	stored, err := findTransferByKey(ctx, tx, t.IdempotencyKey)
	if err != nil {
		return nil, err
	} else if !sameEntries(stored.Entries, t.Entries) {
		e := idlegrid.Errorf(idlegrid.ECONFLICT, "idempotency key %q was used before for a different transfer", t.IdempotencyKey)
		e.Field = "idempotency_key" // the caller's to change: the CLI says how
		return nil, e
	}
	return stored, nil
}

func sameEntries(a, b []idlegrid.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

const transferColumns = `id, idempotency_key, kind, lease_id, memo, created_at, gpu_seconds`

func findTransferByKey(ctx context.Context, tx *sql.Tx, key string) (*idlegrid.Transfer, error) {
	ts, err := queryTransfers(ctx, tx, `SELECT `+transferColumns+` FROM transfers WHERE idempotency_key = $1`, key)
	if err != nil {
		return nil, err
	} else if len(ts) == 0 {
		return nil, idlegrid.Errorf(idlegrid.ENOTFOUND, "transfer %q not found", key)
	}
	return ts[0], nil
}

// queryTransfers runs q for transfers and fills in their entries.
func queryTransfers(ctx context.Context, tx *sql.Tx, q string, a ...any) ([]*idlegrid.Transfer, error) {
	rows, err := tx.QueryContext(ctx, q, a...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*idlegrid.Transfer
	for rows.Next() {
		var t idlegrid.Transfer
		var created sql.NullInt64
		if err := rows.Scan(&t.ID, &t.IdempotencyKey, &t.Kind, &t.LeaseID, &t.Memo, &created, &t.GPUSeconds); err != nil {
			return nil, err
		}
		t.CreatedAt = timeOf(created)
		out = append(out, &t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	for _, t := range out {
		if t.Entries, err = transferEntries(ctx, tx, t.ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func transferEntries(ctx context.Context, tx *sql.Tx, transferID string) ([]idlegrid.Entry, error) {
	rows, err := tx.QueryContext(ctx, `SELECT account, amount FROM ledger_entries
		WHERE transfer_id = $1 ORDER BY idx`, transferID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []idlegrid.Entry
	for rows.Next() {
		var e idlegrid.Entry
		if err := rows.Scan(&e.Account, &e.Amount); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// ListTransfers returns the transfers that match f, newest first.
func (db *DB) ListTransfers(ctx context.Context, f idlegrid.TransferFilter) ([]*idlegrid.Transfer, error) {
	var a args
	q := `SELECT ` + transferColumns + ` FROM transfers t WHERE 1 = 1`
	if f.AccountID != "" {
		q += ` AND EXISTS (SELECT 1 FROM ledger_entries e WHERE e.transfer_id = t.id AND e.owner = ` +
			a.add(f.AccountID) + `)`
	}
	if f.LeaseID != "" {
		q += ` AND lease_id = ` + a.add(f.LeaseID)
	}
	if len(f.Kinds) > 0 {
		q += ` AND kind IN ` + in(&a, f.Kinds)
	}
	if f.ID != "" {
		q += ` AND id = ` + a.add(f.ID)
	}
	if f.Before != "" { // the page after Before's; none if it is not a transfer
		q += ` AND (created_at, id) < (SELECT created_at, id FROM transfers WHERE id = ` + a.add(f.Before) + `)`
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ` + a.add(limitOf(f.Limit))
	var out []*idlegrid.Transfer
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryTransfers(ctx, tx, q, a...)
		return err
	})
	return out, err
}

// Balance returns the account holder's money: available and held from the
// renter's ledger accounts; pending, payable, in flight and bond from the
// provider's; spent from the charges of the renter's leases; paid out from
// the provider's settled payouts.
func (db *DB) Balance(ctx context.Context, accountID string) (*idlegrid.Balance, error) {
	b := &idlegrid.Balance{AccountID: accountID}
	err := db.view(ctx, func(tx *sql.Tx) error {
		if _, err := findAccount(ctx, tx, accountID); err != nil {
			return err
		}
		for _, x := range []struct {
			account idlegrid.LedgerAccount
			to      *idlegrid.Micros
		}{
			{idlegrid.RenterAvailable(accountID), &b.Available},
			{idlegrid.RenterHeld(accountID), &b.Held},
			{idlegrid.ProviderPending(accountID), &b.Pending},
			{idlegrid.ProviderPayable(accountID), &b.Payable},
			{idlegrid.ProviderPayout(accountID), &b.PayoutInFlight},
			{idlegrid.ProviderBond(accountID), &b.Bond},
		} {
			if err := sumInto(ctx, tx, x.to, `SELECT balance FROM balances WHERE account = $1`, string(x.account)); err != nil {
				return err
			}
		}
		if err := sumInto(ctx, tx, &b.PaidOut, `SELECT CAST(COALESCE(SUM(amount_micros), 0) AS BIGINT) FROM payouts
			WHERE provider_id = $1 AND state = $2`, accountID, string(idlegrid.PayoutSettled)); err != nil {
			return err
		}
		return sumInto(ctx, tx, &b.Spent, `SELECT CAST(COALESCE(SUM(charged_micros), 0) AS BIGINT) FROM spend_months
			WHERE account_id = $1 AND key_id = ''`, accountID)
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// sumInto scans one integer, no row being zero. Sums are written
// CAST(COALESCE(SUM(x), 0) AS BIGINT) because PostgreSQL sums BIGINT as
// NUMERIC.
func sumInto(ctx context.Context, tx *sql.Tx, to *idlegrid.Micros, q string, a ...any) error {
	var v int64
	err := tx.QueryRowContext(ctx, q, a...).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	*to = idlegrid.Micros(v)
	return nil
}

// ledgerSumQuery sums every balance; the ledger is sound when it is zero.
// LedgerSum and Backup's check of a copy ask it.
const ledgerSumQuery = `SELECT CAST(COALESCE(SUM(balance), 0) AS BIGINT) FROM balances`

// LedgerSum returns the sum of every account's balance, which is zero unless
// the ledger is broken.
func (db *DB) LedgerSum(ctx context.Context) (idlegrid.Micros, error) {
	var sum idlegrid.Micros
	err := db.view(ctx, func(tx *sql.Tx) error {
		return sumInto(ctx, tx, &sum, ledgerSumQuery)
	})
	return sum, err
}

// Summary counts the market at a glance.
func (db *DB) Summary(ctx context.Context) (*idlegrid.Summary, error) {
	s := &idlegrid.Summary{
		JobsByState:  map[idlegrid.JobState]int{},
		NodesByState: map[idlegrid.NodeState]int{},
	}
	err := db.view(ctx, func(tx *sql.Tx) error {
		if err := countBy(ctx, tx, `SELECT state, COUNT(*) FROM jobs GROUP BY state`, func(k string, n int) {
			s.JobsByState[idlegrid.JobState(k)] = n
		}); err != nil {
			return err
		}
		if err := countBy(ctx, tx, `SELECT state, COUNT(*) FROM nodes GROUP BY state`, func(k string, n int) {
			s.NodesByState[idlegrid.NodeState(k)] = n
		}); err != nil {
			return err
		}
		var total, busy, earnedGross, refundedEarnings, feesGross, refundedFees idlegrid.Micros
		for _, x := range []struct {
			to *idlegrid.Micros
			q  string
			a  []any
		}{
			{&total, `SELECT CAST(COALESCE(SUM(gpu_count), 0) AS BIGINT) FROM nodes WHERE state = $1`, []any{string(idlegrid.NodeOnline)}},
			{&busy, `SELECT COUNT(*) FROM gpu_claims`, nil},
			{&s.SpentMicros, `SELECT CAST(COALESCE(SUM(charged_micros), 0) AS BIGINT) FROM spend_months WHERE key_id = ''`, nil},
			{&s.HeldMicros, `SELECT CAST(COALESCE(SUM(balance), 0) AS BIGINT) FROM balances WHERE account LIKE 'renter:%:held'`, nil},
		} {
			if err := sumInto(ctx, tx, x.to, x.q, x.a...); err != nil {
				return err
			}
		}
		// What came in to the providers' pending earnings and the fees,
		// and what penalties refunded of them, from their balances' rows.
		if err := tx.QueryRowContext(ctx, `SELECT CAST(COALESCE(SUM(credited), 0) AS BIGINT), CAST(COALESCE(SUM(refunded), 0) AS BIGINT)
			FROM balances WHERE account LIKE 'provider:%:pending'`).Scan(&earnedGross, &refundedEarnings); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT CAST(COALESCE(SUM(credited), 0) AS BIGINT), CAST(COALESCE(SUM(refunded), 0) AS BIGINT)
			FROM balances WHERE account = $1`, string(idlegrid.PlatformFees)).Scan(&feesGross, &refundedFees); err != nil {
			return err
		}
		s.GPUsTotal, s.GPUsBusy = int(total), int(busy)
		s.EarnedMicros, s.FeesMicros = earnedGross-refundedEarnings, feesGross-refundedFees
		s.RefundedMicros = refundedEarnings + refundedFees
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func countBy(ctx context.Context, tx *sql.Tx, q string, put func(k string, n int)) error {
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return err
		}
		put(k, n)
	}
	return rows.Err()
}
