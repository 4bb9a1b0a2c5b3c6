-- How much of what its account's role allows an API key may do
-- (idlegrid.APIKey.Access): 'all', 'use' or 'read'. Every key made before
-- keys had an access may do everything, as it always could.

-- +goose Up
ALTER TABLE api_keys ADD COLUMN access TEXT NOT NULL DEFAULT 'all';

-- +goose Down
ALTER TABLE api_keys DROP COLUMN access;
