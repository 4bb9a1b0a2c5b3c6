package sqlstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

func TestOpen_SQLiteSynchronous(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name, query string
		want        string // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{
		{"Default", "", "1"},
		{"FromDSN", "?_pragma=synchronous(FULL)", "2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(ctx, filepath.Join(t.TempDir(), "x.db")+tt.query)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for pragma, want := range map[string]string{"synchronous": tt.want, "temp_store": "2"} {
				var got string
				if err := db.db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
					t.Fatal(err)
				} else if got != want {
					t.Errorf("PRAGMA %s = %q, want %q", pragma, got, want)
				}
			}
		})
	}
}

// TestStmtCacheConn runs queries on one connection and checks that a
// repeated text reuses its statement, that a statement whose rows are open
// is not run again under them, and that the cache stays bounded.
func TestStmtCacheConn(t *testing.T) {
	ctx := context.Background()
	db, err := openSQLite(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cached := func() (n int) {
		conn.Raw(func(dc any) error { n = len(dc.(*stmtCacheConn).stmts); return nil })
		return n
	}
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(`CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)`)
	for i := range 3 {
		mustExec(`INSERT INTO t (k, v) VALUES ($1, $2)`, i, fmt.Sprint("v", i))
	}
	if got := cached(); got != 2 {
		t.Errorf("%d statements cached after two texts, want 2", got)
	}

	// Read the table with a query, and under its open rows run the same
	// query again: the second must not reuse the busy statement.
	const q = `SELECT k, v FROM t WHERE k >= $1 ORDER BY k`
	outer, err := conn.QueryContext(ctx, q, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for outer.Next() {
		var k int
		var v string
		if err := outer.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		var inner string
		if err := conn.QueryRowContext(ctx, q, k).Scan(&k, &inner); err != nil {
			t.Fatal(err)
		}
		if got = append(got, v+"="+inner); len(got) > 3 {
			t.Fatalf("the outer rows started over: %v", got)
		}
	}
	if err := outer.Err(); err != nil {
		t.Fatal(err)
	}
	outer.Close()
	if want := "[v0=v0 v1=v1 v2=v2]"; fmt.Sprint(got) != want {
		t.Errorf("nested reads = %v, want %s", got, want)
	}

	// A failing statement leaves its cached statement usable.
	if _, err := conn.ExecContext(ctx, `INSERT INTO t (k, v) VALUES ($1, $2)`, 0, "dup"); err == nil {
		t.Fatal("duplicate key inserted")
	}
	mustExec(`INSERT INTO t (k, v) VALUES ($1, $2)`, 3, "v3")

	for i := range maxCachedStmts + 10 {
		var n int
		if err := conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT COUNT(*) + %d FROM t`, i)).Scan(&n); err != nil {
			t.Fatal(err)
		} else if n != 4+i {
			t.Fatalf("query %d = %d, want %d", i, n, 4+i)
		}
	}
	if got := cached(); got != maxCachedStmts {
		t.Errorf("%d statements cached, want the bound, %d", got, maxCachedStmts)
	}
}

func TestAnonymousParams(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`SELECT a FROM t WHERE id = $1 AND n > $2`, `SELECT a FROM t WHERE id = ? AND n > ?`},
		{`INSERT INTO t VALUES ($1, $2, $3), ($4, $5, $6), ($7, $8, $9), ($10, $11, $12)`,
			`INSERT INTO t VALUES (?, ?, ?), (?, ?, ?), (?, ?, ?), (?, ?, ?)`},
		{`SELECT json_extract(x, '$.a'), "$2" FROM t WHERE id = $1 -- $9 in a comment` + "\n" + `AND k = $2`,
			`SELECT json_extract(x, '$.a'), "$2" FROM t WHERE id = ? -- $9 in a comment` + "\n" + `AND k = ?`},
		{`SELECT 'it''s $1' WHERE a = $1`, `SELECT 'it''s $1' WHERE a = ?`},
		{`SELECT 1`, `SELECT 1`},
		// Left as they are: SQLite binds them by name or number.
		{`SELECT a FROM t WHERE id = $1 OR parent = $1`, ``},
		{`SELECT a FROM t WHERE id = $2 AND n > $1`, ``},
		{`SELECT a FROM t WHERE id = $1 AND n > ?2`, ``},
		{`SELECT a FROM t WHERE id = :id`, ``},
		{`SELECT '$1 unterminated`, ``},
		{`SELECT $01`, ``},
	} {
		want := tt.want
		if want == "" {
			want = tt.in
		}
		if got := anonymousParams(tt.in); got != want {
			t.Errorf("anonymousParams(%q)\n got %q\nwant %q", tt.in, got, want)
		}
	}
}
