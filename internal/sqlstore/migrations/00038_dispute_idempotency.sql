-- The operator's Idempotency-Key of a dispute's opening ('' when it had
-- none; the market's own disputes have none) and the SHA-256 of what was
-- asked under it (idlegrid.Dispute.IdempotencyKey, RequestSHA256): the
-- same request sent again with the key finds this dispute instead of
-- opening another; another request with it is refused. Admins share one
-- space of keys.

-- +goose Up
ALTER TABLE disputes ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT '';
ALTER TABLE disputes ADD COLUMN request_sha256 TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX disputes_idempotency_key ON disputes (idempotency_key) WHERE idempotency_key <> '';

-- +goose Down
DROP INDEX disputes_idempotency_key;
ALTER TABLE disputes DROP COLUMN request_sha256;
ALTER TABLE disputes DROP COLUMN idempotency_key;
