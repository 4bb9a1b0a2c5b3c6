// Package httpapi is the HTTP JSON API of the coordinator, under /v1.
//
// It is a thin adapter over *server.Server: it authenticates the caller (an
// API key for people and programs, an ed25519 signature for agents), decodes
// and checks the request's shape, calls one server method and encodes the
// answer. Authorisation and every rule of the market live in the server.
//
// Handlers return errors; one adapter (handle) writes them, and exactly one
// table (codes, in error.go) turns idlegrid error codes into HTTP statuses.
// See docs/api.md for the endpoints.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gateway"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/ratelimit"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/session"
)

// Defaults for Options.
const (
	DefaultMaxBodyBytes   = 1 << 20
	DefaultMaxWait        = 30 * time.Second
	DefaultRequestTimeout = 30 * time.Second
)

// longPollMargin is added to a long poll's wait for its request timeout, so
// that the server's own answer at the end of the wait is always written.
const longPollMargin = 10 * time.Second

// Options tunes the API. The zero value is ready to use.
type Options struct {
	Logger *slog.Logger // nil: slog.Default()
	// MaxBodyBytes caps a request body; larger bodies get 413. Default 1 MiB.
	MaxBodyBytes int64
	// MaxWait caps the wait of the agents' long poll. Default 30s.
	MaxWait time.Duration
	// RequestTimeout bounds every request but the long poll. Default 30s.
	RequestTimeout time.Duration
	// Sessions accepts the agents' sessions (GET /v1/agent/session) and
	// keeps them by node; its owner closes it on shutdown, before the HTTP
	// server. Nil: the server offers no sessions, and agents use plain HTTP.
	Sessions *session.Registry
	// Gateway serves the OpenAI-compatible inference API (see gateway.go).
	// Nil: the server offers none.
	Gateway http.Handler
	// Metrics is where the API counts its requests and what GET /metrics
	// serves (metrics.go); give it the registry the coordinator registers
	// on too. Nil: a registry of the API's own.
	Metrics *prometheus.Registry
	// AccountLimits rate-limit each account's requests but admins': one
	// renter's or provider's script cannot starve the others or the
	// scheduler it asks. Agents are not limited (they sign as their
	// nodes), nor the gateway's model requests, which it limits per key;
	// give the gateway the same buckets for its other requests. Nil: no
	// limit.
	AccountLimits *ratelimit.Buckets
	// AuthFailuresPerMinute and AuthFailureBurst slow down an address that
	// keeps failing to authenticate (authguard.go): a token bucket of
	// AuthFailureBurst failures refilled at AuthFailuresPerMinute; an
	// address with none left gets 429 on every request until it refills.
	// Defaults 6 and 30; a negative rate: no limit.
	AuthFailuresPerMinute float64
	AuthFailureBurst      int
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client whose failed authentications count (authguard.go), beside
	// loopback, which is always trusted.
	TrustedProxies []netip.Prefix
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = prometheus.NewRegistry()
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.AuthFailuresPerMinute == 0 {
		o.AuthFailuresPerMinute = DefaultAuthFailuresPerMinute
	}
	if o.AuthFailureBurst <= 0 {
		o.AuthFailureBurst = DefaultAuthFailureBurst
	}
	return o
}

// api serves the routes of one server.
type api struct {
	srv   *server.Server
	opts  Options
	log   *slog.Logger
	mux   *http.ServeMux
	http  *httpMetrics
	guard *authGuard // addresses that fail to authenticate
	seen  *replays   // signed agent requests taken
	// native are the first segments under /v1 of the API's own routes
	// (jobs, agent, ...): a path under /v1 that no route serves is the
	// API's to answer when its first segment is one of these, and the
	// gateway's otherwise (unrouted).
	native map[string]bool
}

// handlerFunc is an HTTP handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// New returns the API of srv as an http.Handler.
func New(srv *server.Server, opts Options) http.Handler {
	opts = opts.withDefaults()
	a := &api{srv: srv, opts: opts, log: opts.Logger, mux: http.NewServeMux(), http: newHTTPMetrics(opts.Metrics),
		seen: newReplays(), native: map[string]bool{},
		guard: newAuthGuard(opts.AuthFailuresPerMinute, opts.AuthFailureBurst, opts.TrustedProxies)}
	a.routes()
	return hardened(a.unclean(a.mux))
}

// unclean answers a path under /v1 that is not clean (an empty segment,
// "." or "..": /v1/jobs//cancel, a client's ID left out) with the API's
// own 404, instead of http.ServeMux's redirect to the cleaned path, an
// HTML page that a JSON client cannot read and that would take a POST
// whose ID was empty to another route (/v1/jobs/cancel, as if "cancel"
// were the ID). Other paths (the dashboard's) go to next as they are.
func (a *api) unclean(next http.Handler) http.Handler {
	notFound := a.handler("/", a.opts.RequestTimeout, func(w http.ResponseWriter, r *http.Request) error {
		// Not "no such endpoint", which the CLI and the dashboard read as an
		// older server's: the endpoint may well be there, but for an ID.
		return idlegrid.Errorf(idlegrid.ENOTFOUND, "%s %s: a segment of the path is empty, . or .. (an ID left out?); send the path as docs/api.md gives it",
			r.Method, r.URL.Path)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; strings.HasPrefix(p, "/v1/") && !isClean(p) {
			notFound.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isClean reports whether path is as http.ServeMux would serve it, not
// redirect it: path.Clean's, but for a trailing slash.
func isClean(p string) bool {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// hardened sets on every answer of h, the API's and the gateway's alike
// (streams included: it wraps nothing, so flushing works as before), what
// keeps a browser from reading an answer as anything but what it says it
// is, and from showing it in a frame of another site's page. The
// dashboard's page and assets (internal/web) set their own, stricter,
// policy. Served over HTTPS by the server itself, every answer also tells
// the browser to come back over HTTPS only, for a year; behind a proxy
// that ends TLS, the proxy says so.
func hardened(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
		if r.TLS != nil {
			w.Header().Set("Strict-Transport-Security", "max-age=31536000")
		}
		h.ServeHTTP(w, r)
	})
}

func (a *api) routes() {
	t := a.opts.RequestTimeout
	a.handle("GET /v1/healthz", t, a.healthz)
	a.handle("GET /v1/readyz", t, a.readyz)
	a.handle("GET /metrics", t, a.withKey(a.metrics))

	a.handle("POST /v1/accounts", t, a.withKey(a.createAccount))
	a.handle("GET /v1/accounts", t, a.withKey(a.listAccounts))
	a.handle("GET /v1/accounts/{id}", t, a.withKey(a.findAccount))
	a.handle("GET /v1/me", t, a.withKey(a.me))
	a.handle("POST /v1/keys", t, a.withKey(a.createAPIKey))
	a.handle("GET /v1/keys", t, a.withKey(a.listAPIKeys))
	a.handle("DELETE /v1/keys/{id}", t, a.withKey(a.noBody(a.revokeAPIKey)))
	a.handle("POST /v1/join-tokens", t, a.withKey(a.createJoinToken))
	a.handle("GET /v1/join-tokens", t, a.withKey(a.listJoinTokens))
	a.handle("DELETE /v1/join-tokens/{id}", t, a.withKey(a.noBody(a.revokeJoinToken)))

	a.handle("GET /v1/nodes", t, a.withKey(a.listNodes))
	a.handle("GET /v1/nodes/{id}", t, a.withKey(a.findNode))
	a.handle("GET /v1/nodes/{id}/schedule", t, a.withKey(a.nodeSchedule))
	a.handle("PUT /v1/nodes/{id}/schedule", t, a.withKey(a.setNodeSchedule))
	a.handle("DELETE /v1/nodes/{id}/schedule", t, a.withKey(a.noBody(a.removeNodeSchedule)))
	a.handle("PUT /v1/nodes/{id}/drain", t, a.withKey(a.noBody(a.drainNode)))
	a.handle("DELETE /v1/nodes/{id}/drain", t, a.withKey(a.noBody(a.undrainNode)))
	a.handle("POST /v1/nodes/{id}/retire", t, a.withKey(a.noBody(a.retireNode)))
	a.handle("POST /v1/jobs", t, a.withKey(a.submitJob))
	a.handle("GET /v1/jobs", t, a.withKey(a.listJobs))
	a.handle("GET /v1/jobs/{id}", t, a.withKey(a.findJob))
	a.handle("POST /v1/jobs/{id}/cancel", t, a.withKey(a.noBody(a.cancelJob)))
	a.handle("GET /v1/jobs/{id}/explain", t, a.withKey(a.explainJob))
	a.handle("GET /v1/jobs/{id}/watch", t, a.withKey(a.watchJob))
	a.handle("GET /v1/market", t, a.withKey(a.marketView))
	a.handle("GET /v1/leases", t, a.withKey(a.listLeases))
	a.handle("GET /v1/leases/{id}", t, a.withKey(a.findLease))
	a.handle("GET /v1/leases/{id}/logs", t, a.withKey(a.leaseLogs))
	a.handle("GET /v1/leases/{id}/receipts", t, a.withKey(a.leaseReceipts))
	a.auditRoutes() // audit.go
	a.reputationRoutes()
	a.handle("GET /v1/providers/{id}/fill", t, a.withKey(a.providerFill)) // fill.go

	a.handle("POST /v1/accounts/{id}/topup", t, a.withKey(a.topUp))
	a.handle("GET /v1/balance", t, a.withKey(a.ownBalance))
	a.handle("GET /v1/accounts/{id}/balance", t, a.withKey(a.accountBalance))
	a.handle("GET /v1/transfers", t, a.withKey(a.listTransfers))
	a.handle("GET /v1/summary", t, a.withKey(a.summary))
	a.handle("POST /v1/payouts", t, a.withKey(a.requestPayout))
	a.handle("GET /v1/payouts", t, a.withKey(a.listPayouts))
	a.handle("POST /v1/payouts/{id}/settle", t, a.withKey(a.settlePayout))
	a.handle("POST /v1/payouts/{id}/reject", t, a.withKey(a.rejectPayout))
	a.handle("GET /v1/statements", t, a.withKey(a.statement))
	a.handle("GET /v1/notices", t, a.withKey(a.listNotices))
	a.handle("GET /v1/spend-limits", t, a.withKey(a.listSpendLimits))
	a.handle("PUT /v1/accounts/{id}/spend-limit", t, a.withKey(a.setAccountLimit))
	a.handle("DELETE /v1/accounts/{id}/spend-limit", t, a.withKey(a.noBody(a.removeAccountLimit)))
	a.handle("PUT /v1/keys/{id}/spend-limit", t, a.withKey(a.setKeyLimit))
	a.handle("DELETE /v1/keys/{id}/spend-limit", t, a.withKey(a.noBody(a.removeKeyLimit)))
	a.handle("GET /v1/keys/{id}/routing", t, a.withKey(a.keyRouting))
	a.handle("PUT /v1/keys/{id}/routing", t, a.withKey(a.setKeyRouting))
	a.handle("DELETE /v1/keys/{id}/routing", t, a.withKey(a.noBody(a.removeKeyRouting)))
	a.handle("GET /v1/registry-logins", t, a.withKey(a.listRegistryLogins)) // registry.go
	a.handle("PUT /v1/registry-logins/{registry}", t, a.withKey(a.putRegistryLogin))
	a.handle("DELETE /v1/registry-logins/{registry}", t, a.withKey(a.noBody(a.removeRegistryLogin)))
	a.disputeRoutes(t) // dispute.go

	a.handle("POST /v1/agent/join", t, a.withJoinSignature(a.join))
	a.handle("POST /v1/agent/join-tokens/check", t, a.checkJoinToken) // agentcheck.go
	a.handle("GET /v1/agent/node", t, a.withNode(a.agentNode))
	a.handle("PUT /v1/agent/offer", t, a.withNode(a.updateOffer))
	a.handle("POST /v1/agent/heartbeat", t, a.withNode(a.heartbeat))
	a.handle("POST /v1/agent/goodbye", t, a.withNode(a.goodbye))
	a.handle("GET /v1/agent/commands", a.opts.MaxWait+longPollMargin, a.withNode(a.commands))
	a.handle("POST /v1/agent/leases/{id}/report", t, a.withNode(a.reportLease))
	a.handle("POST /v1/agent/leases/{id}/logs", t, a.withNode(a.appendLogs))
	a.handle("POST /v1/agent/leases/{id}/receipts", t, a.withNode(a.sendReceipts))
	a.handle("GET /v1/agent/leases/{id}/receipts/last", t, a.withNode(a.lastReceipt))
	a.mux.Handle("GET "+session.Path, a.sessionRoute()) // no time limit: it lasts as long as the session
	a.attestRoutes(t)
	a.gatewayRoutes()

	a.mux.Handle("/", a.unrouted(t))
}

// handle registers fn under pattern, and notes the pattern's first
// segment under /v1 as the API's (api.native).
func (a *api) handle(pattern string, timeout time.Duration, fn handlerFunc) {
	if seg, ok := v1Segment(pattern[strings.IndexByte(pattern, ' ')+1:]); ok && seg != "" {
		a.native[seg] = true
	}
	a.mux.Handle(pattern, a.handler(pattern, timeout, fn))
}

// handler is fn as an http.Handler. It is the one place where a handler's
// error is written, where panics are caught, and where the request's time
// limit is set: timeout bounds both the handler's context and the write.
func (a *api) handler(pattern string, timeout time.Duration, fn handlerFunc) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r = r.WithContext(ctx)
		w := &statusWriter{ResponseWriter: rw}
		// Best effort: not every ResponseWriter supports deadlines.
		_ = http.NewResponseController(w).SetWriteDeadline(start.Add(timeout + time.Second))
		w.Header().Set("Cache-Control", "no-store")
		defer func() {
			took := time.Since(start)
			a.guard.note(r, w.status, a.srv.Now())
			a.http.observe(pattern, w.status, took)
			a.log.Debug("http", "method", r.Method, "path", r.URL.Path, "status", w.status, "duration", took)
		}()
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				a.log.Error("http: panic", "method", r.Method, "path", r.URL.Path, "panic", p)
				a.writeError(w, r, idlegrid.Errorf(idlegrid.EINTERNAL, "panic: %v", p))
			}
		}()
		if !idlegrid.IsText(r.URL.Path) { // an ID no store could hold, e.g. /v1/jobs/%00
			a.writeError(w, r, notText("path"))
			return
		}
		if err := a.guard.admit(r, a.srv.Now()); err != nil {
			a.writeError(w, r, err)
			return
		}
		if err := fn(w, r); err != nil {
			a.writeError(w, r, err)
		}
	})
}

// statusWriter remembers the status of the answer, for the access log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// GET /v1/healthz: the server serves HTTP (liveness), and speaks this
// agent protocol.
func (a *api) healthz(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.Health{OK: true, Protocol: idlegrid.ProtocolVersion})
}

// GET /v1/readyz: the server can do its work (readiness): its engine is
// built and its database answers; else 503 saying which.
func (a *api) readyz(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	if err := a.srv.Ready(r.Context()); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.Health{OK: true, Protocol: idlegrid.ProtocolVersion})
}

// unrouted answers the paths no route matches. With a gateway, one under
// /v1 whose first segment is none of the API's own (/v1/responses,
// /v1/audio/speech, /v1/inference/...) is answered in OpenAI's error
// format (gateway.NoRoute), since an OpenAI SDK is what sends it, and is
// counted and guarded as the gateway's routes are; every other path,
// /v1/jobs/{id}/nope among them, in the API's own (noRoute), which the
// CLI and the dashboard read to tell an older server. Neither asks for a
// key: a 404 reveals nothing docs/api.md does not.
func (a *api) unrouted(timeout time.Duration) http.Handler {
	native := a.handler("/", timeout, a.noRoute)
	if a.opts.Gateway == nil {
		return native
	}
	openAI := a.counted("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gateway.NoRoute(w, r, a.allowed(r))
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seg, ok := v1Segment(r.URL.Path); ok && !a.native[seg] {
			openAI.ServeHTTP(w, r)
			return
		}
		native.ServeHTTP(w, r)
	})
}

// v1Segment is the first segment of path under /v1 ("" for /v1 and /v1/
// themselves), and whether path is under /v1 at all.
func v1Segment(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/v1")
	if !ok || (rest != "" && rest[0] != '/') {
		return "", false
	}
	seg, _, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	return seg, true
}

// allowed are the methods some route takes on r's path.
func (a *api) allowed(r *http.Request) []string {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := a.mux.Handler(probe); pattern != "/" && pattern != "" {
			allowed = append(allowed, m)
		}
	}
	return allowed
}

// noRoute answers paths no route matches, in the API's own error format.
// A path that exists under another method is an EINVALID naming the methods
// it takes.
func (a *api) noRoute(w http.ResponseWriter, r *http.Request) error {
	allowed := a.allowed(r)
	if len(allowed) > 0 {
		w.Header().Set("Allow", joinComma(allowed))
		return idlegrid.Errorf(idlegrid.EINVALID, "method %s is not allowed on %s; use %s", r.Method, r.URL.Path, joinComma(allowed))
	}
	return idlegrid.Errorf(idlegrid.ENOTFOUND, "no such endpoint: %s %s (see docs/api.md)", r.Method, r.URL.Path)
}

// NewServer returns an *http.Server for h with timeouts that suit the API:
// headers and bodies must arrive promptly and idle connections are closed,
// but there is no server-wide write timeout, because the agents' long poll
// outlives any sensible one; each route sets its own write deadline instead.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}
