-- A node's live leases, found without reading its past ones: the reaper
-- asks each pass which offline nodes still hold one (LeavingHeartbeats),
-- and ending or draining a node lists them.

-- +goose Up
CREATE INDEX leases_node_state ON leases (node_id, state);

-- +goose Down
DROP INDEX leases_node_state;
