package cli

import (
	"bytes"
	"regexp"
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
