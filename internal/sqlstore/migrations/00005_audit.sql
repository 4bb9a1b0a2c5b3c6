-- The audit log (internal/audit, docs/trust.md): every ledger posting,
-- receipt and lease transition, appended in the transaction that writes
-- it. idx is the entry's leaf index in the log's Merkle tree: 0, 1, 2… in
-- commit order, without gaps, because audit_log.size is taken and raised
-- by each appending transaction as its last write, under the row's lock.
-- Rows are never changed or deleted.

-- +goose Up
CREATE TABLE audit_log (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	size BIGINT NOT NULL -- entries in audit_entries
);
INSERT INTO audit_log (id, size) VALUES (1, 0);

CREATE TABLE audit_entries (
	idx       BIGINT PRIMARY KEY,
	kind      TEXT NOT NULL,
	at        BIGINT NOT NULL, -- unix microseconds
	entry     TEXT NOT NULL,   -- the entry as JSON: kind, subjects, payload, at
	leaf_hash TEXT NOT NULL    -- lower-case hex SHA-256(0x00 || leaf)
);

-- Who an entry concerns (accounts, leases, jobs, nodes), so each can list
-- their own.
CREATE TABLE audit_subjects (
	subject TEXT NOT NULL,
	idx     BIGINT NOT NULL REFERENCES audit_entries (idx),
	PRIMARY KEY (subject, idx)
);

-- +goose Down
DROP TABLE audit_subjects;
DROP TABLE audit_entries;
DROP TABLE audit_log;
