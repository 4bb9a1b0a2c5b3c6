-- The public key that signs the audit log's tree heads, recorded by the
-- first server to sign them (idlegrid.AuditSigner). Users hold heads
-- signed with it, so a server that starts with another key refuses to
-- serve rather than orphan them. signer_since is unix microseconds.

-- +goose Up
ALTER TABLE audit_log ADD COLUMN signer TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_log ADD COLUMN signer_since BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE audit_log DROP COLUMN signer_since;
ALTER TABLE audit_log DROP COLUMN signer;
