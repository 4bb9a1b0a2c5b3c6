package server_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// A node may send the output it buffered for a while after its lease
// ended, and no longer: later lines would be output the renter takes for
// its job's, written to a lease long over.
func TestServer_AppendLogsAfterEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		j, err := m.srv.SubmitJob(m.renter, testSpec())
		if err != nil {
			t.Fatal(err)
		}
		l, n := mustStarted(t, m, j)
		code := 0
		if err := m.srv.ReportLease(n, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &code}); err != nil {
			t.Fatal(err)
		}
		batch := idlegrid.LogBatch{Lines: []idlegrid.LogLine{{Stream: "stdout", Text: "the last line"}}}
		if err := m.srv.AppendLogs(n, l.ID, batch); err != nil {
			t.Errorf("output sent just after the end: %v, want it kept", err)
		}
		m.advance(t, 11*time.Minute)
		wantCode(t, m.srv.AppendLogs(n, l.ID, batch), idlegrid.ECONFLICT)
		lines, err := m.srv.LeaseLogs(m.renter, idlegrid.LogFilter{LeaseID: l.ID})
		if err != nil || len(lines) != 1 {
			t.Errorf("logs = %+v (%v), want the one line sent in time", lines, err)
		}
	})
}
