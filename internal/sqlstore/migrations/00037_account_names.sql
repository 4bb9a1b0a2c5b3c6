-- An account's name is unique among the accounts of its role
-- (idlegrid.Account), so that no one makes a second renter "acme" by
-- accident. Accounts made before then keep their names: of those of one
-- role and name, the oldest holds the name, and the others are marked
-- duplicate_name and left out of the index, so that the upgrade never
-- fails on a market that has them.
--
-- idempotency_key is the admin's Idempotency-Key of the account's creation
-- ('' when it had none): the same creation sent again with it finds this
-- account instead of making another. Admins share one space of keys.

-- +goose Up
ALTER TABLE accounts ADD COLUMN duplicate_name INTEGER NOT NULL DEFAULT 0;
UPDATE accounts SET duplicate_name = 1 WHERE EXISTS (
	SELECT 1 FROM accounts older
	WHERE older.role = accounts.role AND older.name = accounts.name
		AND (older.created_at, older.id) < (accounts.created_at, accounts.id));
CREATE UNIQUE INDEX accounts_role_name ON accounts (role, name) WHERE duplicate_name = 0;
ALTER TABLE accounts ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX accounts_idempotency_key ON accounts (idempotency_key) WHERE idempotency_key <> '';

-- +goose Down
DROP INDEX accounts_idempotency_key;
ALTER TABLE accounts DROP COLUMN idempotency_key;
DROP INDEX accounts_role_name;
ALTER TABLE accounts DROP COLUMN duplicate_name;
