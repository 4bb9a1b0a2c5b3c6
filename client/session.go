package client

import (
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
)

// sessionRoute sends an AgentClient's requests over its live session, or
// over plain HTTP when there is none. A join, which no node signs yet,
// always goes over plain HTTP: a session carries only its node's calls.
type sessionRoute struct {
	plain   http.RoundTripper
	live    atomic.Pointer[session.Session]
	running atomic.Bool // RunSession is running
}

func (r *sessionRoute) RoundTrip(req *http.Request) (*http.Response, error) {
	if s := r.live.Load(); s != nil && !closed(s) && req.Header.Get(nodekey.HeaderNode) != "" {
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
	s := a.route.live.Load()
	return s != nil && !closed(s)
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
			lived := a.useSession(ctx, s, log)
			if ctx.Err() != nil {
				return nil
			}
			if lived >= sessionStable {
				b.Reset()
			}
			wait = b.Next()
			attrs := []any{"after", lived.Round(time.Second), "reconnect_in", wait.Round(time.Millisecond)}
			if err := s.Err(); err != nil {
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

// useSession routes the client's requests over s until s or ctx ends, and
// returns how long s lived.
func (a *AgentClient) useSession(ctx context.Context, s *session.Session, log *slog.Logger) time.Duration {
	a.route.live.Store(s)
	log.Info("session open; the agent's requests go over it", "server", a.t.base)
	select {
	case <-s.Closed():
	case <-ctx.Done():
	}
	a.route.live.CompareAndSwap(s, nil)
	s.Close()
	return time.Since(s.Opened())
}
