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

// nodesDown is a store whose node listing fails while down is set: the
// scheduler cannot build its engine.
type nodesDown struct {
	idlegrid.Store
	down atomic.Bool
}

func (s *nodesDown) ListNodes(ctx context.Context, f idlegrid.NodeFilter) ([]*idlegrid.Node, error) {
	if s.down.Load() {
		return nil, idlegrid.Errorf(idlegrid.EUNAVAILABLE, "database unavailable")
	}
	return s.Store.ListNodes(ctx, f)
}

// TestServer_Ready: a server is not ready until its engine is built from
// the store, and not while the database does not answer; each time it
// says which.
func TestServer_Ready(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db, err := sqlstore.Open(ctx, sqlstoretest.Path(t))
		if err != nil {
			t.Fatal(err)
		}
		store := &nodesDown{Store: db}
		store.down.Store(true)
		srv, err := server.Open(server.Config{Store: store, Logger: testLogger})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		synctest.Wait() // the first build, which fails
		if err := srv.Ready(ctx); idlegrid.ErrorCode(err) != idlegrid.EUNAVAILABLE || idlegrid.ErrorMessage(err) != "the market engine is not built from the database yet; try again shortly" {
			t.Fatalf("Ready before the engine is built: %v, want unavailable, saying so", err)
		}
		store.down.Store(false)
		time.Sleep(2 * time.Second) // the scheduler tries again after its period
		synctest.Wait()
		if err := srv.Ready(ctx); err != nil {
			t.Fatalf("Ready once built: %v", err)
		}
		db.Close()
		if err := srv.Ready(ctx); idlegrid.ErrorCode(err) != idlegrid.EUNAVAILABLE || idlegrid.ErrorMessage(err) != "database unavailable" {
			t.Errorf("Ready with the database closed: %v, want unavailable, naming the database", err)
		}
	})
}

// jobsStuck is a store whose queue read blocks while stuck is set, until
// release is closed: a placement pass that never ends.
type jobsStuck struct {
	idlegrid.Store
	stuck   atomic.Bool
	release chan struct{}
}

func (s *jobsStuck) ListJobs(ctx context.Context, f idlegrid.JobFilter) ([]*idlegrid.Job, error) {
	if s.stuck.Load() {
		<-s.release
	}
	return s.Store.ListJobs(ctx, f)
}

// A server whose scheduler is stuck in a pass is not ready, and says so.
func TestServer_ReadyNotWhileStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db, err := sqlstore.Open(ctx, sqlstoretest.Path(t))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		store := &jobsStuck{Store: db, release: make(chan struct{})}
		srv, err := server.Open(server.Config{Store: store, Logger: testLogger})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		synctest.Wait()
		if err := srv.Ready(ctx); err != nil {
			t.Fatalf("Ready once built: %v", err)
		}
		store.stuck.Store(true)
		srv.Kick()
		synctest.Wait() // the pass is stuck reading the queue
		if err := srv.Ready(ctx); idlegrid.ErrorCode(err) != idlegrid.EUNAVAILABLE || !strings.Contains(idlegrid.ErrorMessage(err), "stuck") {
			t.Errorf("Ready while a pass is stuck: %v, want unavailable, saying the scheduler is stuck", err)
		}
		store.stuck.Store(false)
		close(store.release)
		synctest.Wait()
		if err := srv.Ready(ctx); err != nil {
			t.Errorf("Ready once the pass ended: %v", err)
		}
	})
}
