// Package session is the one outbound, multiplexed connection between a
// node's agent and the coordinator, and everything that travels on it.
//
// The agent dials GET /v1/agent/session (Path), signed like every agent
// request, and the server upgrades it to a WebSocket that speaks the
// subprotocol idlegrid-session-v1 (Subprotocol). Both ends wrap the
// WebSocket as a net.Conn and run yamux over it: the agent is the yamux
// client, the server the yamux server, and either end may open streams.
// Every stream carries HTTP/1.1:
//
//   - streams the agent opens carry its ordinary agent API requests
//     (heartbeats, the long poll for commands, lease reports, logs), each
//     still signed with the node's key. The server hands them to the same API
//     handler as requests on plain connections, after refusing any that are
//     not the agent API of the node the session belongs to;
//   - streams the server opens carry its requests to the agent: today the
//     ping (GET /agent/v1/ping, PingPath), which the agent's end answers
//     itself; later notices and inference traffic, which the agent serves
//     with the handler it dials with.
//
// So the agent needs no inbound port, a request costs a stream (one frame,
// no handshake) instead of a connection, and the server can reach a node
// behind NAT through the Registry, which keeps the live sessions by node ID.
//
// Liveness: yamux pings every KeepAlive (15 s) and gives up when an answer
// takes longer than KeepAliveTimeout (10 s), so a dead connection is found
// within 25 s and the session closes. The agent then dials again with
// jittered backoff (see client.AgentClient.RunSession) and, meanwhile, sends
// its requests over plain HTTP, so its heartbeats, and with them its leases,
// outlive the gap. The server declares a node lost only after it misses the
// configured number of heartbeats, whatever becomes of its session.
//
// Goroutines: a Session owns yamux's (receive, send, keepalive), the HTTP
// server that serves the streams its peer opens, that server's
// connections, and the handlers of the requests on them, which it cancels.
// Close ends them all and returns when they have ended. A
// Registry owns its sessions: its Close closes them and waits for the
// handlers that serve them.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/idlegrid/idlegrid/internal/inflight"
)

// Path is where the server offers sessions.
const Path = "/v1/agent/session"

// Subprotocol is the WebSocket subprotocol of a session; its version
// changes with the framing (yamux, HTTP/1.1 on every stream).
const Subprotocol = "idlegrid-session-v1"

// PingPath is the agent's answer to the server's ping.
const PingPath = "/agent/v1/ping"

// Defaults for Config.
const (
	DefaultKeepAlive        = 15 * time.Second
	DefaultKeepAliveTimeout = 10 * time.Second
	// DefaultMaxPeerStreams is the server's bound on an agent's streams:
	// four times what the agent's transport keeps idle (256), with its
	// calls in flight; an honest agent stays well under it.
	DefaultMaxPeerStreams = 1024
)

const (
	// shutdownWait bounds how long a closing session waits for the
	// requests its peer had in flight; they are cancelled first.
	shutdownWait = 5 * time.Second
	// streamCloseWait bounds a half-closed stream whose peer never closes
	// its side.
	streamCloseWait = 30 * time.Second
	// streamOpenWait bounds how long an opened stream may wait for the
	// peer's acknowledgement before the session is deemed broken.
	streamOpenWait = 30 * time.Second
)

// Config tunes both ends of a session. The zero value is ready to use.
type Config struct {
	Logger *slog.Logger // nil: discard
	// KeepAlive is how often each end pings the other. Default 15 s.
	KeepAlive time.Duration
	// KeepAliveTimeout is how long an end waits for a ping's answer (and
	// for a frame to be written) before it closes the session. Default 10 s.
	KeepAliveTimeout time.Duration
	// MaxPeerStreams bounds the streams the peer may hold open on the
	// session at once: each costs a goroutine and a receive window of up
	// to 256 KiB, so a node that opens them without end would take the
	// server's memory. One past it is closed as it opens. The server's end
	// (NewRegistry) defaults to DefaultMaxPeerStreams; the agent's end has
	// no bound unless set, since the server opens a stream for each
	// inference request in flight, as many as the node's models allow.
	MaxPeerStreams int
	// Refused, when set, counts the streams refused for MaxPeerStreams.
	Refused *atomic.Int64
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.KeepAliveTimeout <= 0 {
		c.KeepAliveTimeout = DefaultKeepAliveTimeout
	}
	if c.Refused == nil {
		c.Refused = new(atomic.Int64)
	}
	return c
}

// Session is one live connection between an agent and the server. Either
// end may send HTTP requests to the other with RoundTrip.
type Session struct {
	nodeID  string
	mux     *yamux.Session
	live    *liveStreams // its open streams, whose reads expire when it closes
	log     *slog.Logger
	out     *http.Transport // requests to the peer, on streams this end opens (idle ones are reused)
	opened  time.Time
	trouble *atomic.Pointer[string] // yamux's last error, which is why a session ends
	closing atomic.Bool             // Close was called: the end is no trouble

	peer      *peerStreams // the streams the peer opened, open now
	answering answering    // those on which an answer is being written

	reqCtx    context.Context    // the context of the requests the peer sends
	cancelReq context.CancelFunc // ends them, once the session has closed
	done      chan struct{}      // closed when every goroutine of the session has ended
}

// newSession runs yamux over conn (as its client on the agent's end) and
// serves the streams the peer opens with h, until the session closes.
func newSession(conn net.Conn, agentEnd bool, nodeID string, h http.Handler, c Config) (*Session, error) {
	c = c.withDefaults()
	cfg := yamux.DefaultConfig()
	cfg.KeepAliveInterval = c.KeepAlive
	cfg.ConnectionWriteTimeout = c.KeepAliveTimeout
	cfg.StreamCloseTimeout = streamCloseWait
	cfg.StreamOpenTimeout = streamOpenWait
	trouble := new(atomic.Pointer[string])
	cfg.LogOutput = nil
	cfg.Logger = log.New(yamuxLog{c.Logger, trouble}, "", 0)
	start := yamux.Server
	if agentEnd {
		start = yamux.Client
	}
	live := &liveStreams{}
	mux, err := start(&joinFrames{Conn: conn, beforeClose: live.expireReads}, cfg)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("start session: %w", err)
	}
	s := &Session{nodeID: nodeID, mux: mux, live: live, log: c.Logger, opened: time.Now(), trouble: trouble, done: make(chan struct{})}
	s.peer = &peerStreams{most: c.MaxPeerStreams, refused: c.Refused, log: c.Logger, nodeID: nodeID}
	s.reqCtx, s.cancelReq = context.WithCancel(context.Background())
	s.out = &http.Transport{
		DialContext:         s.dial,
		DialTLSContext:      s.dial, // an https URL must not start TLS again inside a stream: the WebSocket has it
		MaxIdleConnsPerHost: 256,    // an idle stream costs little; opening and closing one per request under load costs frames and goroutines
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	go s.serve(h, agentEnd)
	return s, nil
}

// dial opens a stream to the peer, for s.out.
func (s *Session) dial(context.Context, string, string) (net.Conn, error) {
	st, err := s.mux.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("open stream on the session: %w", err)
	}
	return s.live.add(st), nil
}

// serve answers the streams the peer opens until the session closes, then
// cancels the requests in flight and waits for them.
func (s *Session) serve(h http.Handler, agentEnd bool) {
	defer close(s.done)
	var running inflight.Count // the handlers of the peer's requests, which http.Server.Close does not wait for
	srv := &http.Server{
		Handler:           running.Track(h),
		BaseContext:       func(net.Listener) context.Context { return s.reqCtx },
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(yamuxLog{log: s.log}, "session http: ", 0),
		ConnState:         s.answering.note,
	}
	if agentEnd {
		// The agent serves the server's requests (inference among them),
		// whose transport closes its idle streams itself. A read deadline
		// on a stream costs yamux a timer on every read, so the agent's
		// end sets none.
		srv.ReadHeaderTimeout, srv.IdleTimeout = 0, 0
	}
	_ = srv.Serve(streamListener{s.mux, s.live, s.peer}) // returns when the session closes, and closes it
	s.cancelReq()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		srv.Close() // closes the streams, but does not wait for the handlers
		if n := running.N(); n > 0 {
			s.log.Warn("session: requests the peer sent still run after they were cancelled; the session waits for them to end",
				"node", s.nodeID, "requests", n, "after", shutdownWait)
		}
		_ = running.Wait(context.Background())
	}
	s.out.CloseIdleConnections()
}

// answering counts the streams on which the answer to a request of the
// peer's is being written: from its first byte read until the answer has
// been written whole (net/http's StateActive, until StateIdle or
// StateClosed), which is after its handler has returned.
type answering struct {
	mu     sync.Mutex
	active map[net.Conn]bool
	n      inflight.Count
}

// note is the session's http.Server's ConnState.
func (a *answering) note(c net.Conn, st http.ConnState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := st == http.StateActive
	switch was := a.active[c]; {
	case now && !was:
		if a.active == nil {
			a.active = map[net.Conn]bool{}
		}
		a.active[c] = true
		a.n.Enter()
	case !now && was:
		delete(a.active, c)
		a.n.Leave()
	}
}

// WaitAnswered waits until no answer to the peer's requests is being
// written, or ctx ends: so that an end that closes the session (the agent
// stopping, once its handlers have returned) cuts none of an answer's
// last bytes.
func (s *Session) WaitAnswered(ctx context.Context) error { return s.answering.n.Wait(ctx) }

// NodeID returns the node the session belongs to.
func (s *Session) NodeID() string { return s.nodeID }

// Opened returns when the session was opened.
func (s *Session) Opened() time.Time { return s.opened }

// RoundTrip sends req to the peer on a stream of the session (a new one, or
// an idle one that an earlier request left) and returns the answer. It
// implements http.RoundTripper; the URL's host is not used.
func (s *Session) RoundTrip(req *http.Request) (*http.Response, error) {
	return s.out.RoundTrip(req)
}

// Closed is closed as soon as the session closes, for whatever reason;
// requests in flight on it fail from then on.
func (s *Session) Closed() <-chan struct{} { return s.mux.CloseChan() }

// Done is closed once the session has closed and all its goroutines have
// ended: after Closed, and after the requests the peer had in flight.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err says why a session that ended by itself ended (a keepalive
// unanswered, a connection cut, the peer gone), or nil: nil while it is
// open, and nil when Close ended it. A Close after the session ended by
// itself keeps the reason, for whoever logs the end.
func (s *Session) Err() error {
	if s.closing.Load() || !s.mux.IsClosed() {
		return nil
	}
	if p := s.trouble.Load(); p != nil {
		return errors.New(*p)
	}
	return ErrPeerGone
}

// ErrPeerGone is the Err of a session whose peer closed the connection
// without a word: the other end stopped, or noticed trouble first.
var ErrPeerGone = errors.New("the peer closed the connection")

// Close closes the session and waits for its goroutines; requests in flight
// either way fail. It may be called more than once.
func (s *Session) Close() error {
	if !s.mux.IsClosed() {
		s.closing.Store(true) // the end is Close's, no trouble
	}
	err := s.mux.Close()
	<-s.done
	return err
}

// Pong is the agent's answer to the server's ping.
type Pong struct {
	NodeID string `json:"node_id"` // the node the agent speaks for
}

// Ping asks the peer, which must be an agent, to answer, and returns how
// long the answer took. An answer from another node than the session's is
// an error.
func (s *Session) Ping(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent"+PingPath, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.RoundTrip(req)
	if err != nil {
		return 0, fmt.Errorf("ping node %s: %w", s.nodeID, err)
	}
	defer resp.Body.Close()
	var pong Pong
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("ping node %s: answered %s", s.nodeID, resp.Status)
	} else if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&pong); err != nil {
		return 0, fmt.Errorf("ping node %s: %w", s.nodeID, err)
	} else if pong.NodeID != s.nodeID {
		return 0, fmt.Errorf("ping node %s: answered by node %q", s.nodeID, pong.NodeID)
	}
	return time.Since(start), nil
}

// agentHandler is what the agent's end serves: the ping, and h for the rest.
func agentHandler(nodeID string, h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PingPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Pong{NodeID: nodeID})
	})
	if h != nil {
		mux.Handle("/", h)
	}
	return mux
}

// yamuxLog sends yamux's and the stream server's log lines to slog at
// debug level, and keeps the last of yamux's errors in trouble (when not
// nil), for Err: whoever notices the session's end logs it with its reason.
type yamuxLog struct {
	log     *slog.Logger
	trouble *atomic.Pointer[string]
}

func (w yamuxLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if rest, ok := strings.CutPrefix(msg, "[ERR] "); ok && w.trouble != nil {
		w.trouble.Store(&rest)
	}
	w.log.Debug("session: " + msg)
	return len(p), nil
}

// ErrNotOffered is the error of a dial to a server that does not offer
// sessions (it answered 404): an older server, or one with sessions off.
var ErrNotOffered = errors.New("the server does not offer agent sessions")

// RefusedError is a server's answer other than the upgrade to a dial.
type RefusedError struct {
	StatusCode int
	Status     string
	Body       []byte // the start of the answer's body
}

func (e *RefusedError) Error() string {
	body := strings.TrimSpace(string(e.Body))
	if len(body) > 200 {
		body = body[:200] + "…"
	}
	return fmt.Sprintf("the server refused the session: %s: %s", e.Status, body)
}

// Is makes a 404 match ErrNotOffered.
func (e *RefusedError) Is(target error) bool {
	return target == ErrNotOffered && e.StatusCode == http.StatusNotFound
}
