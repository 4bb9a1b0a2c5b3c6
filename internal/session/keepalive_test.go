package session

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// cuttable is a connection that can go silent, as one does when a cable is
// pulled or a NAT forgets it: after cut, writes vanish and reads wait forever.
type cuttable struct {
	net.Conn
	once   sync.Once
	cutCh  chan struct{}
	closed chan struct{}
	close  sync.Once
}

func newCuttable(c net.Conn) *cuttable {
	return &cuttable{Conn: c, cutCh: make(chan struct{}), closed: make(chan struct{})}
}

func (c *cuttable) cut() { c.once.Do(func() { close(c.cutCh) }) }

func (c *cuttable) Read(p []byte) (int, error) {
	select {
	case <-c.cutCh:
		<-c.closed
		return 0, io.EOF
	default:
	}
	return c.Conn.Read(p)
}

func (c *cuttable) Write(p []byte) (int, error) {
	select {
	case <-c.cutCh:
		return len(p), nil
	default:
	}
	return c.Conn.Write(p)
}

func (c *cuttable) Close() error {
	c.close.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// testLogger logs to the test's output until the test ends. yamux's
// keepalive goroutine may log once more after its session has closed, and
// the test's output must not be written after the test is done.
func testLogger(t *testing.T) *slog.Logger {
	w := &untilDone{w: t.Output()}
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type untilDone struct {
	mu   sync.Mutex
	w    io.Writer
	done bool
}

func (u *untilDone) Write(p []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done {
		return len(p), nil
	}
	return u.w.Write(p)
}

func (u *untilDone) stop() {
	u.mu.Lock()
	u.done = true
	u.mu.Unlock()
}

// mustPair is an agent's and a server's end of one session over a pipe
// whose server side can be cut.
func mustPair(t *testing.T, cfg Config) (agent, server *Session, line *cuttable) {
	t.Helper()
	a, b := net.Pipe()
	line = newCuttable(b)
	cfg.Logger = testLogger(t)
	agent, err := newSession(a, true, "node_1", agentHandler("node_1", nil), cfg)
	if err != nil {
		t.Fatal(err)
	}
	server, err = newSession(line, false, "node_1", http.NotFoundHandler(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close(); server.Close() })
	return agent, server, line
}

// fastBeat pings every 10ms, so a test sees many keepalives in little
// time; an answer may take a whole second, so a busy machine is no failure.
var fastBeat = Config{KeepAlive: 10 * time.Millisecond, KeepAliveTimeout: time.Second}

func TestSession_keepAliveDefaults(t *testing.T) {
	// A dead connection is found when a ping goes unanswered: at worst one
	// interval after the last answer plus the wait for the next one.
	c := Config{}.withDefaults()
	if worst := c.KeepAlive + c.KeepAliveTimeout; worst > 30*time.Second {
		t.Errorf("a dead connection may go unnoticed for %s, want at most 30s", worst)
	}
}

func TestSession_keepAlive(t *testing.T) {
	t.Run("an idle session stays up", func(t *testing.T) {
		agent, server, _ := mustPair(t, fastBeat)
		time.Sleep(50 * fastBeat.KeepAlive)
		select {
		case <-agent.Done():
			t.Fatalf("the agent's end closed an idle but healthy session: %v", agent.Err())
		case <-server.Done():
			t.Fatalf("the server's end closed an idle but healthy session: %v", server.Err())
		default:
		}
		if _, err := server.Ping(t.Context()); err != nil {
			t.Errorf("Ping after 50 idle keepalives: %v", err)
		}
		if agent.Err() != nil || server.Err() != nil {
			t.Errorf("Err of open sessions = %v, %v; want nil", agent.Err(), server.Err())
		}
	})
	t.Run("a silent connection is found dead by both ends", func(t *testing.T) {
		agent, server, line := mustPair(t, fastBeat)
		line.cut()
		noticed := 0
		for name, s := range map[string]*Session{"agent": agent, "server": server} {
			select {
			case <-s.Done():
			case <-time.After(time.Minute):
				t.Fatalf("the %s's end never noticed the dead connection", name)
			}
			err := s.Err()
			if err == nil {
				t.Fatalf("the %s's end ended by itself but Err is nil", name)
			}
			if strings.Contains(err.Error(), "keepalive") {
				noticed++
			}
		}
		// The end that notices first closes its side; the other may then
		// see the peer gone before its own keepalive fails.
		if noticed == 0 {
			t.Errorf("neither end blamed a failed keepalive")
		}
	})
	t.Run("Close after the end keeps its reason", func(t *testing.T) {
		// The agent's client closes a session that ended by itself, then
		// logs why it ended.
		agent, _, line := mustPair(t, fastBeat)
		line.cut()
		select {
		case <-agent.Closed():
		case <-time.After(time.Minute):
			t.Fatal("the agent's end never noticed the dead connection")
		}
		agent.Close()
		if err := agent.Err(); err == nil {
			t.Error("Err after Close of a session that had ended by itself = nil, want why it ended")
		}
	})
	t.Run("Close leaves no error", func(t *testing.T) {
		agent, _, _ := mustPair(t, fastBeat)
		agent.Close()
		if err := agent.Err(); err != nil {
			t.Errorf("Err after Close = %v, want nil", err)
		}
	})
}
