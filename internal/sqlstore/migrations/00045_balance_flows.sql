-- What each ledger account has taken in, and what penalties (upheld
-- disputes) took out of it, over all its entries: credited sums its
-- entries' positive amounts, refunded its negative amounts in penalty
-- transfers. They move with the balance, in the same statement, so the
-- market's summary reads what providers earned and the platform's fees
-- from a row per account rather than from every entry of the ledger.

-- +goose Up
ALTER TABLE balances ADD COLUMN credited BIGINT NOT NULL DEFAULT 0;
ALTER TABLE balances ADD COLUMN refunded BIGINT NOT NULL DEFAULT 0;
UPDATE balances SET
	credited = (SELECT COALESCE(SUM(e.amount), 0) FROM ledger_entries e WHERE e.account = balances.account AND e.amount > 0),
	refunded = (SELECT COALESCE(SUM(-e.amount), 0) FROM ledger_entries e JOIN transfers r ON r.id = e.transfer_id
		WHERE e.account = balances.account AND e.amount < 0 AND r.kind = 'penalty');

-- +goose Down
ALTER TABLE balances DROP COLUMN refunded;
ALTER TABLE balances DROP COLUMN credited;
