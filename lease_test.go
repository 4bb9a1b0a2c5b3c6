package idlegrid_test

import (
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

func lease(state idlegrid.LeaseState, fault idlegrid.Fault, reason string) *idlegrid.Lease {
	return &idlegrid.Lease{State: state, Fault: fault, Reason: reason}
}

func TestNextJobState(t *testing.T) {
	tests := []struct {
		name   string
		leases []*idlegrid.Lease
		state  idlegrid.JobState
		reason string
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
			name: "cancel beats everything terminal",
			leases: []*idlegrid.Lease{
				lease(idlegrid.LeaseFailed, idlegrid.FaultWorkload, "exit 1"),
				lease(idlegrid.LeaseCancelled, "", "renter cancelled"),
				lease(idlegrid.LeaseLost, "", "silent"),
			},
			state: idlegrid.JobCancelled, reason: "renter cancelled",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, reason := idlegrid.NextJobState(tt.leases)
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
