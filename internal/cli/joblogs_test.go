package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

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
