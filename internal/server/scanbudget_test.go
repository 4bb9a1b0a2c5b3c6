package server_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
)

// Reads of every node for people share a budget of the scheduler's time:
// over it they are refused with the time to retry, and after it they run
// again. The market view and an explanation are answered from their last
// read for a while, budget or not, to those who may see them.
func TestServer_scanBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A microsecond a second, in bursts of one: under synctest a read
		// takes no time, and is charged a microsecond.
		m := mustMarketOn(t, goldForAll, func(s idlegrid.Store) idlegrid.Store { return s }, func(c *server.Config) {
			c.ScanShare, c.ScanBurst = 1e-6, time.Microsecond
		})
		spec := testSpec()
		spec.MaxPriceMicrosPerGPUHour = 100_000 // below both asks: it waits
		j, err := m.srv.SubmitJob(m.renter, spec)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := m.srv.Market(m.renter); err != nil { // the budget's microsecond
			t.Fatal(err)
		}
		_, err = m.srv.Explain(m.renter, j.ID)
		var e *idlegrid.Error
		if idlegrid.ErrorCode(err) != idlegrid.ETOOMANY || !errors.As(err, &e) || e.RetryAfter != time.Second {
			t.Fatalf("explain over the budget: %v, want too_many with a second to wait", err)
		}
		if _, err := m.srv.Market(m.renter); err != nil {
			t.Errorf("the market view read a moment ago: %v, want it answered again", err)
		}
		time.Sleep(time.Second)
		if _, err := m.srv.Explain(m.renter, j.ID); err != nil {
			t.Fatalf("explain after a second: %v", err)
		}
		if _, err := m.srv.Explain(m.renter, j.ID); err != nil {
			t.Errorf("the job explained a moment ago: %v, want it answered again", err)
		}
		if _, err := m.srv.Explain(m.provider, j.ID); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
			t.Errorf("a provider asks for the explanation kept for the renter: %v, want forbidden", err)
		}
		time.Sleep(time.Second) // the market view is 2 s old now, and the budget full again
		if _, err := m.srv.Market(m.renter); err != nil {
			t.Fatal(err)
		}
		_, _, err = m.srv.ListNodes(m.renter, idlegrid.NodeFilter{MinFreeGPUs: 1})
		if idlegrid.ErrorCode(err) != idlegrid.ETOOMANY {
			t.Errorf("a search for free GPUs over the budget: %v, want too_many", err)
		}
		if _, _, err := m.srv.ListNodes(m.renter, idlegrid.NodeFilter{}); err != nil {
			t.Errorf("a plain node list, which scans nothing: %v", err)
		}
	})
}
