-- What an upheld dispute refunded to the harmed renter of the platform's
-- fee on the lease (idlegrid.Dispute.FeeRefundMicros, ledger.RefundFee):
-- what neither the bond nor the lease's pending earnings paid of the harm.

-- +goose Up
ALTER TABLE disputes ADD COLUMN fee_refund_micros BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE disputes DROP COLUMN fee_refund_micros;
