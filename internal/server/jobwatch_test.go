package server_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestServer_WatchJob: a watch answers at once with a version the caller
// has not seen; with the one it has, it waits, and each change to the job
// or its leases (a start, a stop asked for) wakes it with a new version at
// once; with nothing changing it answers the same version when its wait
// runs out. It sees what FindJob lets the caller see.
func TestServer_WatchJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		j, err := m.srv.SubmitJob(m.renter, testSpec())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // placed
		v, placed, err := m.srv.WatchJob(m.renter, j.ID, "", time.Minute)
		if err != nil || v.Job.ID != j.ID || len(v.Leases) != 1 || v.Leases[0].State != idlegrid.LeaseAssigned || placed == "" {
			t.Fatalf("a first watch = %+v, %q, %v; want the job with its assigned lease, at once", v, placed, err)
		}
		type answer struct {
			v       *idlegrid.JobView
			version string
			err     error
			took    time.Duration
		}
		watch := func(seen string, wait time.Duration) <-chan answer {
			out := make(chan answer, 1)
			go func() {
				start := time.Now()
				v, version, err := m.srv.WatchJob(m.renter, j.ID, seen, wait)
				out <- answer{v, version, err, time.Since(start)}
			}()
			synctest.Wait()
			return out
		}
		waiting := func(got <-chan answer, before string) {
			t.Helper()
			select {
			case a := <-got:
				t.Fatalf("the watch answered before %s: %+v", before, a)
			default:
			}
		}

		started := watch(placed, time.Minute)
		waiting(started, "the lease started")
		lease := v.Leases[0]
		if err := m.srv.ReportLease(m.node, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
			t.Fatal(err)
		}
		a := <-started
		if a.err != nil || a.version == placed || a.v.Leases[0].State != idlegrid.LeaseRunning || a.took != 0 {
			t.Fatalf("the watch woken by the start = %+v, want the running lease, a new version, at once", a)
		}
		running := a.version

		a = <-watch(running, 12*time.Second) // nothing changes: it reads again every 5 s, and answers at 12
		if a.err != nil || a.version != running || a.took != 12*time.Second {
			t.Errorf("a watch of an unchanged job = %+v, want version %s after 12s", a, running)
		}

		stopping := watch(running, time.Minute)
		waiting(stopping, "the job was cancelled")
		if _, err := m.srv.CancelJob(m.renter, j.ID); err != nil {
			t.Fatal(err)
		}
		a = <-stopping
		if a.err != nil || a.version == running || a.v.Leases[0].StopRequested == "" || a.took != 0 {
			t.Errorf("the watch woken by the cancel = %+v, want the lease asked to stop, at once", a)
		}

		rival, _, _, err := m.srv.CreateAccount(m.admin, "rival", idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.srv.WatchJob(as(rival), j.ID, "", 0); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("another renter's watch: %v, want not found", err)
		}
		if _, _, err := m.srv.WatchJob(m.provider, j.ID, "", 0); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
			t.Errorf("a provider's watch: %v, want forbidden", err)
		}
		if v, _, err := m.srv.WatchJob(m.admin, j.ID, "", 0); err != nil || v.Job.ID != j.ID {
			t.Errorf("an admin's watch: %+v, %v", v, err)
		}
		if n := m.srv.JobsWatched(); n != 0 {
			t.Errorf("%d jobs still watched after every watch answered, want none", n)
		}
	})
}

// TestServer_Drain: a shutdown's Drain wakes the long polls waiting then,
// an agent's poll for commands and a watch of a job, which answer at once
// with nothing new; later watches answer at once, and later polls for
// commands are unavailable.
func TestServer_Drain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		j, err := m.srv.SubmitJob(m.renter, testSpec())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // placed
		v, seen, err := m.srv.WatchJob(m.renter, j.ID, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		lease := v.Leases[0]
		if err := m.srv.ReportLease(m.node, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
			t.Fatal(err)
		}
		if _, seen, err = m.srv.WatchJob(m.renter, j.ID, seen, 0); err != nil {
			t.Fatal(err)
		}
		polls := make(chan time.Duration, 4)
		const wait = time.Minute
		poll := func() {
			start := time.Now()
			cmds, err := m.srv.Commands(m.node, wait)
			if err != nil || len(cmds) != 0 {
				t.Errorf("a drained poll for commands = %+v, %v; want none", cmds, err)
			}
			polls <- time.Since(start)
		}
		watch := func() {
			start := time.Now()
			_, version, err := m.srv.WatchJob(m.renter, j.ID, seen, wait)
			if err != nil || version != seen {
				t.Errorf("a drained watch = %q, %v; want the version seen, %q", version, err, seen)
			}
			polls <- time.Since(start)
		}
		go poll()
		go watch()
		synctest.Wait()
		if len(polls) != 0 {
			t.Fatal("a long poll answered before the drain")
		}
		m.srv.Drain()
		for range 2 {
			if took := <-polls; took != 0 {
				t.Errorf("a long poll waiting at the drain answered %s after it, want at once", took)
			}
		}
		// Later watches answer at once too; a later poll for commands is
		// refused as unavailable, so that an agent polling over its
		// session through the shutdown's grace backs off.
		go watch()
		if took := <-polls; took != 0 {
			t.Errorf("a watch begun after the drain answered %s after it, want at once", took)
		}
		start := time.Now()
		if _, err := m.srv.Commands(m.node, wait); idlegrid.ErrorCode(err) != idlegrid.EUNAVAILABLE || time.Since(start) != 0 {
			t.Errorf("a poll for commands after the drain: %v after %s, want unavailable at once", err, time.Since(start))
		}
	})
}
