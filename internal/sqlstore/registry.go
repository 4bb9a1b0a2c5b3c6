package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/idlegrid/idlegrid"
)

var _ idlegrid.RegistryLoginStore = (*DB)(nil)

// PutRegistryLogin stores a renter's login to a registry, sealed, replacing
// the one it had there.
func (db *DB) PutRegistryLogin(ctx context.Context, l *idlegrid.RegistryLogin) error {
	switch {
	case l.Secret != "":
		return idlegrid.Invalid("registry_login.secret", "must be sealed before it is stored")
	case len(l.Sealed) == 0:
		return idlegrid.Invalid("registry_login.sealed", "required")
	case l.CreatedAt.IsZero() || l.UpdatedAt.IsZero():
		return idlegrid.Invalid("registry_login.updated_at", "required")
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		if _, err := findAccount(ctx, tx, l.AccountID); err != nil {
			return err
		}
		var others int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM registry_logins WHERE account_id = $1 AND registry <> $2`,
			l.AccountID, l.Registry).Scan(&others); err != nil {
			return err
		} else if others >= idlegrid.MaxRegistryLogins {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "account %s already keeps %d registry logins, the most it may; remove one first",
				l.AccountID, others)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO registry_logins (account_id, registry, username, secret, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (account_id, registry)
			DO UPDATE SET username = excluded.username, secret = excluded.secret, updated_at = excluded.updated_at`,
			l.AccountID, l.Registry, l.Username, l.Sealed, timeArg(l.CreatedAt), timeArg(l.UpdatedAt))
		return err
	})
}

// FindRegistryLogin returns an account's login to a registry, sealed.
func (db *DB) FindRegistryLogin(ctx context.Context, accountID, registry string) (*idlegrid.RegistryLogin, error) {
	l := &idlegrid.RegistryLogin{AccountID: accountID, Registry: registry}
	err := db.view(ctx, func(tx *sql.Tx) error {
		var created, updated sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT username, secret, created_at, updated_at FROM registry_logins
			WHERE account_id = $1 AND registry = $2`, accountID, registry).Scan(&l.Username, &l.Sealed, &created, &updated)
		if errors.Is(err, sql.ErrNoRows) {
			return noRegistryLogin(accountID, registry)
		}
		l.CreatedAt, l.UpdatedAt = timeOf(created), timeOf(updated)
		return err
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// ListRegistryLogins returns an account's logins by registry, without
// their secrets.
func (db *DB) ListRegistryLogins(ctx context.Context, accountID string) ([]*idlegrid.RegistryLogin, error) {
	var out []*idlegrid.RegistryLogin
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, `SELECT registry, username, created_at, updated_at FROM registry_logins
			WHERE account_id = $1 ORDER BY registry`, accountID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			l := &idlegrid.RegistryLogin{AccountID: accountID}
			var created, updated sql.NullInt64
			if err := rows.Scan(&l.Registry, &l.Username, &created, &updated); err != nil {
				return err
			}
			l.CreatedAt, l.UpdatedAt = timeOf(created), timeOf(updated)
			out = append(out, l)
		}
		return rows.Err()
	})
	return out, err
}

// RemoveRegistryLogin removes an account's login to a registry.
func (db *DB) RemoveRegistryLogin(ctx context.Context, accountID, registry string) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM registry_logins WHERE account_id = $1 AND registry = $2`, accountID, registry)
		return expectOne(res, err, func() error { return noRegistryLogin(accountID, registry) })
	})
}

func noRegistryLogin(accountID, registry string) error {
	return idlegrid.Errorf(idlegrid.ENOTFOUND, "account %s has no login to registry %s", accountID, registry)
}
