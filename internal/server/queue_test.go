package server_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
)

// TestServer_QueueByTier: a pass reads the queue highest tier first, so a
// gold job is placed at once however many older bronze jobs wait unread
// beyond the pass's reach.
func TestServer_QueueByTier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarketOn(t, goldForAll, func(s idlegrid.Store) idlegrid.Store { return s },
			func(c *server.Config) { c.QueuedPerPass = 2 })
		waiting := testSpec()
		waiting.Tier, waiting.GPUModels = idlegrid.TierBronze, []string{"NO-SUCH-GPU"} // they wait for ever
		for range 3 {
			if _, err := m.srv.SubmitJob(m.renter, waiting); err != nil {
				t.Fatal(err)
			}
		}
		m.advance(t, 5*time.Second)
		gold := testSpec()
		gold.Tier = idlegrid.TierGold
		j, err := m.srv.SubmitJob(m.renter, gold)
		if err != nil {
			t.Fatal(err)
		}
		m.advance(t, 5*time.Second)
		if got, _ := m.srv.FindJob(m.renter, j.ID); got.State != idlegrid.JobRunning {
			t.Errorf("the gold job behind three older bronze jobs, two read a pass: %s (%q), want placed", got.State, got.Reason)
		}
	})
}
