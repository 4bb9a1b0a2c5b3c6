package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

func TestPrintLease_noticeAndCheckpoint(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	saved, notice := at.Add(20*time.Minute), at.Add(25*time.Minute)
	for _, tc := range []struct {
		name  string
		lease idlegrid.Lease
		want  []string
	}{
		{"bronze given notice after a checkpoint",
			idlegrid.Lease{ID: "lease_1", Tier: idlegrid.TierBronze, NoticeSeconds: 120, NoticeAt: &notice,
				StopRequested: "notice: preempted for gold job job_9", CheckpointRef: "s3://ckpt/step-400", CheckpointAt: &saved},
			[]string{`Stop asked +notice: preempted for gold job job_9\n`,
				`Notice +2m0s guaranteed, given 2026-12-01T09:25:00Z\n`,
				`Checkpoint +s3://ckpt/step-400, saved 2026-12-01T09:20:00Z\n`}},
		{"bronze that saved without a reference",
			idlegrid.Lease{ID: "lease_2", Tier: idlegrid.TierBronze, NoticeSeconds: 120, CheckpointAt: &saved},
			[]string{`Notice +2m0s guaranteed\n`, `Checkpoint +saved 2026-12-01T09:20:00Z\n`}},
		{"gold",
			idlegrid.Lease{ID: "lease_3", Tier: idlegrid.TierGold},
			[]string{`Stop asked +-\n`, `Notice +-\n`, `Checkpoint +none reported\n`}},
		{"its image pulled",
			idlegrid.Lease{ID: "lease_4", Tier: idlegrid.TierSilver, State: idlegrid.LeaseAssigned,
				Pull: &idlegrid.LeasePull{PulledBytes: 3 << 30, ImageBytes: 8 << 30, At: saved}},
			[]string{`Image pull +3.0 GiB of 8.0 GiB, moved 2026-12-01T09:20:00Z\n`, `Started +-\n`}},
		{"a lease that must start by a time",
			idlegrid.Lease{ID: "lease_5", Tier: idlegrid.TierSilver, State: idlegrid.LeaseAssigned, StartBy: &notice},
			[]string{`Start by +2026-12-01T09:25:00Z \(or it goes back to the queue, to keep the job's deadline, the node's window or another job's reservation\)\n`, `Started +-\n`}},
		{"taken back before it started",
			idlegrid.Lease{ID: "lease_6", Tier: idlegrid.TierGold, State: idlegrid.LeasePreempted, Reason: "the node had not started the lease by 09:25"},
			[]string{`State +taken back\n`, `Reason +the node had not started the lease by 09:25\n`}},
		{"preempted while it ran",
			idlegrid.Lease{ID: "lease_7", Tier: idlegrid.TierBronze, State: idlegrid.LeasePreempted, StartedAt: &saved},
			[]string{`State +preempted\n`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			ev := &idlegrid.LeaseEvent{LeaseID: tc.lease.ID, To: idlegrid.LeaseAssigned, At: at}
			if err := printLease(&out, &tc.lease, []*idlegrid.LeaseEvent{ev}); err != nil {
				t.Fatal(err)
			}
			for _, w := range append(tc.want, `(?s)Events:\n.*2026-12-01T09:00:00.000Z +- +assigned`) {
				if !regexp.MustCompile(w).MatchString(out.String()) {
					t.Errorf("printed:\n%s\nwant a match for %q", out.String(), w)
				}
			}
		})
	}
}

// TestPrintLeases_takenBack: the list calls a lease preempted before it
// started "taken back", and one preempted while it ran "preempted".
func TestPrintLeases_takenBack(t *testing.T) {
	started := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	leases := []*idlegrid.Lease{
		{ID: "lease_1", NodeID: "node_a", Tier: idlegrid.TierGold, State: idlegrid.LeasePreempted},
		{ID: "lease_2", NodeID: "node_a", Tier: idlegrid.TierBronze, State: idlegrid.LeasePreempted, StartedAt: &started},
	}
	var out bytes.Buffer
	if err := printLeases(&env{Stdio: Stdio{Out: &out}}, leases, nodeNames{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`(?m)^lease_1 .* taken back +0 `, `(?m)^lease_2 .* preempted +0 `} {
		if !regexp.MustCompile(w).MatchString(out.String()) {
			t.Errorf("printed:\n%s\nwant a match for %q", out.String(), w)
		}
	}
}

// TestLeaseList: a provider and a renter each list the lease between
// them; a full page ends with the command for the next; every lease state
// is a filter, preempted too; a cursor the caller may not see is refused.
func TestLeaseList(t *testing.T) {
	_, renter, provider, _, _ := moneyMarket(t)
	var ids []string
	for _, who := range []map[string]string{provider, renter} {
		r := run(t, who, "lease", "ls", "--json")
		var leases []idlegrid.Lease
		if r.code != 0 || json.Unmarshal([]byte(r.out), &leases) != nil || len(leases) != 1 {
			t.Fatalf("lease ls: %s, want moneyMarket's one lease", r)
		}
		ids = append(ids, leases[0].ID)
	}
	if ids[0] != ids[1] {
		t.Errorf("the provider lists %s, the renter %s; want the same lease", ids[0], ids[1])
	}
	r := run(t, provider, "lease", "ls", "--limit", "1", "--state", "succeeded,failed")
	want := "more may follow: idlegrid lease ls --state succeeded,failed --limit 1 --before " + ids[0]
	if r.code != 0 || !strings.Contains(r.out, ids[0]) || !strings.Contains(r.out, want) {
		t.Errorf("lease ls --limit 1: %s\nwant the lease, then %q", r, want)
	}
	if r := run(t, provider, "lease", "ls", "--before", ids[0], "--json"); r.code != 0 || strings.TrimSpace(r.out) != "[]" {
		t.Errorf("the page after the only lease: %s, want none", r)
	}
	if r := run(t, renter, "lease", "ls", "--state", "preempted", "--json"); r.code != 0 || strings.TrimSpace(r.out) != "[]" {
		t.Errorf("lease ls --state preempted: %s, want an empty list", r)
	}
	// None matched: said so, with the filters, rather than a bare header.
	if r := run(t, renter, "lease", "ls", "--node", "nope"); r.code != 0 ||
		r.out != "no lease matches --node nope (check the IDs with 'idlegrid node ls' or 'idlegrid job ls')\n" {
		t.Errorf("lease ls --node nope: %s", r)
	}
	if r := run(t, renter, "lease", "ls", "--state", "preempted"); r.code != 0 || r.out != "no lease matches --state preempted\n" {
		t.Errorf("lease ls --state preempted: %s", r)
	}
	if r := run(t, renter, "lease", "ls", "--state", "done"); r.code != 2 || !strings.Contains(r.err, `unknown lease state "done"`) {
		t.Errorf("lease ls --state done: %s", r)
	}
	if r := run(t, renter, "lease", "ls", "--before", "lease_nosuch"); r.code == 0 || !strings.Contains(r.err, "before: no lease lease_nosuch of yours") {
		t.Errorf("lease ls --before a lease that is not there: %s", r)
	}
}
