-- Kept responses: the answers of the gateway's Responses API
-- (POST /v1/responses) kept for their renters (keptresponse.go), so that a
-- later request may continue a conversation from one
-- (previous_response_id), and the renter may read one back or delete it.
--
-- A response names the one it continued (previous_id, '' for the first of
-- a conversation); a conversation is read back by following previous_id
-- from its latest response, by primary key. Each is kept until expires_at,
-- unix microseconds as created_at: it reads as gone from then on, and the
-- server's sweep deletes it by expires_at.

-- +goose Up
CREATE TABLE kept_responses (
	id          TEXT PRIMARY KEY,
	renter_id   TEXT NOT NULL,
	model       TEXT NOT NULL,
	previous_id TEXT NOT NULL DEFAULT '',
	input       TEXT NOT NULL, -- JSON array: the request's own input items
	response    TEXT NOT NULL, -- JSON object: the response as the renter got it
	created_at  BIGINT NOT NULL, -- unix microseconds
	expires_at  BIGINT NOT NULL  -- unix microseconds
);
CREATE INDEX kept_responses_expires ON kept_responses (expires_at);

-- +goose Down
DROP TABLE kept_responses;
