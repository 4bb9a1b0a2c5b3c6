package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// A write transaction waiting its turn (db.writer) is durably blocked in a
// synctest bubble, so that the bubble's clock moves on meanwhile: with a
// sync.Mutex for the turn it stood still while one waited, and a writer
// asleep in SQLite's busy handler, holding the turn, never woke. CI hung so
// in TestServer_Reputation_newNodeOfHonestProvider: a heartbeat's
// transaction found the file locked for a moment (the pool closing an idle
// connection) and slept, while the reaper's waited for the turn. On the old
// code this test hangs; the watchdog ends it.
func TestUpdate_waitsItsTurnDurably(t *testing.T) {
	watchdog := time.AfterFunc(time.Minute, func() {
		panic("TestUpdate_waitsItsTurnDurably: the bubble's clock stood still while a write waited its turn")
	})
	defer watchdog.Stop()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db, err := Open(ctx, filepath.Join(t.TempDir(), "idlegrid.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.db.ExecContext(ctx, `CREATE TABLE turn (name TEXT)`); err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		done := make(chan error, 2)
		write := func(name string, wait chan struct{}) {
			done <- db.update(ctx, func(tx *sql.Tx) error {
				if wait != nil {
					<-wait // holds the turn, durably blocked, as a writer asleep in the busy handler is
				}
				_, err := tx.ExecContext(ctx, `INSERT INTO turn (name) VALUES (?)`, name)
				return err
			})
		}
		go write("first", release)
		synctest.Wait()
		go write("second", nil) // waits its turn
		time.Sleep(time.Second) // returns only if the bubble idles: the second waits durably
		close(release)
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		var n int
		if err := db.db.QueryRowContext(ctx, `SELECT count(*) FROM turn`).Scan(&n); err != nil || n != 2 {
			t.Fatalf("%d rows written (%v), want both", n, err)
		}
	})
}
