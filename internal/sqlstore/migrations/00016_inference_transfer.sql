-- The posting that charged each metered request: its own transfer (key
-- "inference:<id>"), or the one transfer its batch was posted as (key
-- "inference-batch:<first id>", internal/ledger InferenceBatch). Rows
-- stored before this migration name none ('') and were posted one by one.

-- +goose Up
ALTER TABLE inference_usage ADD COLUMN transfer_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE inference_usage DROP COLUMN transfer_id;
