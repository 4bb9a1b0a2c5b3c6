package server_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
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
		store, err := sqlstore.Open(ctx, sqlstoretest.Path(t))
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

// placeGate is a store whose PlaceJobs, while held, says it was entered
// and goes on when released: a test holds the scheduler in a batch's write.
type placeGate struct {
	idlegrid.Store
	held     atomic.Bool
	entered  chan struct{}
	released chan struct{}
}

func (g *placeGate) PlaceJobs(ctx context.Context, ps []*idlegrid.Placement) []error {
	if g.held.Load() {
		g.entered <- struct{}{}
		<-g.released
	}
	return g.Store.PlaceJobs(ctx, ps)
}

// TestServer_asksWhileStoring: an ask is answered while the scheduler
// waits for a batch of placements to be stored, and it sees the batch's
// GPUs taken already.
func TestServer_asksWhileStoring(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := &placeGate{entered: make(chan struct{}), released: make(chan struct{})}
		m := mustMarketOn(t, goldForAll, func(s idlegrid.Store) idlegrid.Store { gate.Store = s; return gate })
		nodes, _, err := m.srv.ListNodes(m.admin, idlegrid.NodeFilter{})
		if err != nil || len(nodes) != 2 {
			t.Fatalf("nodes = %v, %v; want 2", nodeIDsOf(nodes), err)
		}
		gate.held.Store(true)
		if _, err := m.srv.SubmitJob(m.renter, testSpec()); err != nil {
			t.Fatal(err)
		}
		<-gate.entered // the scheduler stores the placement
		type answer struct {
			free map[string]int
			err  error
		}
		answered := make(chan answer, 1)
		go func() { free, err := m.srv.FreeGPUs(m.renter, nodes); answered <- answer{free, err} }()
		synctest.Wait()
		gate.held.Store(false)
		var a answer
		select {
		case a = <-answered:
			gate.released <- struct{}{}
		default:
			t.Error("the ask waits for the batch's write; want it answered meanwhile")
			gate.released <- struct{}{}
			a = <-answered
		}
		if a.err != nil || a.free[nodes[0].ID]+a.free[nodes[1].ID] != 2 {
			t.Errorf("free GPUs while the placement is stored = %v, %v; want 2 of the 4, the job's 2 taken", a.free, a.err)
		}
	})
}

// TestServer_explainWhileStoring: an explanation of a job whose placement
// is being stored waits for that batch alone, and then says the job runs;
// it does not wait for the rest of the pass, which may take seconds more.
func TestServer_explainWhileStoring(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := &placeGate{entered: make(chan struct{}), released: make(chan struct{})}
		m := mustMarketOn(t, goldForAll, func(s idlegrid.Store) idlegrid.Store { gate.Store = s; return gate },
			func(c *server.Config) { c.PlacementBatch = 1 })
		spec := testSpec()
		spec.GPUs = 1
		submit := func() string {
			j, err := m.srv.SubmitJob(m.renter, spec)
			if err != nil {
				t.Fatal(err)
			}
			return j.ID
		}
		gate.held.Store(true)
		submit()
		<-gate.entered // the first pass stores its one job; two more queue meanwhile
		first := submit()
		time.Sleep(time.Second) // the pass takes the older first
		second := submit()
		gate.released <- struct{}{}
		<-gate.entered // the next pass stores the first of them, alone in its batch
		answered := make(chan error, 1)
		go func() { _, err := m.srv.Explain(m.renter, first); answered <- err }()
		synctest.Wait()
		select {
		case err := <-answered:
			t.Errorf("explained while its placement is stored: %v; want it to wait for the batch", err)
			gate.held.Store(false)
			gate.released <- struct{}{}
			return
		default:
		}
		gate.released <- struct{}{}
		<-gate.entered // the same pass stores the second job
		synctest.Wait()
		select {
		case err := <-answered:
			if idlegrid.ErrorCode(err) != idlegrid.ECONFLICT || !strings.Contains(err.Error(), "is not queued: it has been running") {
				t.Errorf("explain once its batch is stored: %v; want a conflict saying it runs", err)
			}
		default:
			t.Error("the explanation waits for the whole pass; want it answered once its batch is stored")
			gate.held.Store(false)
			gate.released <- struct{}{}
			<-answered
			return
		}
		gate.held.Store(false)
		gate.released <- struct{}{}
		synctest.Wait()
		if j, err := m.srv.FindJob(m.renter, second); err != nil || j.State != idlegrid.JobRunning {
			t.Errorf("second job = %v, %v; want running", j, err)
		}
	})
}
