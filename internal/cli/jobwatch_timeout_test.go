package cli

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/client"
)

// TestJobAsker_deadlinePassed: once --timeout has passed, every wait of
// the watch ends with errWatchTimedOut, not only the first: a timer's one
// value, taken by the wait that ran when it fired (its helper goroutine,
// even as its watch was answered), left the rest to watch until the job
// ended.
func TestJobAsker_deadlinePassed(t *testing.T) {
	ts := httptest.NewServer(&scriptServer{views: watchScript()[1:2]})
	defer ts.Close()
	a := &jobAsker{cl: client.New(ts.URL, "k"), jobID: "job_1", now: time.Now, nodes: nodeNames{}, watch: true, wait: watchWait}
	passed := make(chan struct{})
	close(passed)
	for i := range 3 {
		if v, err := a.next(t.Context(), passed); !errors.Is(err, errWatchTimedOut) {
			t.Fatalf("wait %d after the deadline passed: %v, %v; want errWatchTimedOut", i+1, v, err)
		}
	}
}
