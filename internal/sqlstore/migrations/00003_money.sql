-- Money you can trust: provider earnings stay pending for the payout hold
-- and then become payable; payouts move them out of the market; spend
-- limits cap what an account or one of its keys may spend in a month;
-- notices tell a renter what the market did on its behalf; and every
-- settlement records the GPU-seconds it billed, for statements.

-- +goose Up
ALTER TABLE transfers ADD COLUMN gpu_seconds BIGINT NOT NULL DEFAULT 0;
CREATE INDEX transfers_kind ON transfers (kind, created_at);

ALTER TABLE jobs ADD COLUMN submitted_by_key TEXT NOT NULL DEFAULT '';
CREATE INDEX jobs_submitted_by_key ON jobs (submitted_by_key);
CREATE INDEX leases_renter_ended_at ON leases (renter_id, ended_at);

-- What providers earned before payout holds existed is pending now, and
-- matures like any other settlement.
UPDATE ledger_entries SET account = REPLACE(account, ':earned', ':pending')
	WHERE account LIKE 'provider:%:earned';
UPDATE balances SET account = REPLACE(account, ':earned', ':pending')
	WHERE account LIKE 'provider:%:earned';

CREATE TABLE payouts (
	id              TEXT PRIMARY KEY,
	provider_id     TEXT NOT NULL REFERENCES accounts (id),
	amount_micros   BIGINT NOT NULL,
	state           TEXT NOT NULL,
	reason          TEXT NOT NULL,
	idempotency_key TEXT NOT NULL,
	resolution_key  TEXT NOT NULL,
	resolved_by     TEXT NOT NULL,
	created_at      BIGINT NOT NULL,
	resolved_at     BIGINT,
	UNIQUE (provider_id, idempotency_key)
);
CREATE INDEX payouts_provider_id ON payouts (provider_id, created_at);
CREATE INDEX payouts_state ON payouts (state, created_at);

-- key_id is '' for an account's own limit.
CREATE TABLE spend_limits (
	scope        TEXT NOT NULL,
	account_id   TEXT NOT NULL REFERENCES accounts (id),
	key_id       TEXT NOT NULL,
	limit_micros BIGINT NOT NULL,
	set_by       TEXT NOT NULL,
	updated_at   BIGINT NOT NULL,
	PRIMARY KEY (scope, account_id, key_id)
);

CREATE TABLE notices (
	id         TEXT PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts (id),
	kind       TEXT NOT NULL,
	notice_key TEXT NOT NULL UNIQUE,
	lease_id   TEXT NOT NULL,
	job_id     TEXT NOT NULL,
	message    TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE INDEX notices_account_id ON notices (account_id, created_at);

-- +goose Down
DROP TABLE notices;
DROP TABLE spend_limits;
DROP TABLE payouts;
UPDATE balances SET account = REPLACE(account, ':pending', ':earned')
	WHERE account LIKE 'provider:%:pending';
UPDATE ledger_entries SET account = REPLACE(account, ':pending', ':earned')
	WHERE account LIKE 'provider:%:pending';
DROP INDEX leases_renter_ended_at;
DROP INDEX jobs_submitted_by_key;
ALTER TABLE jobs DROP COLUMN submitted_by_key;
DROP INDEX transfers_kind;
ALTER TABLE transfers DROP COLUMN gpu_seconds;
