package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// logsServer answers "job logs" about job_1, running on lease_1: the
// first away requests find no server (the connection is dropped
// unanswered), then the lease's lines are there, and the lease has
// succeeded once they have been read.
type logsServer struct {
	mu    sync.Mutex
	away  int
	reads int // log reads answered
}

func (s *logsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.away > 0 {
		s.away--
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close() // as a server that went away mid-request
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/leases":
		state := idlegrid.LeaseRunning
		if s.reads > 0 {
			state = idlegrid.LeaseSucceeded
		}
		json.NewEncoder(w).Encode(map[string]any{"leases": []*idlegrid.Lease{{ID: "lease_1", JobID: "job_1", Attempt: 1, State: state}}})
	case "/v1/leases/lease_1/logs":
		s.reads++
		lines := []idlegrid.LogLine{}
		if r.URL.Query().Get("after") == "" {
			lines = []idlegrid.LogLine{{Seq: 1, Stream: "stdout", Text: "epoch 1"}, {Seq: 2, Stream: "stdout", Text: "epoch 2"}}
		}
		json.NewEncoder(w).Encode(map[string]any{"lines": lines})
	default:
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "not_found", "message": "no such endpoint"}})
	}
}

// TestJobLogs_followsThroughOutage: "job logs -f" keeps following across
// a server it cannot reach for a while, as "job watch" does: it says so
// once, and again when the server is back; without -f, it fails at once.
func TestJobLogs_followsThroughOutage(t *testing.T) {
	s := &logsServer{away: 2}
	ts := httptest.NewServer(s)
	defer ts.Close()
	vars := map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "k"}
	r := run(t, vars, "job", "logs", "job_1", "-f")
	if r.code != 0 || r.out != "epoch 1\nepoch 2\n" {
		t.Fatalf("job logs -f across an outage: %s\nwant exit 0 and both lines", r)
	}
	if strings.Count(r.err, "cannot reach the server") != 1 || !strings.Contains(r.err, "still trying") ||
		!strings.Contains(r.err, "in contact with the server again") {
		t.Errorf("job logs -f said on stderr:\n%s\nwant the outage said once, and its end", r.err)
	}

	s.mu.Lock()
	s.away, s.reads = 5, 0 // more than the client's one retry of a request on a dropped connection
	s.mu.Unlock()
	if r := run(t, vars, "job", "logs", "job_1"); r.code != 1 || !strings.Contains(r.err, "idlegrid: ") || strings.Contains(r.err, "still trying") {
		t.Errorf("job logs without -f, the server away: %s\nwant exit 1 at once", r)
	}
}

// TestLatestOn: a gang's latest run has a lease on each node; the logs
// are the first node's, or the one --node names, and the others are named.
func TestLatestOn(t *testing.T) {
	leases := []*idlegrid.Lease{
		{ID: "l1", NodeID: "node_b", Attempt: 1},
		{ID: "l2", NodeID: "node_c", Attempt: 2},
		{ID: "l3", NodeID: "node_a", Attempt: 2},
	}
	if l, others := latestOn(leases, ""); l == nil || l.ID != "l3" || len(others) != 1 || others[0] != "node_c" {
		t.Errorf("latestOn(no node) = %+v, %v; want l3, the other node_c", l, others)
	}
	if l, others := latestOn(leases, "node_c"); l == nil || l.ID != "l2" || len(others) != 1 || others[0] != "node_a" {
		t.Errorf("latestOn(node_c) = %+v, %v; want l2, the other node_a", l, others)
	}
	if l, others := latestOn(leases, "node_b"); l != nil || len(others) != 2 {
		t.Errorf("latestOn(node_b, of an earlier run) = %+v, %v; want none, with the latest run's two nodes", l, others)
	}
	if l, others := latestOn(leases[:1], ""); l == nil || l.ID != "l1" || len(others) != 0 {
		t.Errorf("latestOn(one lease) = %+v, %v; want l1 alone", l, others)
	}
	if l, _ := latestOn(nil, ""); l != nil {
		t.Errorf("latestOn(no lease) = %+v, want none", l)
	}
}

// linesServer answers "job logs" about job_1, on lease_1 on node_1: lines
// of output one second apart, the third and the fifth on stderr, read
// after a line, the first of a limit, or the last of a tail, as the
// server does. Its lease runs until more (the lines added once the first
// read has been answered) have been read.
type linesServer struct {
	mu    sync.Mutex
	lines []idlegrid.LogLine
	more  []idlegrid.LogLine
	tails []string // the tail asked for, read by read
}

func newLinesServer(n int) *linesServer {
	s := &linesServer{}
	at := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		l := idlegrid.LogLine{Seq: int64(i), At: at.Add(time.Duration(i) * time.Second), Stream: "stdout", Text: fmt.Sprintf("line %d", i)}
		if i == 3 || i == 5 {
			l.Stream = "stderr"
		}
		s.lines = append(s.lines, l)
	}
	return s
}

func (s *linesServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/leases":
		state := idlegrid.LeaseRunning
		if len(s.more) == 0 && len(s.tails) > 0 {
			state = idlegrid.LeaseSucceeded
		}
		json.NewEncoder(w).Encode(map[string]any{"leases": []*idlegrid.Lease{{ID: "lease_1", JobID: "job_1", NodeID: "node_1", Attempt: 1, State: state}}})
	case "/v1/leases/lease_1/logs":
		q := r.URL.Query()
		s.tails = append(s.tails, q.Get("tail"))
		lines := s.lines
		if n, _ := strconv.Atoi(q.Get("tail")); n > 0 {
			lines = lines[max(len(lines)-n, 0):]
		} else {
			after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
			lines = slices.DeleteFunc(slices.Clone(lines), func(l idlegrid.LogLine) bool { return l.Seq <= after })
		}
		json.NewEncoder(w).Encode(map[string]any{"lines": lines})
		s.lines, s.more = append(s.lines, s.more...), nil
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// TestJobLogs_tailTimestampsJSON: --tail prints only the last lines (and
// with -f follows on from the last of them), --timestamps puts each line
// after its time, and --json prints each line, stderr's too, as a line of
// JSON on stdout; a --tail out of the server's bounds is the command
// line's mistake.
func TestJobLogs_tailTimestampsJSON(t *testing.T) {
	serve := func(s *linesServer) map[string]string {
		ts := httptest.NewServer(s)
		t.Cleanup(ts.Close)
		return map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "k"}
	}

	s := newLinesServer(5)
	if r := run(t, serve(s), "job", "logs", "job_1", "--tail", "2"); r.code != 0 || r.out != "line 4\n" || r.err != "line 5\n" || s.tails[0] != "2" {
		t.Errorf("job logs --tail 2: %s\n(tails asked %q) want line 4 on stdout, line 5 on stderr, from a tail of 2", r, s.tails)
	}

	s = newLinesServer(5)
	s.more = []idlegrid.LogLine{{Seq: 6, At: time.Date(2026, 12, 7, 0, 0, 6, 500_000_000, time.UTC), Stream: "stdout", Text: "line 6"}}
	r := run(t, serve(s), "job", "logs", "job_1", "-f", "--tail", "3", "--timestamps")
	want := "2026-12-07T00:00:04Z line 4\n2026-12-07T00:00:06.5Z line 6\n"
	if r.code != 0 || r.out != want || r.err != "2026-12-07T00:00:03Z line 3\n2026-12-07T00:00:05Z line 5\n" {
		t.Errorf("job logs -f --tail 3 --timestamps: %s\nwant stdout:\n%s", r, want)
	}

	s = newLinesServer(5)
	r = run(t, serve(s), "job", "logs", "job_1", "--json")
	var got []logLine
	dec := json.NewDecoder(strings.NewReader(r.out))
	for dec.More() {
		var l logLine
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("job logs --json printed:\n%s\n%v", r.out, err)
		}
		got = append(got, l)
	}
	if r.code != 0 || r.err != "" || strings.Count(r.out, "\n") != 5 || len(got) != 5 {
		t.Fatalf("job logs --json: %s\nwant 5 lines of JSON on stdout, nothing on stderr", r)
	}
	if l := got[2]; l.LeaseID != "lease_1" || l.NodeID != "node_1" || l.Seq != 3 || l.Stream != "stderr" || l.Text != "line 3" || !l.At.Equal(s.lines[2].At) {
		t.Errorf("job logs --json's third line = %+v", l)
	}

	for _, bad := range []string{"-1", "10001"} {
		r := run(t, serve(newLinesServer(1)), "job", "logs", "job_1", "--tail", bad)
		if r.code != 2 || !strings.Contains(r.err, "--tail must be between 1 and 10000 lines, got "+bad) {
			t.Errorf("job logs --tail %s: %s\nwant exit 2 naming --tail", bad, r)
		}
	}
}
