package idlegrid_test

import (
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

func lease(state idlegrid.LeaseState, fault idlegrid.Fault, reason string) *idlegrid.Lease {
	return &idlegrid.Lease{State: state, Fault: fault, Reason: reason}
}

// ended is l, ended at minute m.
func ended(l *idlegrid.Lease, m int) *idlegrid.Lease {
	at := time.Date(2025, 1, 1, 0, m, 0, 0, time.UTC)
	l.EndedAt = &at
	return l
}

// limitStopped is a lease of limit seconds the server stopped at its time
// limit.
func limitStopped(limit int64) *idlegrid.Lease {
	l := &idlegrid.Lease{State: idlegrid.LeaseCancelled, LimitSeconds: limit}
	l.StopRequested, l.Reason = idlegrid.LimitStop(l), idlegrid.LimitStop(l)
	return l
}

func TestNextJobState(t *testing.T) {
	tests := []struct {
		name            string
		leases          []*idlegrid.Lease
		cancelRequested bool
		state           idlegrid.JobState
		reason          string
	}{
		{
			name:   "any live lease keeps it running",
			leases: []*idlegrid.Lease{lease(idlegrid.LeaseSucceeded, "", "done"), lease(idlegrid.LeaseAssigned, "", "")},
			state:  idlegrid.JobRunning,
		},
		{
			name:   "live beats a failure",
			leases: []*idlegrid.Lease{lease(idlegrid.LeaseFailed, idlegrid.FaultWorkload, "exit 1"), lease(idlegrid.LeaseRunning, "", "")},
			state:  idlegrid.JobRunning,
		},
		{
			name:   "all succeeded",
			leases: []*idlegrid.Lease{lease(idlegrid.LeaseSucceeded, "", "exit 0"), lease(idlegrid.LeaseSucceeded, "", "exit 0")},
			state:  idlegrid.JobSucceeded, reason: "all leases completed",
		},
		{
			name:   "workload failure fails the job",
			leases: []*idlegrid.Lease{lease(idlegrid.LeaseSucceeded, "", "exit 0"), lease(idlegrid.LeaseFailed, idlegrid.FaultWorkload, "exit code 2")},
			state:  idlegrid.JobFailed, reason: "exit code 2",
		},
		{
			name:   "failure without a fault is the workload's",
			leases: []*idlegrid.Lease{lease(idlegrid.LeaseFailed, idlegrid.FaultNone, "oom")},
			state:  idlegrid.JobFailed, reason: "oom",
		},
		{
			name:   "provider failure requeues",
			leases: []*idlegrid.Lease{lease(idlegrid.LeaseSucceeded, "", "exit 0"), lease(idlegrid.LeaseFailed, idlegrid.FaultProvider, "image pull failed")},
			state:  idlegrid.JobQueued, reason: "requeued: image pull failed",
		},
		{
			name:   "lost requeues",
			leases: []*idlegrid.Lease{lease(idlegrid.LeaseLost, "", "node went silent")},
			state:  idlegrid.JobQueued, reason: "requeued: node went silent",
		},
		{
			name:   "workload failure beats a lost node",
			leases: []*idlegrid.Lease{lease(idlegrid.LeaseLost, "", "node went silent"), lease(idlegrid.LeaseFailed, idlegrid.FaultWorkload, "exit 1")},
			state:  idlegrid.JobFailed, reason: "exit 1",
		},
		{
			name: "the renter's cancel beats everything terminal",
			leases: []*idlegrid.Lease{
				lease(idlegrid.LeaseFailed, idlegrid.FaultWorkload, "exit 1"),
				lease(idlegrid.LeaseCancelled, "", "cancelled by the renter"),
				lease(idlegrid.LeaseLost, "", "silent"),
			},
			cancelRequested: true,
			state:           idlegrid.JobCancelled, reason: idlegrid.RenterCancelReason,
		},
		{
			name:            "the renter's cancel is not requeued by a lost node",
			leases:          []*idlegrid.Lease{lease(idlegrid.LeaseLost, idlegrid.FaultProvider, "node went silent")},
			cancelRequested: true,
			state:           idlegrid.JobCancelled, reason: idlegrid.RenterCancelReason,
		},
		{
			name:            "the renter's cancel is not requeued by a provider's failure",
			leases:          []*idlegrid.Lease{lease(idlegrid.LeaseFailed, idlegrid.FaultProvider, "abandoned")},
			cancelRequested: true,
			state:           idlegrid.JobCancelled, reason: idlegrid.RenterCancelReason,
		},
		{
			name:            "the renter's cancel waits for live leases",
			leases:          []*idlegrid.Lease{lease(idlegrid.LeaseCancelled, "", "cancelled"), lease(idlegrid.LeaseRunning, "", "")},
			cancelRequested: true,
			state:           idlegrid.JobRunning,
		},
		{
			name: "a gang's workload failure beats the stops it caused",
			leases: []*idlegrid.Lease{
				lease(idlegrid.LeaseCancelled, "", "another lease of the job ended: failed"),
				lease(idlegrid.LeaseFailed, idlegrid.FaultWorkload, "exited 2"),
			},
			state: idlegrid.JobFailed, reason: "exited 2",
		},
		{
			name: "the first lease to end gives the reason",
			leases: []*idlegrid.Lease{
				ended(lease(idlegrid.LeaseCancelled, "", "another lease of the job ended: cancelled"), 2),
				ended(lease(idlegrid.LeaseCancelled, "", "balance running out"), 1),
			},
			state: idlegrid.JobCancelled, reason: "balance running out",
		},
		{
			name:   "a lease stopped at its time limit fails the job",
			leases: []*idlegrid.Lease{limitStopped(60)},
			state:  idlegrid.JobFailed, reason: "ran past its time limit of 60s (its duration_seconds) and was stopped",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, reason := idlegrid.NextJobState(tt.leases, tt.cancelRequested)
			if state != tt.state || reason != tt.reason {
				t.Errorf("got %s %q, want %s %q", state, reason, tt.state, tt.reason)
			}
		})
	}
}

func TestLeaseState_Terminal(t *testing.T) {
	tests := map[idlegrid.LeaseState]bool{
		idlegrid.LeaseAssigned: false, idlegrid.LeaseRunning: false,
		idlegrid.LeaseSucceeded: true, idlegrid.LeaseFailed: true, idlegrid.LeaseCancelled: true, idlegrid.LeaseLost: true,
	}
	for s, want := range tests {
		if got := s.Terminal(); got != want {
			t.Errorf("%s.Terminal() = %v, want %v", s, got, want)
		}
	}
}

func TestLease_GPUSeconds(t *testing.T) {
	start := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	l := &idlegrid.Lease{GPUUUIDs: []string{"a", "b"}, LimitSeconds: 3600, StartedAt: &start}
	tests := []struct {
		name string
		end  time.Time
		want int64
	}{
		{"ten minutes", start.Add(10 * time.Minute), 1200},
		{"partial seconds drop", start.Add(1500 * time.Millisecond), 2},
		{"capped at the limit", start.Add(5 * time.Hour), 7200},
		{"end before start", start.Add(-time.Minute), 0},
		{"end at start", start, 0},
	}
	for _, tt := range tests {
		if got := l.GPUSeconds(tt.end); got != tt.want {
			t.Errorf("%s: GPUSeconds = %d, want %d", tt.name, got, tt.want)
		}
	}
	notStarted := &idlegrid.Lease{GPUUUIDs: []string{"a"}, LimitSeconds: 3600}
	if got := notStarted.GPUSeconds(start); got != 0 {
		t.Errorf("never started: GPUSeconds = %d, want 0", got)
	}
}
