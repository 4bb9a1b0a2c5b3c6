package session

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
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

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// mustPair is an agent's and a server's end of one session over a pipe
// whose server side can be cut.
func mustPair(t *testing.T) (agent, server *Session, line *cuttable) {
	t.Helper()
	a, b := net.Pipe()
	line = newCuttable(b)
	cfg := Config{Logger: testLogger(t)}
	agent, err := newSession(a, true, "node_1", agentHandler("node_1", nil), cfg)
	if err != nil {
		t.Fatal(err)
	}
	server, err = newSession(line, false, "node_1", http.NotFoundHandler(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return agent, server, line
}

// bubble runs f under synctest. yamux keeps spare timers in a package-wide
// sync.Pool, and a timer may not cross a bubble's boundary, so the pool is
// emptied (two collections empty a sync.Pool) before and after the bubble.
// Tests that use bubble must not run in parallel with other yamux tests.
func bubble(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	runtime.GC()
	runtime.GC()
	synctest.Test(t, f)
	runtime.GC()
	runtime.GC()
}

func TestSession_keepAlive(t *testing.T) {
	t.Run("an idle session stays up", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			agent, server, _ := mustPair(t)
			time.Sleep(10 * time.Minute)
			select {
			case <-agent.Done():
				t.Fatal("the agent's end closed an idle but healthy session")
			case <-server.Done():
				t.Fatal("the server's end closed an idle but healthy session")
			default:
			}
			if _, err := server.Ping(t.Context()); err != nil {
				t.Errorf("Ping after 10 idle minutes: %v", err)
			}
			agent.Close()
			server.Close()
		})
	})
	t.Run("a silent connection is found dead within 30s", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			agent, server, line := mustPair(t)
			// Cut just after a keepalive went through: the worst moment.
			time.Sleep(time.Minute + time.Second)
			line.cut()
			start := time.Now()
			for name, s := range map[string]*Session{"agent": agent, "server": server} {
				select {
				case <-s.Done():
					if took := time.Since(start); took > 30*time.Second {
						t.Errorf("the %s's end took %s to notice, want at most 30s", name, took)
					}
					if err := s.Err(); err == nil || !strings.Contains(err.Error(), "keepalive") {
						t.Errorf("the %s's end says it closed because %v, want a failed keepalive", name, err)
					}
				case <-time.After(time.Hour):
					t.Fatalf("the %s's end never noticed the dead connection", name)
				}
			}
		})
	})
}
