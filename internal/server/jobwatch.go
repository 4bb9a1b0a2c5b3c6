package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/idlegrid/idlegrid"
)

// watchRecheck is how often a waiting watch reads its job again without
// being woken: a change this server was not told of (another coordinator
// on the same database, say) shows within it.
const watchRecheck = 5 * time.Second

// WatchJob returns the job and its leases, as FindJob and ListLeases let
// the caller see them, with their version: a tag that changes whenever
// anything in the view does. Given the version the caller saw last (seen),
// it waits up to wait for the view to change (or until Drain), and returns
// the unchanged view, with seen as its version, if it did not. Every store write that
// changes a job or its leases wakes its watches (jobChanged).
func (s *Server) WatchJob(ctx context.Context, jobID, seen string, wait time.Duration) (*idlegrid.JobView, string, error) {
	w := watch{deadline: time.NewTimer(wait), recheck: time.NewTimer(watchRecheck), drained: s.draining}
	defer w.deadline.Stop()
	defer w.recheck.Stop()
	for {
		v, version, again, err := s.waitOnce(ctx, jobID, seen, wait, w)
		if !again {
			return v, version, err
		}
	}
}

// watch is what ends one WatchJob's wait: its deadline, the recheck of
// the view, and the server's Drain.
type watch struct {
	deadline, recheck *time.Timer
	drained           <-chan struct{}
}

// waitOnce reads the job's view and returns it, unless it is still the
// one seen: then it waits, and says to read again (again) when a change
// wakes it or recheck fires, or returns the view unchanged when the
// deadline passes, ctx ends or the server drains (w).
func (s *Server) waitOnce(ctx context.Context, jobID, seen string, wait time.Duration, w watch) (
	v *idlegrid.JobView, version string, again bool, err error) {
	woken, done := s.watches.wait(jobID) // before reading, so no change is missed
	defer done()
	v, version, err = s.jobView(ctx, jobID)
	if err != nil || version != seen || wait <= 0 {
		return v, version, false, err
	}
	w.recheck.Reset(watchRecheck)
	select {
	case <-woken:
	case <-w.recheck.C:
	case <-w.deadline.C:
		return v, version, false, nil
	case <-ctx.Done():
		return v, version, false, nil
	case <-w.drained:
		return v, version, false, nil
	}
	return nil, "", true, nil
}

// jobView reads a job's leases and then the job, in that order, so that
// the job is at least as new as its leases: a job seen queued has no lease
// it was placed on since. The version is a digest of the whole view.
func (s *Server) jobView(ctx context.Context, jobID string) (*idlegrid.JobView, string, error) {
	leases, err := s.ListLeases(ctx, idlegrid.LeaseFilter{JobID: jobID})
	if err != nil {
		return nil, "", err
	}
	j, err := s.FindJob(ctx, jobID)
	if err != nil {
		return nil, "", err
	}
	if leases == nil {
		leases = []*idlegrid.Lease{}
	}
	v := &idlegrid.JobView{Job: j, Leases: leases}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	return v, hex.EncodeToString(sum[:12]), nil
}

// jobChanged wakes the watches of a job whose record or leases the store
// just changed.
func (s *Server) jobChanged(jobID string) { s.watches.notify(jobID) }
