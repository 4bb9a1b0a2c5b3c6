package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strconv"
	"strings"
)

// The SQLite driver parses and plans every statement it is handed, each
// time: for the short statements of a placement that is most of their cost.
// stmtCacheConnector hands database/sql connections that keep the
// statements they have prepared, by their text, and run a repeated query on
// its prepared statement. The store's SQL is a fixed set of texts with $N
// arguments, so the cache stays small; it is bounded all the same.
//
// Everything else passes through to the driver's connection unchanged.

// maxCachedStmts bounds the statements one connection keeps.
const maxCachedStmts = 256

// sqliteDriver is the driver the sqlite name is registered with.
var sqliteDriver = func() driver.Driver {
	db, _ := sql.Open("sqlite", "") // opens nothing until used
	defer db.Close()
	return db.Driver()
}()

type stmtCacheConnector struct {
	dsn    string
	driver driver.Driver
}

func (c stmtCacheConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.driver.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &stmtCacheConn{Conn: conn, stmts: map[string]*cachedStmt{}}, nil
}

func (c stmtCacheConnector) Driver() driver.Driver { return c.driver }

// cachedStmt is a prepared statement and whether rows read from it are
// still open, when it cannot run again.
type cachedStmt struct {
	driver.Stmt
	busy bool
}

// stmtCacheConn is one connection. database/sql uses a connection from one
// goroutine at a time, so it needs no lock.
type stmtCacheConn struct {
	driver.Conn
	stmts map[string]*cachedStmt
}

var (
	_ driver.ExecerContext      = (*stmtCacheConn)(nil)
	_ driver.QueryerContext     = (*stmtCacheConn)(nil)
	_ driver.ConnBeginTx        = (*stmtCacheConn)(nil)
	_ driver.ConnPrepareContext = (*stmtCacheConn)(nil)
	_ driver.Pinger             = (*stmtCacheConn)(nil)
	_ driver.SessionResetter    = (*stmtCacheConn)(nil)
	_ driver.Validator          = (*stmtCacheConn)(nil)
)

// stmt returns the cached statement for query, preparing it on first use;
// nil when it is busy or the cache is full, and the caller runs the query
// uncached.
func (c *stmtCacheConn) stmt(ctx context.Context, query string) (*cachedStmt, error) {
	if s, ok := c.stmts[query]; ok {
		if s.busy {
			return nil, nil
		}
		return s, nil
	}
	if len(c.stmts) >= maxCachedStmts {
		return nil, nil
	}
	ds, err := c.PrepareContext(ctx, anonymousParams(query))
	if err != nil {
		return nil, err
	}
	_, execs := ds.(driver.StmtExecContext)
	_, queries := ds.(driver.StmtQueryContext)
	if !execs || !queries {
		ds.Close()
		return nil, nil
	}
	s := &cachedStmt{Stmt: ds}
	c.stmts[query] = s
	return s, nil
}

func (c *stmtCacheConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	s, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	} else if s == nil {
		return c.Conn.(driver.ExecerContext).ExecContext(ctx, anonymousParams(query), args)
	}
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (c *stmtCacheConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	s, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	} else if s == nil {
		return c.Conn.(driver.QueryerContext).QueryContext(ctx, anonymousParams(query), args)
	}
	rows, err := s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		return nil, err
	}
	s.busy = true
	return &cachedRows{Rows: rows, stmt: s}, nil
}

func (c *stmtCacheConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.Conn.Prepare(query)
}

func (c *stmtCacheConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return nil, errors.New("sqlstore: the SQLite driver cannot begin a transaction with options")
}

func (c *stmtCacheConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *stmtCacheConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *stmtCacheConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// Close finalizes the cached statements, then closes the connection.
func (c *stmtCacheConn) Close() error {
	var errs []error
	for q, s := range c.stmts {
		errs = append(errs, s.Close())
		delete(c.stmts, q)
	}
	return errors.Join(append(errs, c.Conn.Close())...)
}

// cachedRows frees its statement for the next query when it is closed.
type cachedRows struct {
	driver.Rows
	stmt *cachedStmt
}

func (r *cachedRows) Close() error {
	r.stmt.busy = false
	return r.Rows.Close()
}

// anonymousParams rewrites a statement whose parameters are $1, $2, …, $n,
// each once and in that order outside quotes and comments, to use "?" for
// each: SQLite numbers anonymous parameters in order, so they bind the same
// arguments. The driver asks SQLite for every parameter's name before
// binding it, which for a named one costs a copy of the name and a parse
// of its number; a placement's multi-row statements bind hundreds. Any
// other statement is returned as it is.
func anonymousParams(query string) string {
	var out []byte
	next, last := 1, 0 // the parameter expected next; where out copied up to
	for i := 0; i < len(query); i++ {
		switch c := query[i]; {
		case c == '\'' || c == '"':
			end := strings.IndexByte(query[i+1:], c)
			if end < 0 {
				return query
			}
			i += end + 1 // a doubled quote is two quoted runs: the same skip
		case c == '-' && strings.HasPrefix(query[i:], "--"):
			end := strings.IndexByte(query[i:], '\n')
			if end < 0 {
				return query
			}
			i += end
		case c == '$' || c == '?' || c == ':' || c == '@':
			j := i + 1
			for j < len(query) && query[j] >= '0' && query[j] <= '9' {
				j++
			}
			if c != '$' || query[i+1:j] != strconv.Itoa(next) {
				return query // another style, a number out of order, or a name
			}
			out = append(append(out, query[last:i]...), '?')
			next, last, i = next+1, j, j-1
		}
	}
	if out == nil {
		return query
	}
	return string(append(out, query[last:]...))
}
