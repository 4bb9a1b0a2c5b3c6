-- A background response's hold: until when the server that runs it
-- vouches for its run (unix microseconds; NULL for a response answered
-- whole, and for those kept before holds). The run renews it while the
-- response is queued or in progress; one still unfinished after its hold
-- ran on a server that stopped, and any server that reads it records it
-- failed (internal/gateway/background.go).

-- +goose Up
ALTER TABLE kept_responses ADD COLUMN held_until BIGINT;

-- +goose Down
ALTER TABLE kept_responses DROP COLUMN held_until;
