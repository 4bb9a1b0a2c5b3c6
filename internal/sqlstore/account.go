package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
)

// CreateAccount stores a new account. The caller sets ID and CreatedAt.
// ECONFLICT when the ID is taken, naming name when an account of the role
// holds the name, or naming idempotency_key when the account's key made
// another.
func (db *DB) CreateAccount(ctx context.Context, a *idlegrid.Account) error {
	return db.createAccount(ctx, a, nil)
}

// CreateAccountWithKey is CreateAccount that stores k, the account's first
// API key, in the same transaction, so that no account is left without a
// key for its owner.
func (db *DB) CreateAccountWithKey(ctx context.Context, a *idlegrid.Account, k *idlegrid.APIKey) error {
	if k == nil {
		return idlegrid.Invalid("api_key", "required: the account's first key")
	} else if k.AccountID != a.ID {
		return idlegrid.Invalid("api_key.account_id", "must be the new account's, %q", a.ID)
	}
	return db.createAccount(ctx, a, k)
}

func (db *DB) createAccount(ctx context.Context, a *idlegrid.Account, k *idlegrid.APIKey) error {
	if err := required("account.id", a.ID); err != nil {
		return err
	} else if err := a.Validate(); err != nil {
		return err
	}
	if k != nil {
		if err := checkAPIKey(k); err != nil {
			return err
		}
	}
	err := db.update(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO accounts (id, name, role, idempotency_key, created_at) VALUES ($1, $2, $3, $4, $5)`,
			a.ID, a.Name, string(a.Role), a.IdempotencyKey, timeArg(a.CreatedAt)); err != nil {
			return err
		}
		if k == nil {
			return nil
		}
		return insertAPIKey(ctx, tx, db.dialect, k)
	})
	if isCode(err, idlegrid.ECONFLICT) {
		return db.accountTaken(ctx, a, err)
	}
	return err
}

// accountTaken says what of a's is taken, after its insert conflicted
// (err): its idempotency key, its ID, or its name within its role. The
// conflicting row has committed by then, so a read outside the failed
// transaction finds it. The key is looked at first, since a creation sent
// again holds its first's name as well.
func (db *DB) accountTaken(ctx context.Context, a *idlegrid.Account, err error) error {
	taken := err
	readErr := db.view(ctx, func(tx *sql.Tx) error {
		var id string
		if a.IdempotencyKey != "" {
			err := tx.QueryRowContext(ctx, `SELECT id FROM accounts WHERE idempotency_key = $1`, a.IdempotencyKey).Scan(&id)
			if err == nil {
				taken = &idlegrid.Error{Code: idlegrid.ECONFLICT, Field: "idempotency_key", Message: fmt.Sprintf(
					"idempotency key %q was used for account %s; use a new key for a new account", a.IdempotencyKey, id)}
				return nil
			} else if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		if _, err := findAccount(ctx, tx, a.ID); err == nil {
			taken = idlegrid.Errorf(idlegrid.ECONFLICT, "account %q already exists", a.ID)
			return nil
		} else if idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			return err
		}
		err := tx.QueryRowContext(ctx, `SELECT id FROM accounts WHERE role = $1 AND name = $2 AND duplicate_name = 0`,
			string(a.Role), a.Name).Scan(&id)
		if err == nil {
			taken = &idlegrid.Error{Code: idlegrid.ECONFLICT, Field: "name", Message: fmt.Sprintf(
				"%s account %s is already named %q; use that account, or give this one another name", a.Role, id, a.Name)}
			return nil
		} else if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		return nil
	})
	if readErr != nil {
		return readErr
	}
	return taken
}

// FindAccountByIdempotencyKey returns the account created with key.
func (db *DB) FindAccountByIdempotencyKey(ctx context.Context, key string) (*idlegrid.Account, error) {
	if err := required("idempotency_key", key); err != nil {
		return nil, err
	}
	var a *idlegrid.Account
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		a, err = scanAccount(tx.QueryRowContext(ctx, `SELECT `+accountColumns+` FROM accounts WHERE idempotency_key = $1`, key))
		if errors.Is(err, sql.ErrNoRows) {
			return idlegrid.Errorf(idlegrid.ENOTFOUND, "no account was created with idempotency key %q", key)
		}
		return err
	})
	return a, err
}

// FindAccount returns the account with id.
func (db *DB) FindAccount(ctx context.Context, id string) (*idlegrid.Account, error) {
	var a *idlegrid.Account
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		a, err = findAccount(ctx, tx, id)
		return err
	})
	return a, err
}

// ListAccounts returns the accounts f selects, oldest first.
func (db *DB) ListAccounts(ctx context.Context, f idlegrid.AccountFilter) ([]*idlegrid.Account, error) {
	var qa args
	q := `SELECT ` + accountColumns + ` FROM accounts WHERE 1 = 1`
	if f.Role != "" {
		q += ` AND role = ` + qa.add(string(f.Role))
	}
	if f.After != "" { // the page after After's; none if it is not an account
		q += ` AND (created_at, id) > (SELECT created_at, id FROM accounts WHERE id = ` + qa.add(f.After) + `)`
	}
	q += ` ORDER BY created_at, id LIMIT ` + qa.add(limitOf(f.Limit))
	var out []*idlegrid.Account
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryAll(ctx, tx, scanAccount, q, qa...)
		return err
	})
	return out, err
}

const accountColumns = `id, name, role, idempotency_key, created_at`

func findAccount(ctx context.Context, tx *sql.Tx, id string) (*idlegrid.Account, error) {
	a, err := scanAccount(tx.QueryRowContext(ctx, `SELECT `+accountColumns+` FROM accounts WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("account", id)
	}
	return a, err
}

// lockAccount holds account id's row until the transaction ends (with
// forUpdate; SQLite's writers take turns anyway), or ENOTFOUND.
func lockAccount(ctx context.Context, tx *sql.Tx, id, forUpdate string) error {
	var got string
	err := tx.QueryRowContext(ctx, `SELECT id FROM accounts WHERE id = $1`+forUpdate, id).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("account", id)
	}
	return err
}

type scanner interface{ Scan(dest ...any) error }

func scanAccount(s scanner) (*idlegrid.Account, error) {
	var a idlegrid.Account
	var created sql.NullInt64
	if err := s.Scan(&a.ID, &a.Name, &a.Role, &a.IdempotencyKey, &created); err != nil {
		return nil, err
	}
	a.CreatedAt = timeOf(created)
	return &a, nil
}

// CreateAPIKey stores a new key for an existing account; a key without an
// access gets AccessAll.
func (db *DB) CreateAPIKey(ctx context.Context, k *idlegrid.APIKey) error {
	if err := checkAPIKey(k); err != nil {
		return err
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		if _, err := findAccount(ctx, tx, k.AccountID); err != nil {
			return err
		}
		return insertAPIKey(ctx, tx, db.dialect, k)
	})
}

func checkAPIKey(k *idlegrid.APIKey) error {
	if err := required("api_key.id", k.ID); err != nil {
		return err
	} else if err := required("api_key.hash", k.Hash); err != nil {
		return err
	} else if k.Access != "" {
		return k.Access.Validate("api_key.access")
	}
	return nil
}

// insertAPIKey stores k, whose account exists in tx.
func insertAPIKey(ctx context.Context, tx *sql.Tx, d *dialect, k *idlegrid.APIKey) error {
	access := k.Access
	if access == "" {
		access = idlegrid.AccessAll
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (id, account_id, name, prefix, access, hash, created_at, revoked_at, idempotency_key)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		k.ID, k.AccountID, k.Name, k.Prefix, string(access), k.Hash, timeArg(k.CreatedAt), timePtrArg(k.RevokedAt), k.IdempotencyKey)
	if isCode(d.translate(err), idlegrid.ECONFLICT) {
		return secretConflict(k.IdempotencyKey, "API key", k.ID)
	}
	return err
}

// secretConflict is the ECONFLICT of an API key's or a join token's
// insert: naming idempotency_key when it has one, which its account made
// another with, else its ID's. (On PostgreSQL the failed insert ended the
// transaction, so nothing more can be read to tell; IDs are random and
// never collide.)
func secretConflict(idempotencyKey, kind, id string) error {
	if idempotencyKey != "" {
		return &idlegrid.Error{Code: idlegrid.ECONFLICT, Field: "idempotency_key",
			Message: fmt.Sprintf("idempotency key %q already made another %s of this account", idempotencyKey, kind)}
	}
	return idlegrid.Errorf(idlegrid.ECONFLICT, "%s %q already exists", kind, id)
}

const apiKeyColumns = `k.id, k.account_id, k.name, k.prefix, k.access, k.hash, k.created_at, k.revoked_at, k.idempotency_key`

func scanAPIKey(s scanner, extra ...any) (*idlegrid.APIKey, error) {
	var k idlegrid.APIKey
	var created, revoked sql.NullInt64
	dest := append([]any{&k.ID, &k.AccountID, &k.Name, &k.Prefix, &k.Access, &k.Hash, &created, &revoked, &k.IdempotencyKey}, extra...)
	if err := s.Scan(dest...); err != nil {
		return nil, err
	}
	k.CreatedAt, k.RevokedAt = timeOf(created), timePtrOf(revoked)
	return &k, nil
}

// FindAPIKey returns the unrevoked key whose secret hashes to hash, and its
// account; ENOTFOUND when there is none.
func (db *DB) FindAPIKey(ctx context.Context, hash string) (*idlegrid.APIKey, *idlegrid.Account, error) {
	var k *idlegrid.APIKey
	var a idlegrid.Account
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		var created sql.NullInt64
		row := tx.QueryRowContext(ctx, `SELECT `+apiKeyColumns+`, a.id, a.name, a.role, a.idempotency_key, a.created_at
			FROM api_keys k JOIN accounts a ON a.id = k.account_id
			WHERE k.hash = $1 AND k.revoked_at IS NULL`, hash)
		k, err = scanAPIKey(row, &a.ID, &a.Name, &a.Role, &a.IdempotencyKey, &created)
		if errors.Is(err, sql.ErrNoRows) {
			return idlegrid.Errorf(idlegrid.ENOTFOUND, "no such API key")
		}
		a.CreatedAt = timeOf(created)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return k, &a, nil
}

// ListAPIKeys returns the account's keys, revoked ones included, oldest first.
func (db *DB) ListAPIKeys(ctx context.Context, accountID string) ([]*idlegrid.APIKey, error) {
	var out []*idlegrid.APIKey
	err := db.view(ctx, func(tx *sql.Tx) error {
		out = out[:0] // a retried transaction reads again
		rows, err := tx.QueryContext(ctx, `SELECT `+apiKeyColumns+` FROM api_keys k
			WHERE k.account_id = $1 ORDER BY k.created_at, k.id`, accountID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			k, err := scanAPIKey(rows)
			if err != nil {
				return err
			}
			out = append(out, k)
		}
		return rows.Err()
	})
	return out, err
}

// RevokeAPIKey revokes the account's key at at. Revoking a revoked key keeps
// its first revocation time; a key of another account is ENOTFOUND.
func (db *DB) RevokeAPIKey(ctx context.Context, accountID, keyID string, at time.Time) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1)
			WHERE id = $2 AND account_id = $3`, timeArg(at), keyID, accountID)
		return expectOne(res, err, func() error { return notFound("API key", keyID) })
	})
}

// CreateJoinToken stores a new join token for an existing provider.
func (db *DB) CreateJoinToken(ctx context.Context, t *idlegrid.JoinToken) error {
	if err := required("join_token.id", t.ID); err != nil {
		return err
	} else if err := required("join_token.hash", t.Hash); err != nil {
		return err
	} else if t.ExpiresAt.IsZero() {
		return idlegrid.Invalid("join_token.expires_at", "required")
	} else if t.MaxUses < 0 {
		return idlegrid.Invalid("join_token.max_uses", "must not be negative")
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		if _, err := findAccount(ctx, tx, t.ProviderID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO join_tokens
			(id, provider_id, name, prefix, hash, max_uses, uses, expires_at, created_at, revoked_at, idempotency_key)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			t.ID, t.ProviderID, t.Name, t.Prefix, t.Hash, t.MaxUses, t.Uses,
			timeArg(t.ExpiresAt), timeArg(t.CreatedAt), timePtrArg(t.RevokedAt), t.IdempotencyKey)
		if isCode(db.dialect.translate(err), idlegrid.ECONFLICT) {
			return secretConflict(t.IdempotencyKey, "join token", t.ID)
		}
		return err
	})
}

// FindAPIKeyByIdempotencyKey returns the account's key created with key.
func (db *DB) FindAPIKeyByIdempotencyKey(ctx context.Context, accountID, key string) (*idlegrid.APIKey, error) {
	return findCreatedWith(ctx, db, func(s scanner) (*idlegrid.APIKey, error) { return scanAPIKey(s) },
		`SELECT `+apiKeyColumns+` FROM api_keys k WHERE k.account_id = $1 AND k.idempotency_key = $2`, "API key", accountID, key)
}

// findCreatedWith returns the row q finds (its owner $1, its idempotency
// key $2), read by scan: what owner created with idempotency key key;
// ENOTFOUND, naming kind, when it created none.
func findCreatedWith[T any](ctx context.Context, db *DB, scan func(scanner) (*T, error), q, kind, owner, key string) (*T, error) {
	if err := required("idempotency_key", key); err != nil {
		return nil, err
	}
	var v *T
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		v, err = scan(tx.QueryRowContext(ctx, q, owner, key))
		if errors.Is(err, sql.ErrNoRows) {
			return idlegrid.Errorf(idlegrid.ENOTFOUND, "no %s was created with idempotency key %q", kind, key)
		}
		return err
	})
	return v, err
}

// ResecretAPIKey gives the account's unrevoked key a new secret.
func (db *DB) ResecretAPIKey(ctx context.Context, accountID, keyID, prefix, hash string) error {
	return db.resecret(ctx, "api_keys", "account_id", "API key", accountID, keyID, prefix, hash)
}

// resecret sets the prefix and hash of the unrevoked row id of table
// (api_keys or join_tokens) that owner has (in column ownerColumn).
func (db *DB) resecret(ctx context.Context, table, ownerColumn, kind, owner, id, prefix, hash string) error {
	if err := required(strings.TrimSuffix(table, "s")+".hash", hash); err != nil {
		return err
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		var revoked sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT revoked_at FROM `+table+` WHERE id = $1 AND `+ownerColumn+` = $2`+db.dialect.forUpdate,
			id, owner).Scan(&revoked)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return notFound(kind, id)
		case err != nil:
			return err
		case revoked.Valid:
			return idlegrid.Errorf(idlegrid.ECONFLICT, "%s %s was revoked", kind, id)
		}
		_, err = tx.ExecContext(ctx, `UPDATE `+table+` SET prefix = $1, hash = $2 WHERE id = $3`, prefix, hash, id)
		return err
	})
}

const joinTokenColumns = `id, provider_id, name, prefix, hash, max_uses, uses, expires_at, created_at, revoked_at, idempotency_key`

func scanJoinToken(s scanner) (*idlegrid.JoinToken, error) {
	var t idlegrid.JoinToken
	var expires, created, revoked sql.NullInt64
	if err := s.Scan(&t.ID, &t.ProviderID, &t.Name, &t.Prefix, &t.Hash, &t.MaxUses, &t.Uses,
		&expires, &created, &revoked, &t.IdempotencyKey); err != nil {
		return nil, err
	}
	t.ExpiresAt, t.CreatedAt, t.RevokedAt = timeOf(expires), timeOf(created), timePtrOf(revoked)
	return &t, nil
}

// ListJoinTokens returns the provider's tokens, oldest first.
func (db *DB) ListJoinTokens(ctx context.Context, providerID string) ([]*idlegrid.JoinToken, error) {
	var out []*idlegrid.JoinToken
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		out, err = queryAll(ctx, tx, scanJoinToken, `SELECT `+joinTokenColumns+` FROM join_tokens
			WHERE provider_id = $1 ORDER BY created_at, id`, providerID)
		return err
	})
	return out, err
}

// FindJoinToken returns the join token whose secret hashes to hash.
func (db *DB) FindJoinToken(ctx context.Context, hash string) (*idlegrid.JoinToken, error) {
	var t *idlegrid.JoinToken
	err := db.view(ctx, func(tx *sql.Tx) (err error) {
		t, err = scanJoinToken(tx.QueryRowContext(ctx, `SELECT `+joinTokenColumns+` FROM join_tokens WHERE hash = $1`, hash))
		if errors.Is(err, sql.ErrNoRows) {
			return idlegrid.Errorf(idlegrid.ENOTFOUND, "no such join token")
		}
		return err
	})
	return t, err
}

// FindJoinTokenByIdempotencyKey returns the provider's join token created
// with key.
func (db *DB) FindJoinTokenByIdempotencyKey(ctx context.Context, providerID, key string) (*idlegrid.JoinToken, error) {
	return findCreatedWith(ctx, db, scanJoinToken,
		`SELECT `+joinTokenColumns+` FROM join_tokens WHERE provider_id = $1 AND idempotency_key = $2`, "join token", providerID, key)
}

// ResecretJoinToken gives the provider's unrevoked token a new secret.
func (db *DB) ResecretJoinToken(ctx context.Context, providerID, tokenID, prefix, hash string) error {
	return db.resecret(ctx, "join_tokens", "provider_id", "join token", providerID, tokenID, prefix, hash)
}

// RevokeJoinToken revokes the provider's token at at, like RevokeAPIKey.
func (db *DB) RevokeJoinToken(ctx context.Context, providerID, tokenID string, at time.Time) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE join_tokens SET revoked_at = COALESCE(revoked_at, $1)
			WHERE id = $2 AND provider_id = $3`, timeArg(at), tokenID, providerID)
		return expectOne(res, err, func() error { return notFound("join token", tokenID) })
	})
}

// JoinNode uses one use of the join token whose secret hashes to tokenHash,
// judged at n.CreatedAt, and creates n under the token's provider, offline
// until it sends an offer or a heartbeat. An unknown or unusable token is
// EUNAUTHORIZED.
func (db *DB) JoinNode(ctx context.Context, tokenHash string, n *idlegrid.Node) error {
	if err := required("node.id", n.ID); err != nil {
		return err
	} else if err := required("node.public_key", n.PublicKey); err != nil {
		return err
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		t, err := scanJoinToken(tx.QueryRowContext(ctx, `SELECT `+joinTokenColumns+` FROM join_tokens
			WHERE hash = $1`+db.dialect.forUpdate, tokenHash))
		if errors.Is(err, sql.ErrNoRows) {
			return idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "unknown join token; ask the provider for a new one")
		} else if err != nil {
			return err
		} else if err := t.Usable(n.CreatedAt); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE join_tokens SET uses = uses + 1 WHERE id = $1`, t.ID); err != nil {
			return err
		}
		n.ProviderID = t.ProviderID
		n.State = idlegrid.NodeOffline
		n.Reliability = idlegrid.ReliabilityOf(0, 0)
		n.LeasesCompleted, n.LeasesFailed = 0, 0
		if err := insertNode(ctx, tx, db.dialect, n); err != nil {
			return err
		}
		return appendAudit(tx)(audit.NodeJoinedEntry(n))
	})
}
