-- The standings whose node's hardware is in doubt (hardware_note set), by
-- provider. Every save of a provider's standing asks whether any of its
-- nodes is in doubt (server.providerChecks); without this index that read
-- went through all the provider's node standings, so a pass that saved
-- each of a fleet's nodes read the fleet once per node. Few standings are
-- in doubt, so the partial index is small.

-- +goose Up
CREATE INDEX reputations_doubted ON reputations (provider_id, subject, subject_id) WHERE hardware_note <> '';

-- +goose Down
DROP INDEX reputations_doubted;
