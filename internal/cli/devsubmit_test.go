package cli

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// TestSubmitter_giveUp: the demo renter gives up only on its own jobs that
// have waited too long for a first placement, never on a job a person
// submitted with the demo renter's key, nor on a preempted job that waits,
// requeued, to resume from its checkpoint.
func TestSubmitter_giveUp(t *testing.T) {
	long := time.Now().Add(-time.Hour)
	started := long.Add(time.Minute)
	queued := []*idlegrid.Job{
		{ID: "job_stuck", State: idlegrid.JobQueued, CreatedAt: long},
		{ID: "job_fresh", State: idlegrid.JobQueued, CreatedAt: time.Now()},
		{ID: "job_requeued", State: idlegrid.JobQueued, CreatedAt: long, StartedAt: &started},
		{ID: "job_persons", State: idlegrid.JobQueued, CreatedAt: long},
	}
	var mu sync.Mutex
	var cancelled []string
	submits := []string{"job_stuck", "job_fresh", "job_requeued"} // the demo renter's own
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/jobs":
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(&idlegrid.Job{ID: submits[0], State: idlegrid.JobQueued})
			submits = submits[1:]
		case r.Method == http.MethodGet && r.URL.Path == "/v1/jobs":
			json.NewEncoder(w).Encode(wire.Jobs{Jobs: queued})
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/cancel"):
			cancelled = append(cancelled, strings.Split(r.URL.Path, "/")[3])
			json.NewEncoder(w).Encode(&idlegrid.Job{ID: "x", State: idlegrid.JobCancelled})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	s := &submitter{renter: client.New(srv.URL, "igk_test"), giveUpAfter: 3 * time.Minute,
		rand: rand.New(rand.NewPCG(1, 2)), report: func(string) {}}
	for range 3 {
		s.submitOne(context.Background())
	}
	s.giveUp(context.Background())
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"job_stuck"}; !slices.Equal(cancelled, want) {
		t.Errorf("cancelled %q, want %q", cancelled, want)
	}
}
