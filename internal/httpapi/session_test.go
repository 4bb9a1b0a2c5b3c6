package httpapi_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/session"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
)

// sessionFixture is the real coordinator on SQLite behind a real listener,
// offering sessions, with three switches: plainOff refuses the agent API
// over plain HTTP (so that what still works went over a session), cutAll
// severs every TCP connection, sessions included, and silenceAll makes
// every connection open now go quiet without closing.
type sessionFixture struct {
	*fixture
	Registry *session.Registry
	plainOff atomic.Bool
	conns    *trackedListener
}

type trackedListener struct {
	net.Listener
	mu  sync.Mutex
	all []*quietConn
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	q := &quietConn{Conn: c, quiet: make(chan struct{}), closed: make(chan struct{})}
	l.mu.Lock()
	l.all = append(l.all, q)
	l.mu.Unlock()
	return q, nil
}

func (f *sessionFixture) cutAll() {
	f.conns.mu.Lock()
	defer f.conns.mu.Unlock()
	for _, c := range f.conns.all {
		c.Close()
	}
	f.conns.all = nil
}

// silenceAll makes the connections open now take and send nothing more,
// without closing them, as when a NAT on the way forgets them; new ones
// work.
func (f *sessionFixture) silenceAll() {
	f.conns.mu.Lock()
	defer f.conns.mu.Unlock()
	for _, c := range f.conns.all {
		c.silence()
	}
}

// quietConn is a server-side connection that silence makes drop what it
// reads and writes until it is closed.
type quietConn struct {
	net.Conn
	quietOnce, closeOnce sync.Once
	quiet, closed        chan struct{}
}

func (c *quietConn) silence() { c.quietOnce.Do(func() { close(c.quiet) }) }

func (c *quietConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	select {
	case <-c.quiet: // what came in after is lost, and so is the rest
		<-c.closed
		return 0, net.ErrClosed
	default:
		return n, err
	}
}

func (c *quietConn) Write(p []byte) (int, error) {
	select {
	case <-c.quiet:
		return len(p), nil
	default:
		return c.Conn.Write(p)
	}
}

func (c *quietConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func mustOpenSessions(tb testing.TB, offer bool) *sessionFixture {
	tb.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, sqlstoretest.Path(tb))
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { store.Close() })
	clock := &fakeClock{now: idlegrid.SystemClock{}.Now()}
	srv, err := server.Open(server.Config{Store: store, Clock: clock, StartTimeout: time.Hour})
	if err != nil {
		tb.Fatalf("open server: %v", err)
	}
	tb.Cleanup(func() { srv.Close() })

	log := slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := &sessionFixture{}
	opts := httpapi.Options{Logger: log}
	if offer {
		f.Registry = session.NewRegistry(session.Config{Logger: log})
		opts.Sessions = f.Registry
	}
	api := httpapi.New(srv, opts)
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Requests on a session reach the API without passing here.
		if f.plainOff.Load() && strings.HasPrefix(r.URL.Path, "/v1/agent/") && r.URL.Path != session.Path {
			http.Error(w, "the agent API over plain HTTP is off in this test", http.StatusServiceUnavailable)
			return
		}
		api.ServeHTTP(w, r)
	})
	ts := httptest.NewUnstartedServer(outer)
	f.conns = &trackedListener{Listener: ts.Listener}
	ts.Listener = f.conns
	ts.Start()
	tb.Cleanup(ts.Close)
	tb.Cleanup(f.cutAll) // before the server waits for them: a silenced one never ends by itself
	if f.Registry != nil {
		tb.Cleanup(func() { f.Registry.Close() }) // before the HTTP server closes
	}

	_, _, secret, err := srv.Bootstrap(ctx, "root", idlegrid.RoleAdmin)
	if err != nil {
		tb.Fatalf("bootstrap admin: %v", err)
	}
	f.fixture = &fixture{URL: ts.URL, Server: srv, Store: store, Clock: clock, AdminSecret: secret, Admin: client.New(ts.URL, secret)}
	return f
}

// runSession runs the agent client's session until the test ends.
func runSession(tb testing.TB, agent *client.AgentClient) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() { done <- agent.RunSession(ctx, nil, log) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("RunSession: %v", err)
		}
		if agent.OverSession() {
			tb.Error("after RunSession returned, the client still sends over a session")
		}
	})
}

// waitUntil polls cond for at most 10 s of real time: these tests run over
// real sockets, which testing/synctest cannot fake.
func waitUntil(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *sessionFixture) mustSession(tb testing.TB, agent *client.AgentClient, nodeID string, not *session.Session) *session.Session {
	tb.Helper()
	var s *session.Session
	waitUntil(tb, "the agent's session", func() bool {
		var ok bool
		s, ok = f.Registry.Get(nodeID)
		return ok && s != not && agent.OverSession()
	})
	return s
}

// TestSession_agent runs an agent's whole conversation over a session, with
// the agent API over plain HTTP refused, through a cut connection.
func TestSession_agent(t *testing.T) {
	f := mustOpenSessions(t, true)
	ctx := context.Background()
	renter, renterAcct, _ := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	provider, _, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	if _, err := f.Admin.TopUp(ctx, renterAcct.ID, 100*idlegrid.MicrosPerUnit, "t"); err != nil {
		t.Fatal(err)
	}
	agent, _, nodeID := f.mustNode(t, provider, "rig1") // the join goes over plain HTTP
	f.plainOff.Store(true)
	runSession(t, agent)
	first := f.mustSession(t, agent, nodeID, nil)

	if _, err := agent.Heartbeat(ctx, idlegrid.HeartbeatRequest{}); err != nil {
		t.Fatalf("heartbeat over the session: %v", err)
	}
	if _, err := f.Registry.Ping(ctx, nodeID); err != nil {
		t.Errorf("the server's ping of the agent: %v", err)
	}
	job, err := renter.SubmitJob(ctx, testSpec())
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	lease := mustStartCommand(t, agent, job.ID).Lease // the long poll, over the session
	if err := agent.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
		t.Fatalf("report running: %v", err)
	}
	if err := agent.AppendLogs(ctx, lease.ID, idlegrid.LogBatch{Lines: []idlegrid.LogLine{
		{Seq: 1, At: f.Clock.Now(), Stream: "stdout", Text: "epoch 1"},
	}}); err != nil {
		t.Fatalf("append logs: %v", err)
	}

	// The connection dies; the agent dials again, and carries on.
	f.Clock.Advance(5 * time.Second)
	f.cutAll()
	f.mustSession(t, agent, nodeID, first)
	if _, err := agent.Heartbeat(ctx, idlegrid.HeartbeatRequest{Leases: []idlegrid.LeaseProgress{{LeaseID: lease.ID, Progress: 0.5}}}); err != nil {
		t.Fatalf("heartbeat over the new session: %v", err)
	}
	f.Clock.Advance(25 * time.Second) // under the 3 missed heartbeats that lose a node
	if err := f.Server.Reap(ctx); err != nil {
		t.Fatal(err)
	}
	if l, _, err := renter.FindLease(ctx, lease.ID); err != nil || l.State != idlegrid.LeaseRunning || l.Progress != 0.5 {
		t.Fatalf("after the reconnection lease = %+v, %v; want running at 0.5", l, err)
	}
	exit := 0
	if err := agent.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &exit, Progress: 1}); err != nil {
		t.Fatalf("report succeeded: %v", err)
	}
	if got, err := renter.FindJob(ctx, job.ID); err != nil || got.State != idlegrid.JobSucceeded {
		t.Errorf("job = %+v, %v; want succeeded", got, err)
	}
	lines, err := renter.LeaseLogs(ctx, lease.ID, 0, 0)
	if err != nil || len(lines) != 1 || lines[0].Text != "epoch 1" {
		t.Errorf("logs = %+v, %v; want the line sent over the session", lines, err)
	}

	// Without the session, and with plain HTTP off, nothing gets through:
	// the calls above did go over the session.
	if err := f.Registry.Close(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the client to leave the closed session", func() bool { return !agent.OverSession() })
	if _, err := agent.Heartbeat(ctx, idlegrid.HeartbeatRequest{}); idlegrid.ErrorCode(err) != idlegrid.EUNAVAILABLE {
		t.Errorf("heartbeat with neither session nor plain HTTP: %v, want unavailable", err)
	}
}

// TestSession_silentlyDead checks that a heartbeat gets through when the
// connection it goes over dies without a word, as when a NAT forgets it.
// A session's keepalive would find out only after up to 25 s, and the
// kernel later still for a kept-alive plain HTTP connection: over the 30 s
// of silence that lose a node once the heartbeat interval is added. The
// heartbeat gives the connection 5 s, then goes again on a new one; an
// agent whose session it was dials a new session.
func TestSession_silentlyDead(t *testing.T) {
	for _, overSession := range []bool{true, false} {
		t.Run(map[bool]string{true: "session", false: "plain HTTP"}[overSession], func(t *testing.T) {
			f := mustOpenSessions(t, overSession)
			provider, _, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
			agent, _, nodeID := f.mustNode(t, provider, "rig1") // leaves a kept-alive connection
			var first *session.Session
			if overSession {
				runSession(t, agent)
				first = f.mustSession(t, agent, nodeID, nil)
			}
			f.silenceAll()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second) // under what finds the connection dead
			defer cancel()
			if _, err := agent.Heartbeat(ctx, idlegrid.HeartbeatRequest{}); err != nil {
				t.Fatalf("heartbeat over a silently dead connection: %v", err)
			}
			if overSession {
				f.mustSession(t, agent, nodeID, first)
			}
			if _, err := agent.Heartbeat(ctx, idlegrid.HeartbeatRequest{}); err != nil {
				t.Fatalf("the next heartbeat: %v", err)
			}
		})
	}
}

// TestSession_signedByAnother checks that a session carries only its own
// node's agent API, whoever signs.
func TestSession_signedByAnother(t *testing.T) {
	f := mustOpenSessions(t, true)
	provider, _, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	_, keyA, nodeA := f.mustNode(t, provider, "rigA")
	_, keyB, nodeB := f.mustNode(t, provider, "rigB")
	now := time.Now()

	open := signed{method: "GET", path: session.Path, key: keyA, nodeID: nodeA, at: now, protocol: "1"}
	s, err := session.Dial(context.Background(), f.URL, session.DialOptions{NodeID: nodeA, Header: open.request(t, f.URL).Header})
	if err != nil {
		t.Fatalf("Dial as node A: %v", err)
	}
	defer s.Close()

	beat := func(key, nodeID string) signed {
		k := keyA
		if key == "B" {
			k = keyB
		}
		return signed{method: "POST", path: "/v1/agent/heartbeat", body: "{}", key: k, nodeID: nodeID, at: now, protocol: "1"}
	}
	tests := []struct {
		name       string
		req        signed
		wantStatus int
		wantText   string
	}{
		{"node A, signed by A", beat("A", nodeA), 200, ""},
		{"node B, signed by B", beat("B", nodeB), 403, "belongs to node " + nodeA},
		{"node A, signed by B", beat("B", nodeA), 401, "bad node signature"},
		{"an API key's endpoint", signed{method: "GET", path: "/v1/me", key: keyA, nodeID: nodeA, at: now, protocol: "1"}, 403, "agent API"},
		{"a session in the session", open, 403, "agent API"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.RoundTrip(tt.req.request(t, "http://server"))
			if err != nil {
				t.Fatalf("over the session: %v", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			got := answer{Status: resp.StatusCode, Body: body}
			if got.Status != tt.wantStatus {
				t.Fatalf("status = %d %s, want %d", got.Status, got.Body, tt.wantStatus)
			}
			if tt.wantText != "" && !strings.Contains(got.Err(t).Message, tt.wantText) {
				t.Errorf("error = %s, want a message with %q", got.Body, tt.wantText)
			}
		})
	}

	t.Run("opening a session needs the node's signature", func(t *testing.T) {
		forged := signed{method: "GET", path: session.Path, key: keyB, nodeID: nodeA, at: now, protocol: "1"}
		_, err := session.Dial(context.Background(), f.URL, session.DialOptions{NodeID: nodeA, Header: forged.request(t, f.URL).Header})
		var refused *session.RefusedError
		if !errors.As(err, &refused) || refused.StatusCode != http.StatusUnauthorized {
			t.Errorf("Dial with B's signature for node A: %v, want refused with 401", err)
		}
	})
	t.Run("a plain GET is not an upgrade", func(t *testing.T) {
		plain := open
		plain.at = now.Add(time.Millisecond) // open was sent once already: again, it is a replay
		got := mustDo(t, plain.request(t, f.URL))
		if got.Status != http.StatusBadRequest || !strings.Contains(got.Err(t).Message, "WebSocket") {
			t.Errorf("got %d %s, want 400 saying it must be a WebSocket upgrade", got.Status, got.Body)
		}
	})
}

// TestSession_notOffered checks that an agent whose server offers no
// sessions goes on over plain HTTP.
func TestSession_notOffered(t *testing.T) {
	f := mustOpenSessions(t, false)
	provider, _, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	agent, key, nodeID := f.mustNode(t, provider, "rig1")

	open := signed{method: "GET", path: session.Path, key: key, nodeID: nodeID, at: time.Now(), protocol: "1"}
	_, err := session.Dial(context.Background(), f.URL, session.DialOptions{NodeID: nodeID, Header: open.request(t, f.URL).Header})
	if !errors.Is(err, session.ErrNotOffered) {
		t.Fatalf("Dial: %v, want ErrNotOffered", err)
	}
	runSession(t, agent)
	for range 3 {
		if _, err := agent.Heartbeat(context.Background(), idlegrid.HeartbeatRequest{}); err != nil {
			t.Fatalf("heartbeat over plain HTTP: %v", err)
		}
	}
	if agent.OverSession() {
		t.Error("the client says it uses a session the server does not offer")
	}
}
