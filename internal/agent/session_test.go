package agent_test

import (
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/session"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
)

// The public client can hold a session for the agent.
var _ agent.SessionServer = (*client.AgentClient)(nil)

// cuttable remembers the server's connections so that a test can sever them.
type cuttable struct {
	net.Listener
	mu  sync.Mutex
	all []net.Conn
}

func (l *cuttable) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.all = append(l.all, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *cuttable) cutAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.all {
		c.Close()
	}
	l.all = nil
}

// realServer is the coordinator on SQLite behind a real listener that
// offers sessions.
type realServer struct {
	URL      string
	Registry *session.Registry
	Conns    *cuttable
	Admin    *client.Client
}

func mustRealServer(tb testing.TB) *realServer {
	tb.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, sqlstoretest.Path(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	srv, err := server.Open(server.Config{Store: store, SchedulePeriod: 50 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	log := slog.New(slog.NewTextHandler(testOutput(tb), &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg := session.NewRegistry(session.Config{Logger: log})
	ts := httptest.NewUnstartedServer(httpapi.New(srv, httpapi.Options{Logger: log, Sessions: reg}))
	conns := &cuttable{Listener: ts.Listener}
	ts.Listener = conns
	ts.Start()
	tb.Cleanup(ts.Close)
	tb.Cleanup(func() { reg.Close() })
	_, _, secret, err := srv.Bootstrap(ctx, "root", idlegrid.RoleAdmin)
	if err != nil {
		tb.Fatal(err)
	}
	return &realServer{URL: ts.URL, Registry: reg, Conns: conns, Admin: client.New(ts.URL, secret)}
}

// pollUntil polls cond for at most 20 s of real time: this test runs over
// real sockets, which testing/synctest cannot fake.
func pollUntil(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAgent_session runs the agent against the real server: it holds a
// session, answers the server's ping over it, runs leases, and carries on
// when the connection is cut.
func TestAgent_session(t *testing.T) {
	ctx := context.Background()
	s := mustRealServer(t)
	_, _, providerKey, err := s.Admin.CreateAccount(ctx, "prov", idlegrid.RoleProvider)
	if err != nil {
		t.Fatal(err)
	}
	renterAcct, _, renterKey, err := s.Admin.CreateAccount(ctx, "ren", idlegrid.RoleRenter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admin.TopUp(ctx, renterAcct.ID, 100*idlegrid.MicrosPerUnit, "t"); err != nil {
		t.Fatal(err)
	}
	renter := client.New(s.URL, renterKey)
	_, token, err := client.New(s.URL, providerKey).CreateJoinToken(ctx, "rig", 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(t)
	cfg.Server, cfg.JoinToken = s.URL, token
	key, err := nodekey.LoadOrCreate(cfg.KeyPath())
	if err != nil {
		t.Fatal(err)
	}
	rt := &rtfake.Runtime{Speed: 600}
	defer rt.Close()
	r := startAgent(t, cfg, client.NewAgent(s.URL, key), rt)

	var nodeID string
	var first *session.Session
	pollUntil(t, "the agent's session", func() bool {
		nodeID = r.a.NodeID()
		var ok bool
		first, ok = s.Registry.Get(nodeID)
		return ok
	})
	if _, err := s.Registry.Ping(ctx, nodeID); err != nil {
		t.Errorf("the server's ping of the agent: %v", err)
	}
	runJob := func(what string) {
		t.Helper()
		j, err := renter.SubmitJob(ctx, job(60, nil))
		if err != nil {
			t.Fatalf("submit %s: %v", what, err)
		}
		pollUntil(t, what+" to succeed", func() bool {
			got, err := renter.FindJob(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State.Terminal() && got.State != idlegrid.JobSucceeded {
				t.Fatalf("%s ended %s: %s", what, got.State, got.Reason)
			}
			return got.State == idlegrid.JobSucceeded
		})
	}
	runJob("the first job")

	s.Conns.cutAll()
	pollUntil(t, "a new session", func() bool {
		now, ok := s.Registry.Get(nodeID)
		return ok && now != first
	})
	runJob("a job after the reconnection")

	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	pollUntil(t, "the session to end with the agent", func() bool { _, ok := s.Registry.Get(nodeID); return !ok })
}
