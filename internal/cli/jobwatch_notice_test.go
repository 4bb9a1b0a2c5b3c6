package cli

import (
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// TestLeaseChanges_stopIsNotANotice: the store sets a lease's NoticeAt for
// every stop, so the watch told a silver cancel as "notice on …: it stops
// by … (0s guaranteed)". Only a stop whose reason is a notice is one; any
// other says "stopping on" with its reason, also when it replaces a
// notice (the renter cancelled a bronze job under notice).
func TestLeaseChanges_stopIsNotANotice(t *testing.T) {
	running := idlegrid.Lease{ID: "lease_a", NodeID: "node_a", Tier: idlegrid.TierSilver, State: idlegrid.LeaseRunning, StartedAt: at(10)}
	cancelled := running
	cancelled.NoticeAt, cancelled.StopRequested = at(60), "cancelled by the renter"
	noticed := running
	noticed.Tier, noticed.NoticeSeconds = idlegrid.TierBronze, 120
	noticed.NoticeAt, noticed.StopRequested = at(60), idlegrid.NoticeStopPrefix+"preempted for gold job job_9"
	replaced := noticed
	replaced.StopRequested = "cancelled by the renter"
	for _, tt := range []struct {
		name       string
		prev, next *idlegrid.Lease
		want       string
	}{
		{"silver cancel", &running, &cancelled, "stopping on node_a: cancelled by the renter"},
		{"bronze notice", &running, &noticed, "notice on node_a: it stops by " + at(180).Local().Format("15:04:05") +
			" (2m0s guaranteed): notice: preempted for gold job job_9"},
		{"cancel under notice", &noticed, &replaced, "stopping on node_a: cancelled by the renter"},
		{"the same notice again", &noticed, &noticed, ""},
		{"a cancel seen first", nil, &cancelled, "placed on node_a: 0 GPU(s) at $0.000000/GPU-h, silver, attempt 0\n" +
			"started on node_a\nstopping on node_a: cancelled by the renter"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(texts(leaseChanges(tt.prev, tt.next, nodeNames{})), "\n")
			if got != tt.want {
				t.Errorf("changes:\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// A lease taken back before it started (its node was slow to start it)
// is not said to be preempted: it never ran, and a gold job is never
// preempted while it runs.
func TestLeaseChanges_takenBackUnstarted(t *testing.T) {
	assigned := idlegrid.Lease{ID: "lease_a", NodeID: "node_a", Tier: idlegrid.TierGold, State: idlegrid.LeaseAssigned}
	taken := assigned
	taken.State, taken.Reason = idlegrid.LeasePreempted, "the node had not started the lease by 12:00; started now, it would run past the close of the node's window"
	want := "taken back from node_a before it started: " + taken.Reason + "; charged $0.000000"
	if got := strings.Join(texts(leaseChanges(&assigned, &taken, nodeNames{})), "\n"); got != want {
		t.Errorf("changes:\n%s\nwant\n%s", got, want)
	}
	ran := taken
	ran.StartedAt = at(10)
	if got := strings.Join(texts(leaseChanges(&assigned, &ran, nodeNames{})), "\n"); !strings.HasPrefix(got, "preempted on node_a: ") {
		t.Errorf("a lease preempted after it started: %q, want it said preempted", got)
	}
}
