-- When a node's owner (or an admin) began to drain it for maintenance
-- (idlegrid.Node.DrainingSince), unix microseconds; NULL when it is not
-- draining. The server offers a draining node to the market as closed.

-- +goose Up
ALTER TABLE nodes ADD COLUMN draining_since BIGINT;

-- +goose Down
ALTER TABLE nodes DROP COLUMN draining_since;
