-- Usage receipts: each lease's chain of signed receipts, kept as the node
-- signed them (hash is the receipt's own, stored so the chain can be
-- followed without recomputing it). The primary key makes a sequence number
-- impossible to store twice; the rows are never changed or deleted.

-- +goose Up
CREATE TABLE lease_receipts (
	lease_id     TEXT NOT NULL REFERENCES leases (id),
	seq          BIGINT NOT NULL,
	start_at     BIGINT NOT NULL, -- unix microseconds, on the node's clock
	end_at       BIGINT NOT NULL,
	gpu_seconds  BIGINT NOT NULL,
	avg_util_pct BIGINT NOT NULL,
	energy_wh    BIGINT NOT NULL,
	prev_hash    TEXT NOT NULL,
	hash         TEXT NOT NULL,
	signature    TEXT NOT NULL, -- base64 ed25519 by the node's key
	PRIMARY KEY (lease_id, seq)
);

-- +goose Down
DROP TABLE lease_receipts;
