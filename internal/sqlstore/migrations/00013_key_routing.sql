-- An API key's default routing for the inference gateway: the "provider"
-- object its requests get when they send none, field by field
-- (idlegrid.KeyRouting, docs/gateway.md). routing is that object as JSON,
-- prices as decimal amounts; a request's own object overrides it.

-- +goose Up
CREATE TABLE key_routing (
	key_id     TEXT PRIMARY KEY REFERENCES api_keys (id),
	account_id TEXT NOT NULL REFERENCES accounts (id),
	routing    TEXT NOT NULL,
	updated_at BIGINT NOT NULL -- unix microseconds
);

-- +goose Down
DROP TABLE key_routing;
