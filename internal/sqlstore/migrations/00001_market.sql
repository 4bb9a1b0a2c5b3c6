-- The market's tables. One schema serves SQLite and PostgreSQL: every time
-- is BIGINT unix microseconds in UTC (NULL for "not yet"), money is BIGINT
-- micros, nested values are JSON text, and every column that a query filters
-- on is a real, indexed column.

-- +goose Up
CREATE TABLE accounts (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	role       TEXT NOT NULL,
	created_at BIGINT NOT NULL
);

CREATE TABLE api_keys (
	id         TEXT PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts (id),
	name       TEXT NOT NULL,
	prefix     TEXT NOT NULL,
	hash       TEXT NOT NULL UNIQUE,
	created_at BIGINT NOT NULL,
	revoked_at BIGINT
);
CREATE INDEX api_keys_account_id ON api_keys (account_id);

CREATE TABLE join_tokens (
	id          TEXT PRIMARY KEY,
	provider_id TEXT NOT NULL REFERENCES accounts (id),
	name        TEXT NOT NULL,
	prefix      TEXT NOT NULL,
	hash        TEXT NOT NULL UNIQUE,
	max_uses    BIGINT NOT NULL,
	uses        BIGINT NOT NULL,
	expires_at  BIGINT NOT NULL,
	created_at  BIGINT NOT NULL,
	revoked_at  BIGINT
);
CREATE INDEX join_tokens_provider_id ON join_tokens (provider_id);

CREATE TABLE nodes (
	id               TEXT PRIMARY KEY,
	provider_id      TEXT NOT NULL REFERENCES accounts (id),
	public_key       TEXT NOT NULL UNIQUE,
	offer            TEXT NOT NULL, -- JSON idlegrid.Offer
	gpu_count        BIGINT NOT NULL,
	state            TEXT NOT NULL,
	last_heartbeat   BIGINT,
	agent_version    TEXT NOT NULL,
	reliability      DOUBLE PRECISION NOT NULL,
	leases_completed BIGINT NOT NULL,
	leases_failed    BIGINT NOT NULL,
	created_at       BIGINT NOT NULL
);
CREATE INDEX nodes_provider_id ON nodes (provider_id);
CREATE INDEX nodes_state ON nodes (state);

CREATE TABLE jobs (
	id             TEXT PRIMARY KEY,
	renter_id      TEXT NOT NULL REFERENCES accounts (id),
	spec           TEXT NOT NULL, -- JSON idlegrid.JobSpec
	state          TEXT NOT NULL,
	reason         TEXT NOT NULL,
	attempts       BIGINT NOT NULL,
	created_at     BIGINT NOT NULL,
	updated_at     BIGINT NOT NULL,
	started_at     BIGINT,
	ended_at       BIGINT,
	charged_micros BIGINT NOT NULL
);
CREATE INDEX jobs_renter_id ON jobs (renter_id, created_at);
CREATE INDEX jobs_state ON jobs (state, created_at);
CREATE INDEX jobs_created_at ON jobs (created_at);

CREATE TABLE leases (
	id             TEXT PRIMARY KEY,
	job_id         TEXT NOT NULL REFERENCES jobs (id),
	renter_id      TEXT NOT NULL REFERENCES accounts (id),
	node_id        TEXT NOT NULL REFERENCES nodes (id),
	provider_id    TEXT NOT NULL REFERENCES accounts (id),
	attempt        BIGINT NOT NULL,
	gpu_uuids      TEXT NOT NULL, -- JSON []string
	tier           TEXT NOT NULL,
	price_micros   BIGINT NOT NULL, -- per GPU-hour, locked at placement
	price_note     TEXT NOT NULL,
	limit_seconds  BIGINT NOT NULL,
	hold_micros    BIGINT NOT NULL,
	charged_micros BIGINT NOT NULL,
	state          TEXT NOT NULL,
	reason         TEXT NOT NULL,
	fault          TEXT NOT NULL,
	stop_requested TEXT NOT NULL,
	exit_code      BIGINT,
	progress       DOUBLE PRECISION NOT NULL,
	created_at     BIGINT NOT NULL,
	started_at     BIGINT,
	ended_at       BIGINT,
	events         BIGINT NOT NULL, -- lease_events written so far
	log_lines      BIGINT NOT NULL  -- lease_logs written so far
);
CREATE INDEX leases_job_id ON leases (job_id, attempt);
CREATE INDEX leases_node_id ON leases (node_id, created_at);
CREATE INDEX leases_provider_id ON leases (provider_id, created_at);
CREATE INDEX leases_renter_id ON leases (renter_id, created_at);
CREATE INDEX leases_state ON leases (state, created_at);
CREATE INDEX leases_created_at ON leases (created_at);

-- A GPU claim exists while a lease is live. The primary key is what makes
-- assigning one GPU twice impossible.
CREATE TABLE gpu_claims (
	node_id  TEXT NOT NULL REFERENCES nodes (id),
	gpu_uuid TEXT NOT NULL,
	lease_id TEXT NOT NULL REFERENCES leases (id),
	PRIMARY KEY (node_id, gpu_uuid)
);
CREATE INDEX gpu_claims_lease_id ON gpu_claims (lease_id);

CREATE TABLE lease_events (
	lease_id   TEXT NOT NULL REFERENCES leases (id),
	seq        BIGINT NOT NULL,
	from_state TEXT NOT NULL,
	to_state   TEXT NOT NULL,
	reason     TEXT NOT NULL,
	at         BIGINT NOT NULL,
	PRIMARY KEY (lease_id, seq)
);

CREATE TABLE lease_logs (
	lease_id TEXT NOT NULL REFERENCES leases (id),
	seq      BIGINT NOT NULL,
	at       BIGINT,
	stream   TEXT NOT NULL,
	text     TEXT NOT NULL,
	PRIMARY KEY (lease_id, seq)
);

CREATE TABLE transfers (
	id              TEXT PRIMARY KEY,
	idempotency_key TEXT NOT NULL UNIQUE,
	kind            TEXT NOT NULL,
	lease_id        TEXT NOT NULL, -- '' when the transfer is not about a lease
	memo            TEXT NOT NULL,
	created_at      BIGINT NOT NULL
);
CREATE INDEX transfers_lease_id ON transfers (lease_id);
CREATE INDEX transfers_created_at ON transfers (created_at);

CREATE TABLE ledger_entries (
	transfer_id TEXT NOT NULL REFERENCES transfers (id),
	idx         BIGINT NOT NULL,
	account     TEXT NOT NULL,
	owner       TEXT NOT NULL, -- LedgerAccount.Owner(), '' for market accounts
	amount      BIGINT NOT NULL,
	PRIMARY KEY (transfer_id, idx)
);
CREATE INDEX ledger_entries_account ON ledger_entries (account);
CREATE INDEX ledger_entries_owner ON ledger_entries (owner);

-- balances is the sum of ledger_entries per account, kept in the same
-- transaction as the entries so that a balance check is one row read.
CREATE TABLE balances (
	account TEXT PRIMARY KEY,
	balance BIGINT NOT NULL
);

-- +goose Down
DROP TABLE balances;
DROP TABLE ledger_entries;
DROP TABLE transfers;
DROP TABLE lease_logs;
DROP TABLE lease_events;
DROP TABLE gpu_claims;
DROP TABLE leases;
DROP TABLE jobs;
DROP TABLE nodes;
DROP TABLE join_tokens;
DROP TABLE api_keys;
DROP TABLE accounts;
