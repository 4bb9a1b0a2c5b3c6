package cli

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	idlegridclient "github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// streams is a route, GET /test/stream?name=NAME, that stands for an
// inference stream: it sends a first line at once, the rest when the test
// lets NAME finish, and then, like the gateway's meter, writes down what
// it served (an account named after it), even when it was cut. It also
// tells when a watch of a job has reached the server.
type streams struct {
	srv      chan *runningServer // the server, once started
	finish   map[string]chan struct{}
	cut      chan string // the names of the streams cut
	watching chan struct{}
}

func newStreams(names ...string) *streams {
	s := &streams{srv: make(chan *runningServer, 1), finish: map[string]chan struct{}{}, cut: make(chan string, len(names)),
		watching: make(chan struct{}, 1)}
	for _, n := range names {
		s.finish[n] = make(chan struct{})
	}
	return s
}

func (s *streams) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/watch") && r.URL.Query().Get("wait") != "0" {
			s.watching <- struct{}{}
		}
		if r.URL.Path != "/test/stream" {
			h.ServeHTTP(w, r)
			return
		}
		name := r.URL.Query().Get("name")
		io.WriteString(w, "begin\n")
		http.NewResponseController(w).Flush()
		select {
		case <-s.finish[name]:
			io.WriteString(w, "end\n")
		case <-r.Context().Done():
			s.cut <- name
		}
		rs := <-s.srv
		s.srv <- rs
		if _, _, _, err := rs.srv.Bootstrap(context.WithoutCancel(r.Context()), "served-"+name, idlegrid.RoleRenter); err != nil {
			panic(err) // the store closed under the handler
		}
	})
}

// open starts a stream and returns its body, once the first line came.
func (s *streams) open(t *testing.T, url, name string) *bufio.Reader {
	t.Helper()
	resp, err := http.Get(url + "/test/stream?name=" + name)
	mustOK(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	body := bufio.NewReader(resp.Body)
	if line, err := body.ReadString('\n'); line != "begin\n" {
		t.Fatalf("stream %s began with %q, %v", name, line, err)
	}
	return body
}

// await receives from c, failing the test when nothing comes within
// waitLimit.
func await[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("%s: not within %s", what, waitLimit)
		panic("unreachable")
	}
}

// startShutdownServer runs a server on SQLite with the test's streams and
// grace, and a renter with a queued job.
func startShutdownServer(t *testing.T, s *streams, cfg serveConfig) (rs *runningServer, dsn string, renter *idlegridclient.Client, jobID string) {
	t.Helper()
	dir := t.TempDir()
	dsn = filepath.Join(dir, "idlegrid.db")
	cfg.listen, cfg.dsn, cfg.meterJournal, cfg.logger, cfg.wrap = "127.0.0.1:0", dsn, filepath.Join(dir, "journal"), slog.New(slog.DiscardHandler), s.wrap
	rs, err := startServer(context.Background(), cfg)
	mustOK(t, err)
	s.srv <- rs
	renter, _ = fundedRenter(t, idlegridclient.New(rs.url, rs.adminKey), rs.url, "renter")
	j, err := renter.SubmitJob(context.Background(), idlegrid.JobSpec{
		Name: "waits", Kind: idlegrid.KindTraining, Image: "registry.example.com/train:1", GPUs: 1, Nodes: 1, Tier: idlegrid.TierSilver,
		MaxPriceMicrosPerGPUHour: idlegrid.MicrosPerUnit, DurationSeconds: 300,
	})
	mustOK(t, err)
	eventually(t, "the engine to say why the job waits", func() error { // its last change
		j, err := renter.FindJob(context.Background(), j.ID)
		if err == nil && j.Reason == idlegrid.MatcherPendingReason {
			err = errors.New("the matcher has not looked at it yet")
		}
		return err
	})
	return rs, dsn, renter, j.ID
}

// served lists the streams whose account the database holds.
func served(t *testing.T, dsn string) []string {
	t.Helper()
	db, err := sqlstore.Open(context.Background(), dsn)
	mustOK(t, err)
	defer db.Close()
	accts, err := db.ListAccounts(context.Background(), idlegrid.AccountFilter{Role: idlegrid.RoleRenter})
	mustOK(t, err)
	var names []string
	for _, a := range accts {
		if n, ok := strings.CutPrefix(a.Name, "served-"); ok {
			names = append(names, n)
		}
	}
	return names
}

// TestServer_stopLetsRequestsFinish: at a shutdown the server stops
// taking connections and answers a long poll (a watch of a job) at once,
// while a stream in flight goes on to its end, and what it writes after
// it is in the database.
func TestServer_stopLetsRequestsFinish(t *testing.T) {
	s := newStreams("a")
	rs, dsn, renter, jobID := startShutdownServer(t, s, serveConfig{shutdownGrace: time.Hour})
	ctx := context.Background()
	stream := s.open(t, rs.url, "a")
	_, seen, err := renter.WatchJob(ctx, jobID, "", 0)
	mustOK(t, err)
	type answer struct {
		version string
		err     error
	}
	watched := make(chan answer, 1)
	go func() {
		_, version, err := renter.WatchJob(ctx, jobID, seen, time.Minute)
		watched <- answer{version, err}
	}()
	await(t, s.watching, "the watch to reach the server")

	stopped := make(chan error, 1)
	go func() { stopped <- rs.stop() }()
	select {
	case a := <-watched:
		if a.err != nil || a.version != seen {
			t.Errorf("the watch answered %q, %v; want the version seen, %q", a.version, a.err, seen)
		}
	case <-time.After(waitLimit / 9): // under the watch's 30 s
		t.Fatal("the watch still waits at shutdown")
	}
	if c, err := net.Dial("tcp", strings.TrimPrefix(rs.url, "http://")); err == nil {
		c.Close()
		t.Error("a connection was taken once the long polls were answered")
	}
	select {
	case err := <-stopped:
		t.Fatalf("stop returned %v with a stream in flight", err)
	default:
	}
	close(s.finish["a"])
	if rest, err := io.ReadAll(stream); string(rest) != "end\n" || err != nil {
		t.Errorf("the stream ended with %q, %v; want the rest of it", rest, err)
	}
	mustOK(t, await(t, stopped, "stop"))
	if got := served(t, dsn); len(got) != 1 || got[0] != "a" {
		t.Errorf("streams written down = %q, want [a]", got)
	}
}

// TestServer_stopCutsOverGrace: at a shutdown a stream that ends within
// the grace ends whole, and one still running when the grace passes is
// cut; what each writes after it is in the database.
func TestServer_stopCutsOverGrace(t *testing.T) {
	s := newStreams("quick", "slow")
	graceStarted, graceOver := make(chan time.Duration, 1), make(chan time.Time)
	rs, dsn, _, _ := startShutdownServer(t, s, serveConfig{shutdownGrace: time.Minute,
		graceTimer: func(d time.Duration) <-chan time.Time { graceStarted <- d; return graceOver }})
	quick, slow := s.open(t, rs.url, "quick"), s.open(t, rs.url, "slow")

	stopped := make(chan error, 1)
	go func() { stopped <- rs.stop() }()
	if d := await(t, graceStarted, "the grace to start"); d != time.Minute {
		t.Errorf("grace = %s, want the configured minute", d)
	}
	close(s.finish["quick"])
	if rest, err := io.ReadAll(quick); string(rest) != "end\n" || err != nil {
		t.Errorf("the stream that ended within the grace ended with %q, %v; want the rest of it", rest, err)
	}
	close(graceOver)
	if rest, _ := io.ReadAll(slow); len(rest) != 0 {
		t.Errorf("the stream over the grace went on with %q, want it cut", rest)
	}
	if name := await(t, s.cut, "a stream cut"); name != "slow" {
		t.Errorf("cut %q, want slow", name)
	}
	mustOK(t, await(t, stopped, "stop"))
	if got := strings.Join(served(t, dsn), ","); got != "quick,slow" && got != "slow,quick" {
		t.Errorf("streams written down = %q, want quick and slow", got)
	}
}
