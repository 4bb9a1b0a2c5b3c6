// Package pgtest gives tests a fresh PostgreSQL database of their own.
//
// Tests that need PostgreSQL call NewDSN. It reads the server to use from
// the environment variable IDLEGRID_TEST_POSTGRES, a postgres:// URL of a
// role that may create databases, e.g.
//
//	IDLEGRID_TEST_POSTGRES='postgres://postgres@127.0.0.1:55432/postgres?sslmode=disable'
//
// and skips the test when it is unset, so that `go test` passes on a machine
// without PostgreSQL while CI, which starts a throwaway cluster, runs them.
package pgtest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
)

// EnvVar names the environment variable that holds the server's URL.
const EnvVar = "IDLEGRID_TEST_POSTGRES"

// NewDSN creates an empty database on the server named by EnvVar, drops it
// when the test ends, and returns its postgres:// URL. It skips tb when
// EnvVar is unset.
func NewDSN(tb testing.TB) string {
	tb.Helper()
	return newDatabase(tb, "")
}

// NewDSNFrom is NewDSN for a copy of the database template, a URL NewDSN
// returned: PostgreSQL copies its files (CREATE DATABASE ... TEMPLATE), so
// a suite can migrate one database and give each test a migrated copy
// without running the migrations again. No session may be connected to
// template meanwhile.
func NewDSNFrom(tb testing.TB, template string) string {
	tb.Helper()
	t, err := url.Parse(template)
	if err != nil || len(t.Path) < 2 {
		tb.Fatalf("pgtest: template %q is not a URL NewDSN returned", template)
	}
	return newDatabase(tb, t.Path[1:])
}

// newDatabase creates a database, a copy of template unless it is "", and
// returns its URL; it is dropped when tb ends.
func newDatabase(tb testing.TB, template string) string {
	tb.Helper()
	base := os.Getenv(EnvVar)
	if base == "" {
		tb.Skipf("PostgreSQL tests skipped: set %s to a postgres:// URL, e.g. "+
			"postgres://postgres@127.0.0.1:55432/postgres?sslmode=disable", EnvVar)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		tb.Fatalf("%s must be a postgres:// URL, got %q", EnvVar, base)
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		tb.Fatalf("pgtest: open %s: %v", u.Redacted(), err)
	}
	defer admin.Close()

	name := newName()
	create := `CREATE DATABASE ` + name
	if template != "" {
		create += ` TEMPLATE ` + pgx.Identifier{template}.Sanitize()
	}
	if _, err := admin.Exec(create); err != nil {
		tb.Fatalf("pgtest: create database on %s: %v", u.Redacted(), err)
	}
	tb.Cleanup(func() { dropDatabase(tb, base, name) })

	u.Path = "/" + name
	return u.String()
}

// dropDatabase drops name, closing any connection the test left open.
func dropDatabase(tb testing.TB, base, name string) {
	admin, err := sql.Open("pgx", base)
	if err != nil {
		tb.Errorf("pgtest: drop %s: %v", name, err)
		return
	}
	defer admin.Close()
	if _, err := admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`); err != nil {
		tb.Errorf("pgtest: drop %s: %v", name, err)
	}
}

// newName returns a random database name that needs no quoting.
func newName() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "idlegrid_test_" + hex.EncodeToString(b)
}

// NewUnprivilegedDSN is dsn, a URL NewDSN returned, for a login role of
// its own that owns nothing and may create nothing: it reaches the
// database but may not make the market's tables. The role is dropped when
// tb ends.
func NewUnprivilegedDSN(tb testing.TB, dsn string) string {
	tb.Helper()
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatalf("pgtest: open: %v", err)
	}
	defer admin.Close()
	u, err := url.Parse(dsn)
	if err != nil || len(u.Path) < 2 {
		tb.Fatalf("pgtest: %q is not a URL NewDSN returned", dsn)
	}
	// Roles are the cluster's: one of this test's own, named after its database.
	role := "idlegrid_weak_" + strings.TrimPrefix(u.Path[1:], "idlegrid_test_")
	if _, err := admin.Exec(`CREATE ROLE ` + role + ` LOGIN`); err != nil {
		tb.Fatalf("pgtest: create role: %v", err)
	}
	tb.Cleanup(func() {
		if admin, err := sql.Open("pgx", dsn); err == nil {
			admin.Exec(`DROP ROLE IF EXISTS ` + role)
			admin.Close()
		}
	})
	u.User = url.User(role)
	return u.String()
}
