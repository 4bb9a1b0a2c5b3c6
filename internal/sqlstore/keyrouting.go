package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/idlegrid/idlegrid"
)

var _ idlegrid.KeyRoutingStore = (*DB)(nil)

// SetKeyRouting stores a key's default routing, as JSON, replacing what it
// had. The key must be the account's own and not revoked.
func (db *DB) SetKeyRouting(ctx context.Context, kr *idlegrid.KeyRouting) error {
	if err := kr.Routing.Validate("routing"); err != nil {
		return err
	} else if kr.UpdatedAt.IsZero() {
		return idlegrid.Invalid("key_routing.updated_at", "required")
	}
	doc, err := json.Marshal(kr.Routing)
	if err != nil {
		return err
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL`,
			kr.KeyID, kr.AccountID).Scan(&n); err != nil {
			return err
		} else if n == 0 {
			return notFound("API key", kr.KeyID)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO key_routing (key_id, account_id, routing, updated_at)
			VALUES ($1, $2, $3, $4) ON CONFLICT (key_id)
			DO UPDATE SET routing = excluded.routing, updated_at = excluded.updated_at`,
			kr.KeyID, kr.AccountID, string(doc), timeArg(kr.UpdatedAt))
		return err
	})
}

// FindKeyRouting returns a key's default routing.
func (db *DB) FindKeyRouting(ctx context.Context, keyID string) (*idlegrid.KeyRouting, error) {
	var kr idlegrid.KeyRouting
	err := db.view(ctx, func(tx *sql.Tx) error {
		var doc string
		var updated sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT key_id, account_id, routing, updated_at FROM key_routing WHERE key_id = $1`,
			keyID).Scan(&kr.KeyID, &kr.AccountID, &doc, &updated)
		if errors.Is(err, sql.ErrNoRows) {
			return idlegrid.Errorf(idlegrid.ENOTFOUND, "API key %q has no default routing", keyID)
		} else if err != nil {
			return err
		}
		kr.UpdatedAt = timeOf(updated)
		return json.Unmarshal([]byte(doc), &kr.Routing)
	})
	if err != nil {
		return nil, err
	}
	return &kr, nil
}

// RemoveKeyRouting removes an account's key's default routing.
func (db *DB) RemoveKeyRouting(ctx context.Context, accountID, keyID string) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM key_routing WHERE key_id = $1 AND account_id = $2`, keyID, accountID)
		return expectOne(res, err, func() error {
			return idlegrid.Errorf(idlegrid.ENOTFOUND, "API key %q has no default routing", keyID)
		})
	})
}
