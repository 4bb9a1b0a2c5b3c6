-- The node that holds the checkpoint a requeued job resumes from
-- (idlegrid.Job.CheckpointNodeID), when the runtime kept it there: the job
-- resumes only on that node. '' when it has none, or the job was placed
-- elsewhere since.

-- +goose Up
ALTER TABLE jobs ADD COLUMN checkpoint_node_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE jobs DROP COLUMN checkpoint_node_id;
