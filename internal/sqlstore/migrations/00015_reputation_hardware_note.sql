-- Why a node's challenges left its hardware unverified under the trust
-- policy when its standing was last saved, or '' (docs/trust.md,
-- "Verified hardware"). A provider's standing reads its nodes' notes, so
-- that its level and badges follow the same rules without reading every
-- node's challenges.

-- +goose Up
ALTER TABLE reputations ADD COLUMN hardware_note TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE reputations DROP COLUMN hardware_note;
