-- Owners' schedules: when the owner of a node sets its schedule from the API
-- or the dashboard, it is kept here and applied to every offer the node's
-- agent publishes later, so that a restarting agent does not undo the edit.
-- published is what the agent last published, restored when the owner
-- removes their schedule.

-- +goose Up
CREATE TABLE node_schedules (
	node_id    TEXT PRIMARY KEY REFERENCES nodes (id),
	owner      TEXT NOT NULL, -- JSON idlegrid.Schedule
	published  TEXT NOT NULL, -- JSON idlegrid.Schedule
	updated_at BIGINT NOT NULL -- unix microseconds
);

-- +goose Down
DROP TABLE node_schedules;
