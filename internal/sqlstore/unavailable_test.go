package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// mustRefusedConnect is pgconn's own error for a PostgreSQL that refuses
// the connection: a dial to a port that was just closed.
func mustRefusedConnect(tb testing.TB) error {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, "postgres://idlegrid@"+addr+"/market?sslmode=disable")
	if err == nil {
		conn.Close(ctx)
		tb.Fatalf("connect to the closed port %s succeeded", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		tb.Fatalf("connect to the closed port %s: %v, want connection refused", addr, err)
	}
	return err
}

// TestTranslate_PostgresDown: PostgreSQL that cannot be reached or will
// not serve a session now is EUNAVAILABLE (a 503, "try again"), with a
// message that names no host and no driver text and keeps the driver's
// error as its cause for the log; a refused login, a missing database, a
// bad statement or a caller who left are not.
func TestTranslate_PostgresDown(t *testing.T) {
	pg := func(code string) error {
		return &pgconn.PgError{Severity: "FATAL", Code: code, Message: "server says " + code}
	}
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"ConnectionRefused", mustRefusedConnect(t), idlegrid.EUNAVAILABLE},
		{"ConnectionReset", fmt.Errorf("failed to receive message: %w", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), idlegrid.EUNAVAILABLE},
		{"ConnectionLost", fmt.Errorf("receive message failed: %w", io.ErrUnexpectedEOF), idlegrid.EUNAVAILABLE},
		{"ConnClosed", fmt.Errorf("postgres: %w", pgconn.ErrConnClosed), idlegrid.EUNAVAILABLE},
		{"BadConn", driver.ErrBadConn, idlegrid.EUNAVAILABLE},
		{"ConnectionFailure", pg("08006"), idlegrid.EUNAVAILABLE},
		{"CannotConnect", pg("08001"), idlegrid.EUNAVAILABLE},
		{"TooManyConnections", pg("53300"), idlegrid.EUNAVAILABLE},
		{"AdminShutdown", pg("57P01"), idlegrid.EUNAVAILABLE},
		{"CrashShutdown", pg("57P02"), idlegrid.EUNAVAILABLE},
		{"CannotConnectNow", pg("57P03"), idlegrid.EUNAVAILABLE},
		{"WrappedSQLState", fmt.Errorf("begin: %w", pg("57P03")), idlegrid.EUNAVAILABLE},
		{"BadPassword", pg("28P01"), idlegrid.EINTERNAL},
		{"NoDatabase", pg("3D000"), idlegrid.EINTERNAL},
		{"SyntaxError", pg("42601"), idlegrid.EINTERNAL},
		{"StatementTimeout", pg("57014"), idlegrid.EINTERNAL},
		{"UniqueViolation", pg("23505"), idlegrid.ECONFLICT},
		{"CallerLeft", fmt.Errorf("query: %w", context.Canceled), idlegrid.EINTERNAL},
		{"RequestTimeUp", fmt.Errorf("query: %w", context.DeadlineExceeded), idlegrid.EINTERNAL},
		{"Bug", errors.New("scan: converting NULL to int64 is unsupported"), idlegrid.EINTERNAL},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := postgresDialect.translate(tt.err)
			if code := idlegrid.ErrorCode(got); code != tt.want {
				t.Fatalf("translate(%v) = %s (%v), want %s", tt.err, code, got, tt.want)
			}
			if tt.want != idlegrid.EUNAVAILABLE {
				return
			}
			if msg := idlegrid.ErrorMessage(got); msg != "the database is unavailable; try again shortly" {
				t.Errorf("message = %q, want the database unavailable and to try again", msg)
			}
			if s := got.Error(); strings.Contains(s, "127.0.0.1") || strings.Contains(s, "refused") || strings.Contains(s, "SQLSTATE") {
				t.Errorf("Error() = %q shows the driver's error", s)
			}
			var e *idlegrid.Error
			if !errors.As(got, &e) || !errors.Is(e.Unwrap(), tt.err) {
				t.Errorf("cause = %v, want the driver's error %v kept for the log", errors.Unwrap(got), tt.err)
			}
		})
	}
}

// TestTranslate_SQLiteBusy: a write lock held past the busy timeout is
// EUNAVAILABLE, and the driver's SQLITE_BUSY stays its cause for the log.
func TestTranslate_SQLiteBusy(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "x.db")+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	waiter, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	if _, err := holder.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer holder.ExecContext(ctx, "ROLLBACK")
	_, busy := waiter.ExecContext(ctx, "BEGIN IMMEDIATE")
	got := sqliteDialect.translate(busy)
	if code := idlegrid.ErrorCode(got); code != idlegrid.EUNAVAILABLE {
		t.Fatalf("translate(%v) = %s (%v), want unavailable", busy, code, got)
	}
	var se *sqlite.Error
	if !errors.As(got, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY {
		t.Errorf("cause of %v: want the driver's SQLITE_BUSY kept for the log", got)
	}
}
