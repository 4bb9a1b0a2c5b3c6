package sqlstore

import (
	"context"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// BatchesRedone returns how many batches of placements db placed again
// behind savepoints after one of them failed.
func BatchesRedone(db *DB) int64 { return db.batchesRedone.Load() }

// Remigrate takes db's schema down to version and up again, so that the
// later migrations run on the data as an upgrade from version would.
func Remigrate(ctx context.Context, db *DB, version int64) error {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(db.dialect.goose, db.db, fsys, goose.WithDisableGlobalRegistry(true),
		goose.WithGoMigrations(spendMonthsMigration, nodeSearchMigration, nodePriceMigration))
	if err != nil {
		return err
	}
	if _, err := p.DownTo(ctx, version); err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}
