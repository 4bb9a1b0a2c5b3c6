-- What an upheld dispute refunded to the harmed renter of the provider's
-- earnings from the lease, still pending in the payout hold
-- (idlegrid.Dispute.RefundMicros, ledger.Refund): the bond pays first,
-- the lease's earnings what the bond did not.

-- +goose Up
ALTER TABLE disputes ADD COLUMN refund_micros BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE disputes DROP COLUMN refund_micros;
