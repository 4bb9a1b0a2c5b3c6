package httpapi_test

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/pgtest"
)

// cutProxy forwards TCP connections to a PostgreSQL server until cut,
// which closes its listener and every connection: to the store behind it
// the database is gone, refusing connections, while the server itself
// serves the other tests on.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func mustCutProxy(tb testing.TB, target string) *cutProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	tb.Cleanup(p.cut)
	go func() { // owned by p: it ends when cut closes ln
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// syncBuffer is a log that handlers write to at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestAPI_databaseUnavailable: while PostgreSQL refuses connections the
// API answers 503 unavailable, saying the database is unavailable and to
// try again, with nothing of the driver's error or the database's address;
// the server's log keeps the cause.
func TestAPI_databaseUnavailable(t *testing.T) {
	dsn, err := url.Parse(pgtest.NewDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := mustCutProxy(t, dsn.Host)
	dsn.Host = proxy.ln.Addr().String()
	var log syncBuffer
	f := mustOpenOn(t, dsn.String(), httpapi.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if got := mustDo(t, request(t, "GET", f.URL+"/v1/me", f.AdminSecret, "")); got.Status != http.StatusOK {
		t.Fatalf("GET /v1/me with the database up: %d %s", got.Status, got.Body)
	}

	proxy.cut()
	got := mustDo(t, request(t, "GET", f.URL+"/v1/me", f.AdminSecret, ""))
	if got.Status != http.StatusServiceUnavailable {
		t.Fatalf("GET /v1/me with the database gone: %d %s, want 503; log:\n%s", got.Status, got.Body, log.String())
	}
	e := got.Err(t)
	if e.Code != idlegrid.EUNAVAILABLE || e.Message != "the database is unavailable; try again shortly" {
		t.Errorf("error = %+v, want unavailable, saying the database is unavailable and to try again", e)
	}
	if ra := got.Header.Get("Retry-After"); ra != "5" {
		t.Errorf("Retry-After = %q, want 5 (seconds): when to try again", ra)
	}
	for _, internal := range []string{dsn.Host, "127.0.0.1", "refused", "postgres", "connect"} {
		if strings.Contains(string(got.Body), internal) {
			t.Errorf("answer %s shows %q", got.Body, internal)
		}
	}
	if l := log.String(); !strings.Contains(l, `msg="http: unavailable"`) || !strings.Contains(l, "cause=") {
		t.Errorf("log %q: want the 503 logged with its cause", l)
	}
	// The pool's connections, each found closed, give way to new ones,
	// which the database refuses: every answer meanwhile is a 503.
	for i := 0; i < 64 && !strings.Contains(log.String(), "connection refused"); i++ {
		if got := mustDo(t, request(t, "GET", f.URL+"/v1/me", f.AdminSecret, "")); got.Status != http.StatusServiceUnavailable {
			t.Fatalf("GET /v1/me, try %d with the database gone: %d %s, want 503", i+2, got.Status, got.Body)
		}
	}
	if l := log.String(); !strings.Contains(l, "connection refused") {
		t.Errorf("log %q: want a cause that says connection refused", l)
	}
	// The public client, which the CLI and the agent use, says the same.
	if _, err := f.Admin.Me(t.Context()); idlegrid.ErrorCode(err) != idlegrid.EUNAVAILABLE ||
		!strings.Contains(idlegrid.ErrorMessage(err), "database is unavailable") {
		t.Errorf("client: %v (%s), want unavailable naming the database", err, idlegrid.ErrorCode(err))
	}
}
