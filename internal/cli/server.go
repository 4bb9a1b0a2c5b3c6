package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/atomicfile"
	"github.com/idlegrid/idlegrid/internal/gateway"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/inflight"
	"github.com/idlegrid/idlegrid/internal/ratelimit"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/session"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
	"github.com/idlegrid/idlegrid/internal/web"
)

// defaultShutdownGrace is --shutdown-grace's default: long enough for an
// inference stream of a few thousand tokens to finish, well within the
// minute the deploy units give the server to stop.
const defaultShutdownGrace = 30 * time.Second

// cutWait bounds how long a shutdown waits, once the grace has passed, for
// the requests it cut to end (an inference request's charge among what
// they write) before it closes the store under them.
const cutWait = 10 * time.Second

// serverCommand is "idlegrid server".
type serverCommand struct{ env *env }

func (c *serverCommand) Run(ctx context.Context, args []string) error {
	fs := c.env.flags("server", serverHelp)
	cfg := serveConfig{}
	f := cfg.define(fs)
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	} else if err := cfg.check(fs); err != nil {
		return err
	} else if err := checkGCFloor(*f.gcFloor); err != nil {
		return err
	}
	if cfg.payoutHold == 0 {
		cfg.payoutHold = -1 // the coordinator reads 0 as its default
	}
	if cfg.shutdownGrace == 0 {
		cfg.shutdownGrace = -1 // serveConfig reads 0 as the default
	}
	defer startGCFloor(ctx, *f.gcFloor)()
	if cfg.logger, err = f.logs.newLogger(c.env.Err); err != nil {
		return err
	}
	cfg.announceKey = c.env.Err
	if cfg.trustPolicy, err = loadTrustPolicy(*f.trustPolicy); err != nil { // reputation.go
		return err
	}
	if cfg.auditKeyFile == "" {
		cfg.auditKeyFile = defaultAuditKeyFile(cfg.dsn) // audit.go
	}
	if cfg.meterJournal == "" {
		cfg.meterJournal = besideDatabase(cfg.dsn, "meter-journal")
	}

	rs, err := startServer(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.env.Out, "idlegrid server listening on %s\n", rs.url)
	return rs.serve(ctx, cfg.logger)
}

var serverHelp = help{
	usage: "idlegrid server [--listen 127.0.0.1:7070] [--db idlegrid.db|postgres://…] [--tls-cert FILE --tls-key FILE] [--fee-bps 1000] [--payout-hold 72h] [--complaint-window 720h] [--trust-policy FILE] [--bootstrap-admin-key-file FILE] [--shutdown-grace 30s]",
	about: `Run the coordinator: the HTTP API under /v1, the market engine that places
jobs on nodes, the escrow ledger, and the reapers that notice silent nodes.
Agents connect to it; nothing connects to them.

The store is a SQLite file, or PostgreSQL when --db is a postgres:// URL:
a database the URL's role owns, its password in PGPASSWORD rather than in
the URL, which ps shows. With PostgreSQL the audit log's key and the meter
journal are kept in the working directory (--audit-key, --meter-journal),
and backups are pg_dump's ('idlegrid backup' copies SQLite only).
On a database with no admin account yet, the server creates one and writes
its API key to --bootstrap-admin-key-file (mode 0600), or prints it once to
standard error when no file is given.

SIGTERM or Ctrl-C shuts down gracefully: the server stops accepting
connections, answers the long polls at once (agents and watchers ask
again, of the next server), lets the requests in flight, inference streams
among them, finish for up to --shutdown-grace and cuts what is left, then
closes the agents' sessions (they reconnect to the next server), writes
the inference meter's charges and closes the database. A second Ctrl-C
exits at once.

One server runs the market on a database: it takes the market lock before
it migrates the database, and a second server is refused. On PostgreSQL,
when the database stops confirming the lock (a stall, a dropped
connection), placing waits and the server takes the lock again on a new
session; it exits only when another server holds the lock, or when the
database stays unreachable for --market-lock-grace.`,
	examples: `idlegrid server --db idlegrid.db --bootstrap-admin-key-file admin.key
		idlegrid server --listen 0.0.0.0:7070 --db postgres://idlegrid@db:5432/idlegrid?sslmode=disable
		idlegrid server --listen :443 --tls-cert /etc/letsencrypt/live/market.example.com/fullchain.pem --tls-key /etc/letsencrypt/live/market.example.com/privkey.pem`,
}

// serverFlags are idlegrid server's flags that are not the coordinator's
// config.
type serverFlags struct {
	trustPolicy *string
	gcFloor     *int
	logs        logFlags
}

// define defines idlegrid server's flags, into c and the flags returned.
func (c *serveConfig) define(fs *flagSet) *serverFlags {
	f := &serverFlags{}
	fs.StringVar(&c.listen, "listen", "127.0.0.1:7070", "address to listen on; port 0 picks a free one")
	fs.StringVar(&c.dsn, "db", "idlegrid.db", "SQLite file path, or postgres:// URL")
	fs.Int64Var(&c.feeBPS, "fee-bps", 1000, "platform fee in basis points of each charge (1000 = 10%)")
	fs.StringVar(&c.adminKeyFile, "bootstrap-admin-key-file", "", "where to write the first admin's API key on a fresh database")
	fs.DurationVar(&c.heartbeat, "heartbeat-interval", 10*time.Second, "how often agents heartbeat")
	fs.IntVar(&c.missedHeartbeats, "missed-heartbeats", 3, "a node that misses this many heartbeats is lost and its work requeued")
	fs.DurationVar(&c.payoutHold, "payout-hold", server.DefaultPayoutHold, "how long providers' earnings stay pending after a settlement before they may be paid out; 0 for none")
	fs.DurationVar(&c.complaintWindow, "complaint-window", server.DefaultComplaintWindow, "how long after a lease's end its renter may complain about it ('idlegrid dispute open --lease'); an open complaint holds the provider's bond until an admin decides it")
	fs.StringVar(&c.auditKeyFile, "audit-key", "", "the audit log's signing key, created on first start; the database remembers it and refuses another (default: audit.key next to a SQLite --db, else in the working directory)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "serve HTTPS with the certificate (and its chain) in this PEM file; read again when it changes, e.g. after a renewal")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the private key of --tls-cert, a PEM file")
	fs.StringVar(&c.meterJournal, "meter-journal", "", "directory where the inference gateway journals each charge as its answer ends, until the database has it, so that a crash loses none once an answer is done; a start writes what it finds there first (default: meter-journal next to a SQLite --db, else in the working directory)")
	f.trustPolicy = fs.String("trust-policy", "", "the trust policy file: reputation formula, levels, the level gold jobs need (docs/trust.md); default: the built-in policy")
	f.logs.define(fs)
	f.gcFloor = gcFloorFlag(fs)
	c.inference = inferenceFlags(fs) // serverinference.go
	fs.Float64Var(&c.accountRPS, "api-account-rps", defaultAccountRPS, "API requests a second each account but admins may send, the gateway's that run no model (kept responses, conversations) among them (a token bucket; agents and model requests are limited apart); 0: no limit")
	fs.IntVar(&c.accountBurst, "api-account-burst", defaultAccountBurst, "how many requests an account may send at once before --api-account-rps paces it; 0: a second's worth")
	fs.Float64Var(&c.authFailuresPerMinute, "auth-failures-per-minute", httpapi.DefaultAuthFailuresPerMinute, "failed authentications (401s) an address may make a minute once --auth-failure-burst is spent; past them it gets 429 on every request until one refills; 0: no limit")
	fs.IntVar(&c.authFailureBurst, "auth-failure-burst", httpapi.DefaultAuthFailureBurst, "failed authentications an address may make at once before --auth-failures-per-minute paces it")
	fs.Var(&c.trustedProxies, "trusted-proxy", "a reverse proxy's address or CIDR block (repeat, or separate with commas) whose X-Forwarded-For names the client that failed authentications count against; loopback is always trusted")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", defaultShutdownGrace, "on SIGTERM or Ctrl-C, how long requests in flight (inference streams among them) may take to finish before they are cut; 0: cut them at once")
	fs.DurationVar(&c.lockGrace, "market-lock-grace", sqlstore.DefaultMarketLockGrace, "PostgreSQL: how long the market lock may stay in doubt, the database unreachable or stalled, before the server stops; placing waits meanwhile, and a lock another server has taken stops it at once")
	c.firstByte = firstByteFlags(fs)
	return f
}

// check says which flag is out of range, or what flags do not go together.
func (c *serveConfig) check(fs *flagSet) error {
	if c.feeBPS < 0 || c.feeBPS > 10000 {
		return usagef("--fee-bps must be between 0 and 10000, got %d", c.feeBPS)
	} else if c.heartbeat < time.Second || c.heartbeat > 10*time.Minute {
		return usagef("--heartbeat-interval must be between 1s and 10m, got %s", c.heartbeat)
	} else if c.missedHeartbeats < 1 || c.missedHeartbeats > 100 {
		return usagef("--missed-heartbeats must be between 1 and 100, got %d", c.missedHeartbeats)
	} else if c.payoutHold < 0 || c.payoutHold > 365*24*time.Hour {
		return usagef("--payout-hold must be between 0 and 8760h, got %s", c.payoutHold)
	} else if c.complaintWindow < time.Hour || c.complaintWindow > 365*24*time.Hour {
		return usagef("--complaint-window must be between 1h and 8760h, got %s", c.complaintWindow)
	} else if err := c.inference.check(); err != nil {
		return err
	} else if c.accountRPS < 0 || c.accountRPS > 1e6 || math.IsNaN(c.accountRPS) {
		return usagef("--api-account-rps must be between 0 and 1000000, got %g", c.accountRPS)
	} else if c.accountBurst < 0 || c.accountBurst > 1e6 {
		return usagef("--api-account-burst must be between 0 and 1000000, got %d", c.accountBurst)
	} else if c.authFailuresPerMinute < 0 || c.authFailuresPerMinute > 1e6 {
		return usagef("--auth-failures-per-minute must be between 0 (no limit) and 1000000, got %g", c.authFailuresPerMinute)
	} else if c.authFailureBurst < 1 || c.authFailureBurst > 1e6 {
		return usagef("--auth-failure-burst must be between 1 and 1000000, got %d", c.authFailureBurst)
	} else if c.shutdownGrace < 0 || c.shutdownGrace > time.Hour {
		return usagef("--shutdown-grace must be between 0 and 1h, got %s", c.shutdownGrace)
	} else if c.lockGrace < minLockGrace || c.lockGrace > time.Hour {
		return usagef("--market-lock-grace must be between %s (two checks of the lock) and 1h, got %s", minLockGrace, c.lockGrace)
	} else if err := c.firstByte.check(fs); err != nil {
		return err
	} else if (c.tlsCert == "") != (c.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together: the certificate and its private key")
	} else if err := checkDatabaseFlag(c.dsn); err != nil {
		return err
	}
	return nil
}

// serve waits until ctx is done, the HTTP server fails, or the market
// lock is lost, then stops rs.
func (rs *runningServer) serve(ctx context.Context, logger *slog.Logger) error {
	var err error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err = <-rs.served:
	case <-rs.lock.Lost():
		rs.srv.Close() // another server may run the market by now: stop placing and reaping at once
		err = withHint(fmt.Errorf("lost the market lock: %w", rs.lock.Err()),
			"the next start takes it again, or says which server holds it: one server runs the market on a database")
	}
	err = errors.Join(err, rs.stop())
	logger.Info("stopped")
	return err
}

// newLogger returns a text logger at the named level.
// logFlags are --log-level and --log-format, which the server and the
// agent share.
type logFlags struct{ level, format string }

func (f *logFlags) define(fs *flagSet) {
	fs.StringVar(&f.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.format, "log-format", "text", "log format: text (key=value lines) or json (one object a line, for log collectors)")
}

// newLogger writes to w at the level and in the format the flags say.
func (f *logFlags) newLogger(w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(f.level)); err != nil {
		return nil, usagef("--log-level must be debug, info, warn or error, got %q", f.level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch f.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format must be text or json, got %q", f.format)
}

// serveConfig is what a running server needs; "server" and "dev" share it.
type serveConfig struct {
	listen           string
	listenFlag       string // the flag that sets listen, named when the address is taken; "": --listen
	dsn              string
	feeBPS           int64
	heartbeat        time.Duration      // 0: the coordinator's default
	missedHeartbeats int                // 0: the coordinator's default
	payoutHold       time.Duration      // 0: the coordinator's default; negative: none
	complaintWindow  time.Duration      // 0: the coordinator's default
	adminKeyFile     string             // where to write a bootstrapped admin key
	auditKeyFile     string             // the audit log's signing key; "": a throwaway one (tests)
	meterJournal     string             // the inference gateway's journal of charges (gateway.Config.Journal); "": none (tests)
	lockCheck        time.Duration      // how often the PostgreSQL market lock is checked; 0: the store's default (tests shorten it)
	lockGrace        time.Duration      // how long the PostgreSQL market lock may go unconfirmed; 0: three checks
	lockClock        sqlstore.LockClock // the market lock's time; nil: the wall clock (tests step it)
	tlsCert, tlsKey  string             // PEM files to serve HTTPS with; "": plain HTTP
	announceKey      io.Writer          // where to print it when there is no file
	logger           *slog.Logger
	trustPolicy      *trustpolicy.Policy // nil: the default policy
	inference        *inferenceLimits    // nil: the gateway's defaults
	firstByte        *firstByteLimits    // nil: the gateway's defaults
	accountRPS       float64             // each account's API requests a second; 0: no limit
	accountBurst     int                 // 0: a second's worth
	// authFailuresPerMinute and authFailureBurst pace an address's failed
	// authentications (httpapi.Options); 0, 0: the API's defaults.
	authFailuresPerMinute float64
	authFailureBurst      int
	trustedProxies        prefixList    // beside loopback
	shutdownGrace         time.Duration // how long stop lets requests in flight finish; 0: defaultShutdownGrace; negative: none
	// graceTimer starts the shutdown's grace; nil: time.After. Tests end
	// it by hand.
	graceTimer func(time.Duration) <-chan time.Time
	wrap       func(http.Handler) http.Handler // wraps the server's handler (tests); nil: none
}

// defaultAccountRPS is --api-account-rps's default: far above what the
// CLI, the dashboard or a reasonable script sends, far below what a
// runaway loop does. idlegrid dev, one person's market, has no limit.
const defaultAccountRPS = 50

// minLockGrace is --market-lock-grace's least: two of the lock's checks,
// so that a stall puts the lock in doubt, and is waited out, before the
// server gives it up.
const minLockGrace = 2 * sqlstore.DefaultMarketLockCheck

// defaultAccountBurst is --api-account-burst's default: a dashboard's
// refresh asks up to about fifty things at once (a provider's nodes,
// their reputations, the running leases' receipts), and two tabs or a
// script beside it must not be refused.
const defaultAccountBurst = 200

// runningServer is a store, a coordinator and an HTTP server over them.
type runningServer struct {
	url      string // e.g. http://127.0.0.1:7070
	adminKey string // set when this start bootstrapped the first admin
	served   chan error

	store      *sqlstore.DB
	lock       *sqlstore.MarketLock // one server runs the market on a database
	srv        *server.Server
	http       *http.Server
	sessions   *session.Registry // agents' outbound sessions; http.Server does not track upgraded connections
	gateway    *gateway.Gateway  // the OpenAI-compatible inference API; its meter outlives the HTTP server
	cancelBase context.CancelFunc
	handlers   inflight.Count // the HTTP handlers running, upgraded ones among them
	grace      time.Duration
	graceTimer func(time.Duration) <-chan time.Time
	log        *slog.Logger
}

// checkListenAddr says what is wrong with addr as an address to listen
// on, a mistake in the command line rather than a failure to listen.
func checkListenAddr(addr string) error {
	if scheme, rest, ok := strings.Cut(addr, "://"); ok {
		return fmt.Errorf("%q is a URL: give the address alone, %s, without %s://", addr, rest, scheme)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return fmt.Errorf("%q is not an address: %s", addr, ae.Err)
		}
		return fmt.Errorf("%q is not an address: %v", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q is not an address: port %q is not a port number (0 to 65535)", addr, port)
	}
	return nil
}

// startServer opens the store and the coordinator, bootstraps the first
// admin on a fresh database, and serves HTTP on cfg.listen until stop.
func startServer(ctx context.Context, cfg serveConfig) (_ *runningServer, err error) {
	// The certificate and the address first: a typo in either must not
	// leave a database, an audit key and a journal made for nothing.
	ln, certs, err := listen(cfg)
	if err != nil {
		return nil, err
	}
	defer closeIfFailed(&err, ln.Close)
	store, lock, err := openMarket(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer closeIfFailed(&err, store.Close)
	defer closeIfFailed(&err, lock.Close)
	auditKey, err := loadAuditKey(ctx, cfg, store) // audit.go
	if err != nil {
		return nil, err
	}
	metrics := newMetricsRegistry()
	metrics.MustRegister(store.Collectors()...)
	metrics.MustRegister(lock.InDoubt())
	srv, err := server.Open(server.Config{
		Store: lock.Guard(store), Metrics: metrics, FeeBasisPoints: serverFee(cfg.feeBPS), Logger: cfg.logger, AuditKey: auditKey,
		HeartbeatInterval: cfg.heartbeat, MissedHeartbeats: cfg.missedHeartbeats,
		PayoutHold: serverPayoutHold(cfg.payoutHold), ComplaintWindow: cfg.complaintWindow, TrustPolicy: cfg.trustPolicy,
	})
	if errors.Is(err, server.ErrAuditKeyReplaced) {
		return nil, withHint(err, "start with --audit-key naming the file that holds the log's key; a new key would break every user's 'idlegrid audit verify'")
	} else if err != nil {
		return nil, err
	}
	defer closeIfFailed(&err, srv.Close)
	rs := &runningServer{store: store, lock: lock, srv: srv, served: make(chan error, 1)}
	rs.sessions = session.NewRegistry(session.Config{Logger: cfg.logger})
	metrics.MustRegister(rs.sessions.Collectors()...)
	defer closeIfFailed(&err, rs.sessions.Close)
	// The gateway first writes the charges its journal holds: before the
	// server serves, and before a bad flag has created an admin.
	// An account's API requests and its gateway requests that run no model
	// spend from one bucket.
	limits := ratelimit.New(cfg.accountRPS, cfg.accountBurst)
	if rs.gateway, err = openGateway(store, srv, rs.sessions, metrics, limits, cfg); err != nil {
		return nil, err
	}
	defer closeIfFailed(&err, rs.gateway.Close)
	if rs.adminKey, err = bootstrapAdmin(ctx, store, srv, cfg.adminKeyFile, cfg.announceKey, cfg.logger); err != nil {
		return nil, err
	}
	api := httpapi.New(srv, httpapi.Options{Logger: cfg.logger, Sessions: rs.sessions, Gateway: rs.gateway, Metrics: metrics, AccountLimits: limits,
		AuthFailuresPerMinute: authFailureRate(cfg.authFailuresPerMinute, cfg.authFailureBurst), AuthFailureBurst: cfg.authFailureBurst,
		TrustedProxies: cfg.trustedProxies})
	var h http.Handler = web.Handler(api)
	if cfg.wrap != nil {
		h = cfg.wrap(h)
	}
	rs.serveHTTP(ln, certs, h, cfg)
	cfg.logger.Info("server started", "url", rs.url, "store", storeKind(cfg.dsn), "fee_bps", cfg.feeBPS, "meter_journal", cfg.meterJournal)
	logAuditKey(cfg, srv) // audit.go
	return rs, nil
}

// listen checks the TLS certificate and key, if given, and listens on the
// address; nothing else is made before both are right.
func listen(cfg serveConfig) (net.Listener, *certFiles, error) {
	var certs *certFiles
	if cfg.tlsCert != "" {
		var err error
		if certs, err = loadCertFiles(cfg.tlsCert, cfg.tlsKey, cfg.logger); err != nil {
			return nil, nil, withHint(err, "check --tls-cert and --tls-key: a PEM certificate (with its chain) and its private key")
		}
	}
	if err := checkListenAddr(cfg.listen); err != nil {
		return nil, nil, usagef("%s: %v; give HOST:PORT, e.g. 127.0.0.1:7070, or 127.0.0.1:0 for any free port", cmp.Or(cfg.listenFlag, "--listen"), err)
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return nil, nil, withHint(err, "pick another address with "+cmp.Or(cfg.listenFlag, "--listen")+", e.g. 127.0.0.1:0 for any free port")
	}
	return ln, certs, nil
}

// openMarket opens the database with the market lock held, the lock taken
// before the migrations: a server refused it must not change the schema
// under the one running the market.
func openMarket(ctx context.Context, cfg serveConfig) (*sqlstore.DB, *sqlstore.MarketLock, error) {
	store, lock, err := sqlstore.OpenLocked(ctx, cfg.dsn, sqlstore.MarketLockConfig{
		Check: cfg.lockCheck, Grace: cfg.lockGrace, Logger: cfg.logger, Clock: cfg.lockClock})
	switch {
	case errors.Is(err, sqlstore.ErrMarketLocked):
		return nil, nil, withHint(err, "stop the other server first (a second replica, or an old one still running): one server runs the market on a database")
	case errors.Is(err, sqlstore.ErrNoPrivilege):
		return nil, nil, withHint(err, "the role in --db reaches the database but needs to own it and its tables: "+
			"give the server a database of its own, made with createdb --owner ROLE (deploy/server.md, \"PostgreSQL\")")
	case errors.Is(err, sqlstore.ErrSchemaNewer):
		return nil, nil, withHint(err, "run the idlegrid that migrated it, or a newer one; to go back to this one, "+
			"restore the backup taken before the upgrade (deploy/server.md, \"Upgrades\")")
	case err != nil:
		return nil, nil, withHint(err, "check --db: a writable SQLite file path, or a reachable postgres:// URL")
	}
	return store, lock, nil
}

// serveHTTP serves h on ln, over TLS with certs when given, until rs
// stops; the server's end goes to rs.served.
func (rs *runningServer) serveHTTP(ln net.Listener, certs *certFiles, h http.Handler, cfg serveConfig) {
	scheme := "http"
	if certs != nil {
		scheme = "https"
	}
	rs.url = scheme + "://" + ln.Addr().String()
	// Requests derive their context from base, so that a shutdown cuts
	// those still running when its grace has passed.
	base, cancelBase := context.WithCancel(context.Background())
	rs.cancelBase = cancelBase
	rs.grace, rs.graceTimer, rs.log = cmp.Or(cfg.shutdownGrace, defaultShutdownGrace), cfg.graceTimer, cfg.logger
	if rs.graceTimer == nil {
		rs.graceTimer = time.After
	}
	rs.http = httpapi.NewServer(cfg.listen, rs.handlers.Track(h))
	rs.http.BaseContext = func(net.Listener) context.Context { return base }
	rs.http.RegisterOnShutdown(rs.srv.Drain) // once the listeners are closed
	rs.http.ErrorLog = slog.NewLogLogger(cfg.logger.Handler(), slog.LevelWarn)
	serve := rs.http.Serve
	if certs != nil {
		rs.http.TLSConfig = certs.tlsConfig()
		serve = func(ln net.Listener) error { return rs.http.ServeTLS(ln, "", "") }
	} else if !loopback(ln.Addr().String()) {
		cfg.logger.Warn("serving plain HTTP beyond this machine: API keys cross the network in the clear; serve HTTPS with --tls-cert and --tls-key, or behind a TLS reverse proxy", "listen", cfg.listen)
	}
	go func() { // owned by rs.stop, which shuts rs.http down
		err := serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		rs.served <- err
	}()
}

// closeIfFailed, deferred, closes what a function opened when it returns
// the error *err.
func closeIfFailed(err *error, close func() error) {
	if *err != nil {
		close()
	}
}

// stop shuts the server down in the order that loses no answer that can
// still be given and no charge: it stops accepting connections and wakes
// the long polls (drain); lets the requests in flight finish, up to the
// grace; closes the agents' sessions, which http.Server does not track,
// so that their agents reconnect to the next server (inference streams
// travel on them: they close after the drain); cuts the requests left and
// waits for their handlers, which may still write; then stops the
// gateway's meter, which writes the charges left, the coordinator's loops,
// the market lock and the store.
func (rs *runningServer) stop() error {
	drained := rs.drain()
	rs.sessions.Close()
	rs.cancelBase()
	var err error
	if !drained {
		err = rs.http.Close()
		ctx, cancel := context.WithTimeout(context.Background(), cutWait)
		if rs.handlers.Wait(ctx) != nil {
			rs.log.Warn("requests cut at shutdown did not end; closing the database under them", "requests", rs.handlers.N())
		}
		cancel()
	}
	return errors.Join(err, rs.gateway.Close(), rs.srv.Close(), rs.lock.Close(), rs.store.Close())
}

// drain shuts the HTTP server down gracefully: it closes the listeners,
// has the coordinator answer its long polls (RegisterOnShutdown), and waits
// for the requests in flight until the grace passes. It reports whether
// they all finished.
func (rs *runningServer) drain() bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rs.http.Shutdown(ctx) }()
	var over <-chan time.Time
	n := rs.handlers.N() // agents' sessions among them, which close after
	switch {
	case rs.grace > 0:
		over = rs.graceTimer(rs.grace)
		rs.log.Info("shutdown: letting the requests in flight finish", "requests", n, "grace", rs.grace,
			"then", "the rest are cut; a second Ctrl-C or SIGTERM stops at once")
	default:
		rs.log.Warn("shutdown: cutting the requests in flight (--shutdown-grace 0)", "requests", n)
		cancel()
	}
	select {
	case err := <-done:
		return err == nil
	case <-over:
		rs.log.Warn("shutdown grace passed: cutting the requests still running", "grace", rs.grace, "requests", rs.handlers.N())
		cancel()
		return <-done == nil
	}
}

// openGateway starts the inference gateway over the store, the
// coordinator's API keys and the agents' sessions.
func openGateway(store *sqlstore.DB, srv *server.Server, sessions *session.Registry, metrics prometheus.Registerer, limits *ratelimit.Buckets, cfg serveConfig) (*gateway.Gateway, error) {
	gc := gateway.Config{
		Store: store, Nodes: gateway.Sessions{Registry: sessions}, AccountLimits: limits,
		Authenticate: srv.AuthenticateKey, StatusCode: httpapi.StatusCode,
		FeeBasisPoints: cfg.feeBPS, Logger: cfg.logger, Metrics: metrics, Journal: cfg.meterJournal,
	}
	cfg.inference.apply(&gc)
	cfg.firstByte.apply(&gc)
	g, err := gateway.New(gc)
	if errors.Is(err, gateway.ErrJournalInUse) {
		return nil, withHint(err, "another 'idlegrid server' writes its charges there: give each server its own --meter-journal")
	} else if err != nil {
		return nil, withHint(err, "check --meter-journal: a directory the server can create and write")
	}
	srv.ReportQueuesTo(g) // the agents' heartbeats say their model servers' queues
	return g, nil
}

// checkDatabaseFlag refuses a --db meant for PostgreSQL in a form other
// than the URL the store reads as PostgreSQL: a libpq keyword string
// ("host=… dbname=…") or a URL missing its //. The store would take either
// for a SQLite file's name and run a new, empty market in it. The value is
// not repeated, since it may hold a password.
func checkDatabaseFlag(dsn string) error {
	if storeKind(dsn) == "postgres" {
		return nil
	}
	const want = "give PostgreSQL as a URL, postgres://USER@HOST:5432/DBNAME?sslmode=verify-full (the password in PGPASSWORD)"
	if lower := strings.ToLower(dsn); strings.HasPrefix(lower, "postgres:") || strings.HasPrefix(lower, "postgresql:") {
		return usagef("--db: a PostgreSQL URL starts postgres:// or postgresql://; " + want)
	}
	for _, field := range strings.Fields(dsn) {
		key, _, ok := strings.Cut(field, "=")
		switch key {
		case "host", "hostaddr", "port", "dbname", "user", "password", "sslmode", "service":
			if ok {
				return usagef("--db: a libpq connection string (%s=…) would be read as a SQLite file's name; %s", key, want)
			}
		}
	}
	return nil
}

func storeKind(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return "postgres"
	}
	return "sqlite"
}

// bootstrapAdmin creates the first admin account on a database that has
// none and hands its API key to the operator: written to keyFile (mode
// 0600), which is logged, or, without a file, printed once to announce,
// never to the log. It returns the key, or "" when an admin already exists.
func bootstrapAdmin(ctx context.Context, store idlegrid.Store, srv *server.Server, keyFile string, announce io.Writer, log *slog.Logger) (string, error) {
	admins, err := store.ListAccounts(ctx, idlegrid.AccountFilter{Role: idlegrid.RoleAdmin, Limit: 1})
	if err != nil {
		return "", err
	}
	var keyless *idlegrid.Account
	if len(admins) > 0 {
		if keyless, err = srv.KeylessAdmin(ctx); err != nil || keyless == nil {
			return "", err // an admin has a key: nothing to do
		}
	}
	// Make the file first (a temporary one beside keyFile, which keepKey
	// renames), so a key is never created that cannot be kept, and no
	// empty key file is left if none is.
	var f *os.File
	if keyFile != "" {
		if f, err = atomicfile.Temp(keyFile); err != nil {
			return "", withHint(err, "--bootstrap-admin-key-file must be a writable path, in a directory the server can write")
		}
		defer os.Remove(f.Name()) // on failure; fails harmlessly after the rename
		defer f.Close()
	}
	a, key, secret, err := adminKey(ctx, srv, keyless, log)
	if err != nil {
		return "", err
	}
	if f == nil {
		if announce != nil {
			fmt.Fprintf(announce, "idlegrid: created admin account %s; its API key (shown once, keep it safe):\n%s\n", a.ID, secret)
		}
		return secret, nil
	}
	if err := keepKey(f, keyFile, secret); err != nil {
		// Revoked, the key leaves the admin keyless: the next start makes one.
		return "", errors.Join(err, store.RevokeAPIKey(context.WithoutCancel(ctx), a.ID, key.ID, srv.Now()))
	}
	if log != nil {
		log.Info("created the admin account; its API key is in the key file", "account", a.ID, "key_file", keyFile)
	}
	return secret, nil
}

// adminKey makes the first admin and its key, or a key for keyless, an
// admin left without one.
func adminKey(ctx context.Context, srv *server.Server, keyless *idlegrid.Account, log *slog.Logger) (*idlegrid.Account, *idlegrid.APIKey, string, error) {
	if keyless == nil {
		return srv.Bootstrap(ctx, "admin", idlegrid.RoleAdmin)
	}
	key, secret, err := srv.BootstrapKey(ctx, keyless.ID)
	if err == nil && log != nil {
		log.Warn("no admin had a usable API key (a first start cut short, or every key revoked): made one", "account", keyless.ID)
	}
	return keyless, key, secret, err
}

// keepKey writes the admin's key, alone and private to its owner, to f,
// a new file beside path, and puts it in place of what path held
// (atomicfile.Replace), on disk before the server goes on: the store has the key
// by then, and an empty file after a power cut would leave nobody able to
// act as the admin, since the next start finds one with a key.
func keepKey(f *os.File, path, secret string) error {
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		return err
	}
	return atomicfile.Replace(f, path)
}

// serverFee is --fee-bps as server.Config reads it, where zero takes the
// default: a platform that charges no fee asks for a negative one.
func serverFee(feeBPS int64) int64 {
	if feeBPS == 0 {
		return -1
	}
	return feeBPS
}

// serverPayoutHold is --payout-hold as server.Config reads it, where zero
// takes the default (72h): a market that pays out at once, as
// "--payout-hold 0" asks, asks for a negative hold.
func serverPayoutHold(hold time.Duration) time.Duration {
	if hold == 0 {
		return -1
	}
	return hold
}

// newMetricsRegistry is the registry GET /metrics serves: the Go runtime's
// and the process's, then what the store, the coordinator, the agents'
// sessions, the gateway and the API register.
func newMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// prefixList is a flag of addresses and CIDR blocks, repeated or
// separated by commas.
type prefixList []netip.Prefix

func (l *prefixList) String() string {
	s := make([]string, len(*l))
	for i, p := range *l {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (l *prefixList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return fmt.Errorf("%q is not an IP address or CIDR block (e.g. 10.0.0.5 or 10.0.0.0/8)", part)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		*l = append(*l, p.Masked())
	}
	return nil
}

// authFailureRate is --auth-failures-per-minute as httpapi.Options takes
// it: 0 given there means no limit, which the API spells as a negative
// rate (its 0 is the default); unset (no burst either, as in tests): 0.
func authFailureRate(perMinute float64, burst int) float64 {
	if perMinute == 0 && burst > 0 {
		return -1
	}
	return perMinute
}

// firstByteLimits are how long the inference gateway waits for a
// provider's first byte of a stream before it tries the next one
// (gateway.Config's FirstByteTimeout, FirstBytePerKTokens and
// MaxFirstByteTimeout).
type firstByteLimits struct {
	timeout, perKTokens, max time.Duration
	maxSet                   bool // --inference-max-first-byte-timeout was given
}

// firstByteFlags adds the first-byte flags to fs.
func firstByteFlags(fs *flagSet) *firstByteLimits {
	l := &firstByteLimits{}
	fs.DurationVar(&l.timeout, "inference-first-byte-timeout", gateway.DefaultFirstByteTimeout,
		"how long a provider may take to the first byte of an inference stream before the gateway tries the next provider; a long prompt adds --inference-first-byte-per-1k-tokens")
	fs.DurationVar(&l.perKTokens, "inference-first-byte-per-1k-tokens", gateway.DefaultFirstBytePerKTokens,
		"first-byte time added for each thousand tokens of a stream's prompt, which a model server reads whole before its first token; the default allows for a prefill of 1,000 tokens a second")
	fs.DurationVar(&l.max, "inference-max-first-byte-timeout", gateway.DefaultMaxFirstByteTimeout,
		"the longest first-byte wait, however long the prompt; set it to --inference-first-byte-timeout for no allowance by prompt (raised to --inference-first-byte-timeout when not given)")
	return l
}

// check validates the flags, each error naming its flag, and raises the
// longest wait, when not given, to the first-byte timeout.
func (l *firstByteLimits) check(fs *flagSet) error {
	fs.Visit(func(f *flag.Flag) { l.maxSet = l.maxSet || f.Name == "inference-max-first-byte-timeout" })
	if !l.maxSet {
		l.max = max(l.max, l.timeout)
	}
	switch {
	case l.timeout < time.Second || l.timeout > time.Hour:
		return usagef("--inference-first-byte-timeout must be between 1s and 1h, got %s", l.timeout)
	case l.perKTokens < time.Millisecond || l.perKTokens > time.Minute:
		return usagef("--inference-first-byte-per-1k-tokens must be between 1ms and 1m, got %s", l.perKTokens)
	case l.max < l.timeout || l.max > time.Hour:
		return usagef("--inference-max-first-byte-timeout must be between --inference-first-byte-timeout (%s) and 1h, got %s", l.timeout, l.max)
	}
	return nil
}

// apply sets the limits on the gateway's config; nil keeps its defaults.
func (l *firstByteLimits) apply(c *gateway.Config) {
	if l == nil {
		return
	}
	c.FirstByteTimeout, c.FirstBytePerKTokens, c.MaxFirstByteTimeout = l.timeout, l.perKTokens, l.max
}
