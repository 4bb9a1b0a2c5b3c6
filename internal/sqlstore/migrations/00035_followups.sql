-- Follow-ups: the outbox of work that must follow a commit (see
-- idlegrid.FollowUp, internal/sqlstore/followup.go). A lease's end writes
-- its follow-up in the transaction that ends it; the server removes it
-- once the work is done, and the reaper does it again from here when it is
-- still pending at due_at, say after a crash. Times are unix microseconds.

-- +goose Up
CREATE TABLE follow_ups (
	id         TEXT PRIMARY KEY,
	kind       TEXT NOT NULL,
	body       TEXT NOT NULL,
	tries      INTEGER NOT NULL DEFAULT 0,
	due_at     BIGINT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE INDEX follow_ups_due ON follow_ups (due_at, id);

-- +goose Down
DROP TABLE follow_ups;
