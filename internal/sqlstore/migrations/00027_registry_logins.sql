-- Renters' logins to private container registries (idlegrid.RegistryLogin),
-- handed to the node that starts one of their jobs whose image is on the
-- registry. secret is sealed by the server with a key the database does
-- not hold (internal/server/registry.go): a copy of the database alone
-- gives no one the renter's registry.

-- +goose Up
CREATE TABLE registry_logins (
	account_id TEXT NOT NULL REFERENCES accounts (id),
	registry   TEXT NOT NULL,
	username   TEXT NOT NULL,
	secret     BYTEA NOT NULL,
	created_at BIGINT NOT NULL, -- unix microseconds
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (account_id, registry)
);

-- +goose Down
DROP TABLE registry_logins;
