-- Heartbeat spans (docs/trust.md, "Heartbeat spans"): each node's
-- heartbeats as the coordinator received them, merged into spans as they
-- arrive, so that a receipt's interval is checked against the heartbeats
-- actually heard inside it. Spans older than the receipt window are
-- pruned when the node next heartbeats.

-- +goose Up
CREATE TABLE heartbeat_spans (
	node_id    TEXT NOT NULL REFERENCES nodes (id),
	start_at   BIGINT NOT NULL, -- unix microseconds: the span's first heartbeat
	end_at     BIGINT NOT NULL, -- its last heartbeat plus one interval
	heartbeats BIGINT NOT NULL,
	PRIMARY KEY (node_id, start_at)
);
CREATE INDEX heartbeat_spans_end ON heartbeat_spans (node_id, end_at);

-- +goose Down
DROP TABLE heartbeat_spans;
