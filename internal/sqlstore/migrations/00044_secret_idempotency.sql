-- The Idempotency-Key an API key or a join token was created with ('' when
-- none; idlegrid.APIKey.IdempotencyKey, JoinToken.IdempotencyKey): the
-- same creation sent again with it finds the first instead of making
-- another, and gives it a new secret, the first being shown once and never
-- kept. Each account has its own space of keys.

-- +goose Up
ALTER TABLE api_keys ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX api_keys_idempotency_key ON api_keys (account_id, idempotency_key) WHERE idempotency_key <> '';
ALTER TABLE join_tokens ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX join_tokens_idempotency_key ON join_tokens (provider_id, idempotency_key) WHERE idempotency_key <> '';

-- +goose Down
DROP INDEX join_tokens_idempotency_key;
ALTER TABLE join_tokens DROP COLUMN idempotency_key;
DROP INDEX api_keys_idempotency_key;
ALTER TABLE api_keys DROP COLUMN idempotency_key;
