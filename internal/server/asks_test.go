package server_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// reasonGate is a store whose SetJobReason, which the scheduler calls for
// each job that must wait, says which job it is on entered and goes on
// when released: a test holds the scheduler inside a pass with it.
type reasonGate struct {
	idlegrid.Store
	held     atomic.Bool // gate the calls
	entered  chan string
	released chan struct{}
}

func (g *reasonGate) SetJobReason(ctx context.Context, jobID, reason string, at time.Time) error {
	if g.held.Load() {
		g.entered <- jobID
		<-g.released
	}
	return g.Store.SetJobReason(ctx, jobID, reason, at)
}

// TestServer_asksDuringPass: a node list asks the scheduler about free
// GPUs, and is answered between two placements of a pass, not only once
// the pass (seconds, with thousands of jobs) is over.
func TestServer_asksDuringPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "idlegrid.db"))
		if err != nil {
			t.Fatal(err)
		}
		gate := &reasonGate{Store: store, entered: make(chan string), released: make(chan struct{})}
		gate.held.Store(true)
		srv, err := server.Open(server.Config{Store: gate, Logger: testLogger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close(); store.Close() })
		admin, _, _, err := srv.Bootstrap(ctx, "ops", idlegrid.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		acct, _, _, err := srv.CreateAccount(as(admin), "acme", idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		renter := as(acct)
		submit := func() {
			spec := testSpec()
			spec.GPUModels = []string{"H200"} // no node has one: every job waits, with a reason
			if _, err := srv.SubmitJob(renter, spec); err != nil {
				t.Fatal(err)
			}
		}
		submit()
		<-gate.entered // the first pass is held at its one job; two more queue meanwhile
		submit()
		submit()
		gate.released <- struct{}{}
		<-gate.entered // the next pass, at the first of the two new jobs
		answered := make(chan error, 1)
		go func() { _, err := srv.FreeGPUs(renter, nil); answered <- err }()
		synctest.Wait()
		gate.released <- struct{}{}
		<-gate.entered // the second of them: the pass is not over
		synctest.Wait()
		select {
		case err := <-answered:
			gate.held.Store(false)
			gate.released <- struct{}{} // the second job's reason
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Error("the ask waits for the whole pass; want it answered between two placements")
			gate.held.Store(false)
			gate.released <- struct{}{}
			<-answered
		}
	})
}
