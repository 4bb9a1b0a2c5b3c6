package session_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/metricstest"
	"github.com/idlegrid/idlegrid/internal/session"
)

// testNodeHeader stands in for the node signature that internal/httpapi
// checks: here the server believes whatever node the header names.
const testNodeHeader = "X-Test-Node"

// conns remembers the server's TCP connections so that a test can cut them.
type conns struct {
	net.Listener
	mu  sync.Mutex
	all []net.Conn
}

func (l *conns) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.all = append(l.all, c)
		l.mu.Unlock()
	}
	return c, err
}

// cutAll closes every connection the server accepted, as a crash of the
// network between agent and server would.
func (l *conns) cutAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.all {
		c.Close()
	}
	l.all = nil
}

// fixture is a server that offers sessions at session.Path and answers
// the agents' requests on them with "hello <node>".
type fixture struct {
	URL      string
	Registry *session.Registry
	Conns    *conns
	Client   *http.Client // for dials, so that its idle connections can be closed
}

func testLogger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tb.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func mustServe(tb testing.TB) *fixture {
	tb.Helper()
	reg := session.NewRegistry(session.Config{Logger: testLogger(tb)})
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+session.Path, func(w http.ResponseWriter, r *http.Request) {
		node := r.Header.Get(testNodeHeader)
		if node == "" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "hello "+node+" at "+r.URL.Path)
		})
		if err := reg.Serve(w, r, node, inner); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	ts := httptest.NewUnstartedServer(mux)
	c := &conns{Listener: ts.Listener}
	ts.Listener = c
	ts.Start()
	f := &fixture{URL: ts.URL, Registry: reg, Conns: c, Client: &http.Client{Transport: &http.Transport{}}}
	tb.Cleanup(func() {
		reg.Close()
		ts.Close()
		f.Client.CloseIdleConnections()
	})
	return f
}

func (f *fixture) dial(ctx context.Context, tb testing.TB, node string, h http.Handler) (*session.Session, error) {
	tb.Helper()
	return session.Dial(ctx, f.URL, session.DialOptions{
		NodeID: node, Header: http.Header{testNodeHeader: {node}}, HTTPClient: f.Client, Handler: h,
		Config: session.Config{Logger: testLogger(tb)},
	})
}

func (f *fixture) mustDial(tb testing.TB, node string, h http.Handler) *session.Session {
	tb.Helper()
	s, err := f.dial(context.Background(), tb, node, h)
	if err != nil {
		tb.Fatalf("Dial: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	f.waitFor(tb, node+"'s session in the registry", func() bool { _, ok := f.Registry.Get(node); return ok })
	return s
}

// waitFor polls cond, for at most 10 s of real time: these tests run over
// real sockets, which testing/synctest cannot fake.
func (f *fixture) waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	waitFor(tb, what, cond)
}

func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mustGet sends GET path over s and returns the answer's body.
func mustGet(tb testing.TB, s *session.Session, path string) (int, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://peer"+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := s.RoundTrip(req)
	if err != nil {
		tb.Fatalf("GET %s over the session: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func closed(s *session.Session) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

func TestRegistry_Serve(t *testing.T) {
	f := mustServe(t)
	agentSide := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "agent here, you asked for "+r.URL.Path)
	})
	a := f.mustDial(t, "node_a", agentSide)
	f.mustDial(t, "node_b", nil)

	t.Run("the agent's requests reach the server's handler", func(t *testing.T) {
		var wg sync.WaitGroup
		for range 20 { // concurrently, each on a stream of its own
			wg.Go(func() {
				status, body := mustGet(t, a, "/v1/agent/heartbeat")
				if want := "hello node_a at /v1/agent/heartbeat"; status != http.StatusOK || body != want {
					t.Errorf("got %d %q, want 200 %q", status, body, want)
				}
			})
		}
		wg.Wait()
	})
	t.Run("the server reaches the agent", func(t *testing.T) {
		s, ok := f.Registry.Get("node_a")
		if !ok {
			t.Fatal("Get(node_a): no session")
		}
		status, body := mustGet(t, s, "/agent/v1/notice")
		if want := "agent here, you asked for /agent/v1/notice"; status != http.StatusOK || body != want {
			t.Errorf("got %d %q, want 200 %q", status, body, want)
		}
		if status, _ := mustGet(t, f.mustGetSession(t, "node_b"), "/agent/v1/notice"); status != http.StatusNotFound {
			t.Errorf("an agent without a handler answered %d, want 404", status)
		}
	})
	t.Run("ping", func(t *testing.T) {
		for _, node := range []string{"node_a", "node_b"} {
			if _, err := f.Registry.Ping(context.Background(), node); err != nil {
				t.Errorf("Ping(%s): %v", node, err)
			}
		}
		_, err := f.Registry.Ping(context.Background(), "node_x")
		if got := idlegrid.ErrorCode(err); got != idlegrid.ENOTFOUND {
			t.Errorf("Ping of a node without a session: code %q (%v), want %q", got, err, idlegrid.ENOTFOUND)
		}
	})
	t.Run("nodes", func(t *testing.T) {
		if got, want := strings.Join(f.Registry.Nodes(), ","), "node_a,node_b"; got != want {
			t.Errorf("Nodes() = %s, want %s", got, want)
		}
	})
}

func (f *fixture) mustGetSession(tb testing.TB, node string) *session.Session {
	tb.Helper()
	s, ok := f.Registry.Get(node)
	if !ok {
		tb.Fatalf("no session for %s", node)
	}
	return s
}

func TestRegistry_replace(t *testing.T) {
	f := mustServe(t)
	f.mustDial(t, "node_a", nil)
	first := f.mustGetSession(t, "node_a")
	f.mustDial(t, "node_a", nil) // the agent reconnected
	f.waitFor(t, "the first session to close", func() bool { return closed(first) })
	if s := f.mustGetSession(t, "node_a"); s == first {
		t.Error("the registry kept the replaced session")
	}
	if _, err := f.Registry.Ping(context.Background(), "node_a"); err != nil {
		t.Errorf("Ping over the new session: %v", err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(f.Registry.Collectors()...)
	for name, want := range map[string]float64{
		"idlegrid_agent_sessions": 1, "idlegrid_agent_sessions_opened_total": 2, "idlegrid_agent_sessions_replaced_total": 1,
	} {
		if got := metricstest.Value(t, reg, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

func TestSession_connectionCut(t *testing.T) {
	f := mustServe(t)
	a := f.mustDial(t, "node_a", nil)
	s := f.mustGetSession(t, "node_a")
	f.Conns.cutAll()
	f.waitFor(t, "the agent's end to close", func() bool { return closed(a) })
	f.waitFor(t, "the server's end to close", func() bool { return closed(s) })
	f.waitFor(t, "the registry to forget the node", func() bool { _, ok := f.Registry.Get("node_a"); return !ok })
	if _, err := mustRoundTrip(a); err == nil {
		t.Error("a request over a closed session succeeded")
	}
}

func mustRoundTrip(s *session.Session) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://peer/", nil)
	resp, err := s.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

func TestDial_refused(t *testing.T) {
	f := mustServe(t)
	plain := httptest.NewServer(http.NotFoundHandler()) // a server from before sessions
	t.Cleanup(plain.Close)

	_, err := session.Dial(context.Background(), plain.URL, session.DialOptions{NodeID: "node_a", HTTPClient: f.Client})
	if !errors.Is(err, session.ErrNotOffered) {
		t.Errorf("Dial to a server without sessions: %v, want ErrNotOffered", err)
	}
	_, err = session.Dial(context.Background(), f.URL, session.DialOptions{NodeID: "node_a", HTTPClient: f.Client})
	var refused *session.RefusedError
	if !errors.As(err, &refused) || refused.StatusCode != http.StatusUnauthorized || errors.Is(err, session.ErrNotOffered) {
		t.Errorf("Dial without credentials: %v, want a RefusedError with 401 that is not ErrNotOffered", err)
	}
	if _, err := session.Dial(context.Background(), f.URL, session.DialOptions{}); err == nil {
		t.Error("Dial without a node ID succeeded")
	}

	req, _ := http.NewRequest(http.MethodGet, f.URL+session.Path, nil)
	req.Header.Set(testNodeHeader, "node_a")
	resp, err := f.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "WebSocket upgrade") {
		t.Errorf("a plain GET of %s: %d %q, want Serve's error saying it must be an upgrade", session.Path, resp.StatusCode, body)
	}
	// An agent's upgrade arrives as a plain GET when a proxy drops its
	// Upgrade header: the agent logs this answer, which must say so.
	if !strings.Contains(string(body), "proxy") {
		t.Errorf("a plain GET of %s: %q, want the error to point at a proxy that drops the Upgrade header", session.Path, body)
	}
}

func TestRegistry_Close(t *testing.T) {
	before := runtime.NumGoroutine()
	// The subtest's cleanups close the HTTP server and the idle connections
	// of the dialling client before the goroutines are counted.
	t.Run("sessions", func(t *testing.T) {
		f := mustServe(t)
		var agents []*session.Session
		for _, node := range []string{"node_a", "node_b", "node_c"} {
			agents = append(agents, f.mustDial(t, node, nil))
		}
		// A request in flight when the registry closes ends too.
		inFlight := make(chan error, 1)
		go func() {
			_, err := mustRoundTrip(agents[0])
			inFlight <- err
		}()
		if err := f.Registry.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if got := f.Registry.Nodes(); len(got) != 0 {
			t.Errorf("after Close the registry still has %v", got)
		}
		for _, a := range agents {
			f.waitFor(t, a.NodeID()+"'s end to close", func() bool { return closed(a) })
		}
		<-inFlight
		if _, err := f.dial(context.Background(), t, "node_d", nil); err == nil {
			t.Error("a closed registry accepted a session")
		}
		f.Registry.Close() // twice is fine
	})
	waitFor(t, "every goroutine to end", func() bool { return runtime.NumGoroutine() <= before })
}
