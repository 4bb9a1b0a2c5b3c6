package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/idlegrid/idlegrid"
)

var _ idlegrid.RegistryLoginStore = (*DB)(nil)

// PutRegistryLogin stores a renter's login to a registry, sealed, replacing
// the one it had there. Setting a login makes it active (active_at) at its
// UpdatedAt.
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
		if err := lockAccount(ctx, tx, l.AccountID, db.dialect.forUpdate); err != nil { // the count below is the account's
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
		_, err := tx.ExecContext(ctx, `INSERT INTO registry_logins (account_id, registry, username, secret, created_at, updated_at, active_at)
			VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (account_id, registry)
			DO UPDATE SET username = excluded.username, secret = excluded.secret, updated_at = excluded.updated_at,
				active_at = CASE WHEN excluded.active_at > registry_logins.active_at THEN excluded.active_at ELSE registry_logins.active_at END`,
			l.AccountID, l.Registry, l.Username, l.Sealed, timeArg(l.CreatedAt), timeArg(l.UpdatedAt))
		return err
	})
}

// FindRegistryLogin returns an account's login to a registry, sealed.
func (db *DB) FindRegistryLogin(ctx context.Context, accountID, registry string) (*idlegrid.RegistryLogin, error) {
	l, _, err := db.FindActiveRegistryLogin(ctx, accountID, registry, time.Time{})
	return l, err
}

// ListRegistryLogins returns an account's logins by registry, without
// their secrets.
func (db *DB) ListRegistryLogins(ctx context.Context, accountID string) ([]*idlegrid.RegistryLogin, error) {
	return db.listRegistryLogins(ctx, accountID, time.Time{})
}

// ListActiveRegistryLogins is ListRegistryLogins, less the logins neither
// set nor used since since: those are as good as removed
// (DeleteIdleRegistryLogins).
func (db *DB) ListActiveRegistryLogins(ctx context.Context, accountID string, since time.Time) ([]*idlegrid.RegistryLogin, error) {
	return db.listRegistryLogins(ctx, accountID, since)
}

// listRegistryLogins returns the account's logins active since since (the
// zero time: all of them).
func (db *DB) listRegistryLogins(ctx context.Context, accountID string, since time.Time) ([]*idlegrid.RegistryLogin, error) {
	var out []*idlegrid.RegistryLogin
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, `SELECT registry, username, created_at, updated_at FROM registry_logins
			WHERE account_id = $1 AND active_at >= $2 ORDER BY registry`, accountID, since.UnixMicro())
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

// FindActiveRegistryLogin returns an account's login to a registry, sealed,
// and when it was last set or used (TouchRegistryLogin); ENOTFOUND when the
// account keeps none there, or one neither set nor used since since.
func (db *DB) FindActiveRegistryLogin(ctx context.Context, accountID, registry string, since time.Time) (*idlegrid.RegistryLogin, time.Time, error) {
	l := &idlegrid.RegistryLogin{AccountID: accountID, Registry: registry}
	var active int64
	err := db.view(ctx, func(tx *sql.Tx) error {
		var created, updated sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT username, secret, created_at, updated_at, active_at FROM registry_logins
			WHERE account_id = $1 AND registry = $2 AND active_at >= $3`, accountID, registry, since.UnixMicro()).
			Scan(&l.Username, &l.Sealed, &created, &updated, &active)
		if errors.Is(err, sql.ErrNoRows) {
			return noRegistryLogin(accountID, registry)
		}
		l.CreatedAt, l.UpdatedAt = timeOf(created), timeOf(updated)
		return err
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return l, time.UnixMicro(active).UTC(), nil
}

// TouchRegistryLogin records that an account's login to a registry was
// used at at (handed to a node), unless a later use or setting is
// recorded. A login removed meanwhile is no error: there is nothing left
// to keep.
func (db *DB) TouchRegistryLogin(ctx context.Context, accountID, registry string, at time.Time) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE registry_logins SET active_at = $3
			WHERE account_id = $1 AND registry = $2 AND active_at < $3`, accountID, registry, at.UnixMicro())
		return err
	})
}

// DeleteIdleRegistryLogins deletes at most limit logins neither set nor
// used since since, the longest idle first, and returns how many it
// deleted: fewer than limit when no more are idle.
func (db *DB) DeleteIdleRegistryLogins(ctx context.Context, since time.Time, limit int) (int, error) {
	if err := checkExpiryBatch(limit); err != nil {
		return 0, err
	}
	type login struct{ account, registry string }
	var idle []login
	err := db.view(ctx, func(tx *sql.Tx) error {
		idle = idle[:0] // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, `SELECT account_id, registry FROM registry_logins WHERE active_at < $1
			ORDER BY active_at, account_id, registry LIMIT $2`, since.UnixMicro(), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l login
			if err := rows.Scan(&l.account, &l.registry); err != nil {
				return err
			}
			idle = append(idle, l)
		}
		return rows.Err()
	})
	if err != nil || len(idle) == 0 {
		return 0, err
	}
	deleted := 0
	err = db.update(ctx, func(tx *sql.Tx) error {
		deleted = 0 // a retried transaction deletes again
		for _, l := range idle {
			// Set or used since the read: kept.
			res, err := tx.ExecContext(ctx, `DELETE FROM registry_logins WHERE account_id = $1 AND registry = $2 AND active_at < $3`,
				l.account, l.registry, since.UnixMicro())
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			deleted += int(n)
		}
		return nil
	})
	return deleted, err
}

// RemoveRegistryLogin removes an account's login to a registry, whatever
// the case it was stored in: registries are written in lower case now,
// but a login stored before was kept as its renter wrote it.
func (db *DB) RemoveRegistryLogin(ctx context.Context, accountID, registry string) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM registry_logins WHERE account_id = $1 AND LOWER(registry) = LOWER($2)`, accountID, registry)
		return expectOne(res, err, func() error { return noRegistryLogin(accountID, registry) })
	})
}

func noRegistryLogin(accountID, registry string) error {
	return idlegrid.Errorf(idlegrid.ENOTFOUND, "account %s has no login to registry %s", accountID, registry)
}
