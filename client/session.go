package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/idlegrid/idlegrid/internal/backoff"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/session"
)

// How RunSession reconnects (with backoff's default delays between tries).
const (
	// sessionStable is how long a session must have lived for the next
	// reconnection's backoff to start from the beginning again, so that a
	// server that accepts sessions and drops them at once is not hammered.
	sessionStable = time.Minute
	// notOfferedRetry is how often a server that offered no session is
	// asked again, in case it has been upgraded.
	notOfferedRetry = 10 * time.Minute
	// heartbeatWait bounds a heartbeat's first try (Heartbeat).
	heartbeatWait = 5 * time.Second
	// answersWait bounds how long a stopping agent's session waits for
	// the answers its handlers wrote to reach the server: the last bytes
	// of each, its handler having returned.
	answersWait = 2 * time.Second
)

// sessionRoute sends an AgentClient's requests over its live session, or
// over plain HTTP when there is none. A join, which no node signs yet,
// always goes over plain HTTP: a session carries only its node's calls.
type sessionRoute struct {
	plain   http.RoundTripper
	live    atomic.Pointer[session.Session]
	running atomic.Bool // RunSession is running
	// dead carries a session a request found dead before its keepalive
	// did (abandon), for RunSession to close and dial again.
	dead chan deadSession
}

// deadSession is a session abandoned, and why.
type deadSession struct {
	s   *session.Session
	why error
}

// newSessionRoute returns a route that sends over plain until RunSession
// has a session.
func newSessionRoute(plain http.RoundTripper) *sessionRoute {
	return &sessionRoute{plain: plain, dead: make(chan deadSession, 1)}
}

// current returns the session requests take now, or nil.
func (r *sessionRoute) current() *session.Session {
	if s := r.live.Load(); s != nil && !closed(s) {
		return s
	}
	return nil
}

// unstick makes the next request take a new connection after one on s,
// the session requests took then (nil: plain HTTP), got no answer in time:
// it abandons s, and drops the idle kept-alive connections of plain HTTP,
// which whatever broke s likely broke too.
func (r *sessionRoute) unstick(s *session.Session, why error) {
	if s != nil {
		r.abandon(s, why)
	}
	if c, ok := r.plain.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// abandon stops sending requests over s, which answered nothing in time
// though it is not closed (a connection that died without a word: its
// keepalive finds out only later), and tells RunSession to close it and
// dial again. A session no longer the live one is left as it is.
func (r *sessionRoute) abandon(s *session.Session, why error) {
	if !r.live.CompareAndSwap(s, nil) {
		return
	}
	for {
		select {
		case r.dead <- deadSession{s, why}:
			return
		default:
			select { // an older one, already done with: drop it
			case <-r.dead:
			default:
			}
		}
	}
}

func (r *sessionRoute) RoundTrip(req *http.Request) (*http.Response, error) {
	if s := r.current(); s != nil && req.Header.Get(nodekey.HeaderNode) != "" {
		return s.RoundTrip(req)
	}
	return r.plain.RoundTrip(req)
}

func closed(s *session.Session) bool {
	select {
	case <-s.Closed():
		return true
	default:
		return false
	}
}

// OverSession reports whether the client's requests go over a session now.
func (a *AgentClient) OverSession() bool {
	return a.route.current() != nil
}

// RunSession keeps one outbound session to the server open until ctx is
// done, and while it is up sends every request of the client over it: the
// same signed requests, each on a stream of its own (see internal/session).
// h serves the requests the server sends the agent over the session, beside
// the ping, which the session answers itself; nil serves only the ping.
//
// When the session drops, requests go over plain HTTP again until it is
// back; RunSession dials again with jittered exponential backoff, up to
// 30 s apart. A server that does not offer sessions (404) is logged once and
// asked again every 10 minutes; requests meanwhile go over plain HTTP.
//
// The client must know its node ID (SetNodeID, or Join) first. RunSession
// returns nil once ctx is done and the session has closed; it may run only
// once at a time.
func (a *AgentClient) RunSession(ctx context.Context, h http.Handler, log *slog.Logger) error {
	if a.node() == "" {
		return errors.New("session: the agent has no node ID yet; join first")
	}
	if !a.route.running.CompareAndSwap(false, true) {
		return errors.New("session: RunSession is already running for this client")
	}
	defer a.route.running.Store(false)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var b backoff.Backoff
	toldNotOffered := false
	for {
		s, err := a.dialSession(ctx, h, log)
		var wait time.Duration
		switch {
		case ctx.Err() != nil:
			if s != nil {
				s.Close()
			}
			return nil
		case errors.Is(err, session.ErrNotOffered):
			if !toldNotOffered {
				log.Info("the server offers no session; the agent's requests go over plain HTTP", "server", a.t.base)
				toldNotOffered = true
			}
			wait = notOfferedRetry
		case err != nil:
			wait = b.Next()
			log.Warn("session: cannot connect; will retry", "in", wait.Round(time.Millisecond), "err", err)
		default:
			lived, why := a.useSession(ctx, s, log)
			if ctx.Err() != nil {
				return nil
			}
			if lived >= sessionStable {
				b.Reset()
			}
			wait = b.Next()
			attrs := []any{"after", lived.Round(time.Second), "reconnect_in", wait.Round(time.Millisecond)}
			if err := cmp.Or(why, s.Err()); err != nil {
				attrs = append(attrs, "err", err)
			}
			log.Warn("session lost; requests go over plain HTTP until it is back", attrs...)
		}
		if !backoff.Sleep(ctx, wait) {
			return nil
		}
	}
}

// dialSession opens a session, signed as the node.
func (a *AgentClient) dialSession(ctx context.Context, h http.Handler, log *slog.Logger) (*session.Session, error) {
	nodeID := a.node()
	u, err := url.Parse(a.t.base + session.Path)
	if err != nil {
		return nil, fmt.Errorf("bad server address %q: %w", a.t.base, err)
	}
	header := http.Header{"User-Agent": {"idlegrid-client/1"}}
	header.Set(nodekey.HeaderNode, nodeID)
	a.sign(header, http.MethodGet, u.RequestURI(), nil)
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	s, err := session.Dial(ctx, a.t.base, session.DialOptions{
		NodeID: nodeID, Header: header, Handler: h, Config: session.Config{Logger: log},
	})
	var refused *session.RefusedError
	if errors.As(err, &refused) && !errors.Is(err, session.ErrNotOffered) {
		// Say what the server said, in its own words (401: a bad clock or
		// an unknown node; 503: the server is shutting down).
		return nil, a.t.decodeError(&http.Response{StatusCode: refused.StatusCode, Status: refused.Status}, refused.Body)
	}
	return s, err
}

// useSession routes the client's requests over s until s or ctx ends, or
// a request abandons s, and returns how long s lived and, when abandoned,
// why.
func (a *AgentClient) useSession(ctx context.Context, s *session.Session, log *slog.Logger) (time.Duration, error) {
	a.route.live.Store(s)
	log.Info("session open; the agent's requests go over it", "server", a.t.base)
	var why error
	for waiting := true; waiting; {
		select {
		case <-s.Closed():
			waiting = false
		case <-ctx.Done():
			waiting = false
		case d := <-a.route.dead:
			if d.s == s { // else an older one's, done with
				why, waiting = d.why, false
			}
		}
	}
	a.route.live.CompareAndSwap(s, nil)
	if ctx.Err() != nil {
		// The agent is stopping, its handlers done: let the answers they
		// wrote reach the server before the session closes.
		wait, cancel := context.WithTimeout(context.Background(), answersWait)
		_ = s.WaitAnswered(wait)
		cancel()
	}
	s.Close()
	return time.Since(s.Opened()), why
}
