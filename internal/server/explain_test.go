package server_test

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/idlegrid/idlegrid"
)

// TestServer_ExplainNotQueued: only a queued job has a wait to explain; a
// running or ended one is refused, naming its state, rather than told
// that it could start now.
func TestServer_ExplainNotQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		_, lease := m.runningLease(t)
		_, err := m.srv.Explain(m.renter, lease.JobID)
		if idlegrid.ErrorCode(err) != idlegrid.ECONFLICT || !strings.Contains(err.Error(), "is not queued: it has been running since ") {
			t.Errorf("explain of a running job: %v, want a conflict saying it runs", err)
		}
		spec := testSpec()
		spec.MaxPriceMicrosPerGPUHour = 100_000 // below both asks: it waits
		j, err := m.srv.SubmitJob(m.renter, spec)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := m.srv.Explain(m.renter, j.ID); err != nil {
			t.Fatalf("explain of a queued job: %v", err)
		}
		if _, err := m.srv.CancelJob(m.renter, j.ID); err != nil {
			t.Fatal(err)
		}
		_, err = m.srv.Explain(m.renter, j.ID)
		if idlegrid.ErrorCode(err) != idlegrid.ECONFLICT || !strings.Contains(err.Error(), "is not queued: it ended ") ||
			!strings.Contains(err.Error(), ", cancelled (cancelled by the renter)") {
			t.Errorf("explain of a cancelled job: %v, want a conflict saying it ended cancelled", err)
		}
	})
}
