-- What the store keeps only for a while (internal/sqlstore/expiry.go).
--
-- A job submission's idempotency key is kept while its job is live and
-- for a while after it ends; the sweep finds the keys of ended jobs by
-- when they ended. Jobs without a key are not in the index, and keys are
-- cleared once forgotten, so it holds only the recent ones.
--
-- A registry login expires when it has been neither set nor handed to a
-- node for a while: active_at is the later of the two, unix
-- microseconds. The uses of a login kept before this column existed are
-- not known, so migration 36 (registryLoginsActiveMigration) counts it
-- active from the upgrade: a login in daily use must not expire with it.

-- +goose Up
CREATE INDEX jobs_idempotency_ended ON jobs (ended_at) WHERE idempotency_key <> '';
ALTER TABLE registry_logins ADD COLUMN active_at BIGINT NOT NULL DEFAULT 0;
CREATE INDEX registry_logins_active ON registry_logins (active_at);

-- +goose Down
DROP INDEX registry_logins_active;
ALTER TABLE registry_logins DROP COLUMN active_at;
DROP INDEX jobs_idempotency_ended;
