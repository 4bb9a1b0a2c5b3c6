-- Inference usage: one row per request the OpenAI-compatible gateway
-- metered (internal/gateway), with its tokens, its charge and its timing.
-- The charge itself is a transfer of kind "inference" in the ledger, keyed
-- "inference:<id>"; this row is what spend limits and statistics read.

-- +goose Up
CREATE TABLE inference_usage (
	id             TEXT PRIMARY KEY,
	renter_id      TEXT NOT NULL,
	key_id         TEXT NOT NULL,
	provider_id    TEXT NOT NULL,
	node_id        TEXT NOT NULL,
	model          TEXT NOT NULL,
	endpoint       TEXT NOT NULL,
	stream         BOOLEAN NOT NULL,
	input_tokens   BIGINT NOT NULL,
	output_tokens  BIGINT NOT NULL,
	source         TEXT NOT NULL,
	charge_micros  BIGINT NOT NULL,
	fee_micros     BIGINT NOT NULL,
	latency_micros BIGINT NOT NULL,
	ttft_micros    BIGINT NOT NULL,
	attempts       BIGINT NOT NULL,
	status         BIGINT NOT NULL,
	created_at     BIGINT NOT NULL -- unix microseconds
);
CREATE INDEX inference_usage_renter ON inference_usage (renter_id, created_at);
CREATE INDEX inference_usage_key ON inference_usage (key_id, created_at);
CREATE INDEX inference_usage_provider ON inference_usage (provider_id, created_at);

-- +goose Down
DROP TABLE inference_usage;
