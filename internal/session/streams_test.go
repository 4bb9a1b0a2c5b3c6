package session

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// slowClose is a connection whose Close waits until release, as a
// WebSocket's close handshake waits for the peer's answer.
type slowClose struct {
	net.Conn
	release chan struct{}
}

func (c *slowClose) Close() error {
	<-c.release
	return c.Conn.Close()
}

// TestLiveStreams_expireReads closes a session whose connection is slow to
// close and wants a reader blocked on one of its streams back at once,
// not spinning until the connection has closed.
func TestLiveStreams_expireReads(t *testing.T) {
	near, far := net.Pipe()
	conn := &slowClose{Conn: near, release: make(chan struct{})}
	live := &liveStreams{}
	cfg := yamux.DefaultConfig()
	cfg.EnableKeepAlive = false
	cfg.LogOutput = io.Discard
	server, err := yamux.Server(&joinFrames{Conn: conn, beforeClose: live.expireReads}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := yamux.Client(far, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	out, err := client.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write([]byte("x")); err != nil { // the peer learns of the stream with its first frame
		t.Fatal(err)
	}
	ln := streamListener{server, live, &peerStreams{most: 8, refused: new(atomic.Int64)}}
	in, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		buf := make([]byte, 8)
		for { // the "x", then a wait for more
			if _, err := in.Read(buf); err != nil {
				read <- err
				return
			}
		}
	}()
	closed := make(chan struct{})
	go func() { server.Close(); close(closed) }() // blocks in the connection's Close until released
	defer func() { close(conn.release); <-closed }()
	select {
	case err := <-read:
		t.Logf("the reader returned %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("a reader of a closing session's stream did not return while the connection was closing")
	}
}

// TestSession_maxPeerStreams has an agent open more streams than the
// server's end lets it hold open: the one past the limit is closed as it
// opens and its request fails, counted; those within it are served.
func TestSession_maxPeerStreams(t *testing.T) {
	near, far := net.Pipe()
	arrived, release := make(chan struct{}, 8), make(chan struct{})
	blocking := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		io.WriteString(w, "done")
	})
	refused := new(atomic.Int64)
	server, err := newSession(near, false, "node_a", blocking, Config{MaxPeerStreams: 2, Refused: refused})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	agentEnd, err := newSession(far, true, "node_a", http.NotFoundHandler(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer agentEnd.Close()
	post := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a stream served past the limit would wait for release
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://server/v1/agent/heartbeat", strings.NewReader("{}"))
		resp, err := agentEnd.RoundTrip(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return err
	}
	results := make(chan error, 2)
	for range 2 {
		go func() { results <- post() }()
		<-arrived // held open in the handler
	}
	if err := post(); err == nil || errors.Is(err, context.DeadlineExceeded) || len(arrived) > 0 {
		t.Fatalf("a third stream while two are held open: %v, %d more served; want it refused as it opened", err, len(arrived))
	}
	if n := refused.Load(); n < 1 {
		t.Errorf("refused = %d, want the third stream counted", n)
	}
	close(release)
	for range 2 {
		if err := <-results; err != nil {
			t.Errorf("a request within the limit: %v", err)
		}
	}
	if err := post(); err != nil { // on a stream the first two left idle
		t.Errorf("a request after the others ended: %v", err)
	}
}

// TestPeerStreams_ends: the server's end bounds an agent's streams by
// default; the agent's end does not bound the server's, which opens one
// for each inference request in flight.
func TestPeerStreams_ends(t *testing.T) {
	if got := NewRegistry(Config{}).cfg.MaxPeerStreams; got != DefaultMaxPeerStreams {
		t.Errorf("the registry's bound = %d, want %d", got, DefaultMaxPeerStreams)
	}
	near, far := net.Pipe()
	agentEnd, err := newSession(far, true, "node_a", http.NotFoundHandler(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer agentEnd.Close()
	defer near.Close()
	for i := range 5 * DefaultMaxPeerStreams {
		if !agentEnd.peer.take() {
			t.Fatalf("the agent's end refused stream %d, want no bound", i+1)
		}
	}
}

// TestSession_closeWaitsForHandlers closes a session while a handler of
// the peer's request ignores its cancelled context: Close gives up on a
// graceful shutdown after shutdownWait, says so, and still returns only
// once the handler has returned.
func TestSession_closeWaitsForHandlers(t *testing.T) {
	near, far := net.Pipe()
	arrived, release := make(chan struct{}), make(chan struct{})
	var ended atomic.Bool
	stubborn := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(arrived)
		<-release // not r.Context()
		ended.Store(true)
	})
	warned := make(chan struct{}, 1)
	log := slog.New(warnSignal(warned))
	server, err := newSession(near, false, "node_a", stubborn, Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	agentEnd, err := newSession(far, true, "node_a", http.NotFoundHandler(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer agentEnd.Close()
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://server/v1/agent/commands", nil)
		if resp, err := agentEnd.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-arrived
	closed := make(chan bool, 1) // whether the handler had returned when Close did
	go func() {
		server.Close()
		closed <- ended.Load()
	}()
	select {
	case <-warned: // Close gave up waiting gracefully; now the handler may end
		close(release)
	case handlerDone := <-closed:
		close(release)
		t.Fatalf("Close returned while a handler of the peer's request still ran (handler returned: %v)", handlerDone)
	case <-time.After(shutdownWait + 30*time.Second):
		close(release)
		t.Fatal("Close neither returned nor warned")
	}
	select {
	case handlerDone := <-closed:
		if !handlerDone {
			t.Error("Close returned before the handler did")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return after the handler did")
	}
}

// warnSignal is a slog handler that signals each record at warning level
// or above on its channel, when there is room.
type warnSignal chan struct{}

func (w warnSignal) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w warnSignal) Handle(context.Context, slog.Record) error {
	select {
	case w <- struct{}{}:
	default:
	}
	return nil
}
func (w warnSignal) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnSignal) WithGroup(string) slog.Handler      { return w }
