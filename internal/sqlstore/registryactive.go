package sqlstore

import (
	"context"
	"database/sql"
	"time"

	"github.com/pressly/goose/v3"
)

// registryLoginsActiveMigration counts the registry logins kept before
// migration 34 active from the upgrade, or from when they were last set if
// that is later: their uses were not recorded, and a login a renter's jobs
// pull with every day must not expire, and be deleted, the moment the
// server that starts recording them starts (internal/server/expiry.go). It
// reads the wall clock: a migration runs once, at the upgrade, outside the
// coordinator's clock.
var registryLoginsActiveMigration = goose.NewGoMigration(36,
	&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE registry_logins
			SET active_at = CASE WHEN updated_at > $1 THEN updated_at ELSE $1 END WHERE active_at = 0`, time.Now().UnixMicro())
		return err
	}},
	&goose.GoFunc{RunTx: func(context.Context, *sql.Tx) error { return nil }}, // what was known before stays as it was
)
