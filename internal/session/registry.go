package session

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/idlegrid/idlegrid"
)

// Registry is the server's end: it accepts the agents' sessions and keeps
// the live ones by node ID, so that the server can reach a node. The HTTP
// layer owns it; Close it on shutdown.
type Registry struct {
	cfg Config

	mu      sync.Mutex
	closed  bool
	byNode  map[string]*Session
	serving sync.WaitGroup // the handlers inside Serve
	// opened and replaced count sessions since the registry was made
	// (metrics.go).
	opened, replaced atomic.Int64
}

// NewRegistry returns an empty registry.
func NewRegistry(c Config) *Registry {
	if c.MaxPeerStreams <= 0 {
		c.MaxPeerStreams = DefaultMaxPeerStreams
	}
	return &Registry{cfg: c.withDefaults(), byNode: map[string]*Session{}}
}

// Serve upgrades req, which the caller has authenticated as signed by
// nodeID, to a session; keeps it as the node's session (closing the one it
// replaces: the agent has reconnected); serves the streams the agent opens
// with h; and returns once the session has ended, or the registry has
// closed. It runs in req's handler goroutine, and req's context bounds the
// session.
//
// Serve returns an error only when it has not answered req, so that the
// caller answers with it: req is not an upgrade, or the registry is closed.
func (r *Registry) Serve(w http.ResponseWriter, req *http.Request, nodeID string, h http.Handler) error {
	if !isUpgrade(req) {
		// An agent always asks for the upgrade: one that arrives without
		// it passed a proxy that dropped the Upgrade header.
		return idlegrid.Errorf(idlegrid.EINVALID, "GET %s must be a WebSocket upgrade with the subprotocol %s; "+
			"the agent asks for one, so a proxy between it and the server dropped the Upgrade header: "+
			"let the proxy pass WebSocket upgrades (nginx: proxy_http_version 1.1 and proxy_set_header Upgrade/Connection)", Path, Subprotocol)
	}
	if !r.enter() {
		return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "the server is shutting down; connect again later")
	}
	defer r.serving.Done()
	ws, err := websocket.Accept(w, req, &websocket.AcceptOptions{
		Subprotocols: []string{Subprotocol}, CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil { // Accept has answered
		r.cfg.Logger.Warn("session: upgrade failed", "node", nodeID, "err", err)
		return nil
	}
	if ws.Subprotocol() != Subprotocol {
		ws.Close(websocket.StatusProtocolError, "speak the subprotocol "+Subprotocol)
		return nil
	}
	conn := websocket.NetConn(req.Context(), ws, websocket.MessageBinary)
	s, err := newSession(conn, false, nodeID, h, r.cfg)
	if err != nil {
		r.cfg.Logger.Warn("session: cannot start", "node", nodeID, "err", err)
		return nil
	}
	if !r.add(s) {
		s.Close()
		return nil
	}
	r.cfg.Logger.Info("session opened", "node", nodeID, "remote", req.RemoteAddr)
	<-s.Closed()
	r.remove(s)
	<-s.Done()
	attrs := []any{"node", nodeID, "after", time.Since(s.Opened()).Round(time.Millisecond)}
	if err := s.Err(); err != nil {
		attrs = append(attrs, "err", err)
	}
	r.cfg.Logger.Info("session closed", attrs...)
	return nil
}

func isUpgrade(req *http.Request) bool {
	return strings.EqualFold(req.Header.Get("Upgrade"), "websocket")
}

// enter counts one more Serve, unless the registry is closed.
func (r *Registry) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.serving.Add(1)
	return true
}

// add makes s its node's session, closing the one it replaces, unless the
// registry has closed meanwhile.
func (r *Registry) add(s *Session) bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	old := r.byNode[s.nodeID]
	r.byNode[s.nodeID] = s
	r.opened.Add(1)
	if old != nil {
		r.replaced.Add(1)
	}
	r.mu.Unlock()
	if old != nil {
		r.cfg.Logger.Info("session replaced; the agent reconnected", "node", s.nodeID)
		old.Close()
	}
	return true
}

// remove forgets s, unless a newer session of its node has replaced it.
func (r *Registry) remove(s *Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byNode[s.nodeID] == s {
		delete(r.byNode, s.nodeID)
	}
}

// Get returns the node's live session.
func (r *Registry) Get(nodeID string) (*Session, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.byNode[nodeID]
	return s, ok
}

// Nodes lists the nodes that have a live session, in order.
func (r *Registry) Nodes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.byNode))
	for id := range r.byNode {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Ping asks the node's agent to answer over its session and returns how
// long the answer took. A node without a live session is an ENOTFOUND.
func (r *Registry) Ping(ctx context.Context, nodeID string) (time.Duration, error) {
	s, ok := r.Get(nodeID)
	if !ok {
		return 0, idlegrid.Errorf(idlegrid.ENOTFOUND, "node %s has no session open", nodeID)
	}
	d, err := s.Ping(ctx)
	if err != nil {
		return 0, idlegrid.Errorf(idlegrid.EUNAVAILABLE, "%v", err)
	}
	return d, nil
}

// Close refuses new sessions, closes the live ones and returns when every
// Serve has returned. It may be called more than once.
func (r *Registry) Close() error {
	r.mu.Lock()
	r.closed = true
	live := make([]*Session, 0, len(r.byNode))
	for _, s := range r.byNode {
		live = append(live, s)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range live {
		wg.Go(func() { s.Close() }) // each may wait out a close handshake
	}
	wg.Wait()
	r.serving.Wait()
	return nil
}
