-- Whether a node's offer lists models it serves for inference, kept beside
-- the offer (as gpu_count is), so that the inference gateway's catalog
-- reads the few nodes that serve models and not every node of the market.
-- Offers are compact JSON whose models key is left out when empty, so the
-- key's presence is the test.

-- +goose Up
ALTER TABLE nodes ADD COLUMN serves_models BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE nodes SET serves_models = TRUE WHERE offer LIKE '%"models":[%';
CREATE INDEX nodes_serving ON nodes (serves_models, state);

-- +goose Down
DROP INDEX nodes_serving;
ALTER TABLE nodes DROP COLUMN serves_models;
