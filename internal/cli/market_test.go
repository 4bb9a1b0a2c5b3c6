package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

func TestPrintExplanation_advice(t *testing.T) {
	var out bytes.Buffer
	e := &env{Stdio: Stdio{Out: &out, Err: &bytes.Buffer{}}}
	x := &wire.Explanation{JobID: "job_1", Summary: "no room now", Rejections: map[string]int{"window too short": 2},
		EstimateNote: "unknown: no node that matches will have room", Advice: []string{"say how often it checkpoints", "ask for fewer GPUs"}}
	if err := printExplanation(e, x); err != nil {
		t.Fatal(err)
	}
	want := "estimated start: unknown: no node that matches will have room\n" +
		"to start sooner: say how often it checkpoints\nto start sooner: ask for fewer GPUs\n"
	if got := out.String(); !strings.HasSuffix(got, want) {
		t.Errorf("printed:\n%s\nwant it to end:\n%s", got, want)
	}
}

func TestEstimatedStart(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 30, 0, 0, time.UTC)
	for _, tt := range []struct {
		x    wire.Explanation
		want string
	}{
		{wire.Explanation{EstimatedStart: at, EstimateNote: "when its reserved GPUs should be free"}, "2026-12-02T09:30:00Z (when its reserved GPUs should be free)"},
		{wire.Explanation{EstimatedStart: at}, "2026-12-02T09:30:00Z"},
		{wire.Explanation{EstimateNote: "unknown: every node asks more than the cap"}, "unknown: every node asks more than the cap"},
		{wire.Explanation{}, "unknown: no matching node would take it"},
	} {
		if got := estimatedStart(&tt.x); got != tt.want {
			t.Errorf("estimatedStart(%+v) = %q, want %q", tt.x, got, tt.want)
		}
	}
}

// A queued job's details point to job explain; a running job's do not.
func TestPrintJob_explainHint(t *testing.T) {
	for _, state := range []idlegrid.JobState{idlegrid.JobQueued, idlegrid.JobRunning} {
		var out bytes.Buffer
		e := &env{Stdio: Stdio{Out: &out, Err: &bytes.Buffer{}}}
		j := &idlegrid.Job{ID: "job_1", State: state, Reason: "no room now"}
		if err := printJob(e, j); err != nil {
			t.Fatal(err)
		}
		hint := strings.Contains(out.String(), "idlegrid job explain job_1")
		if want := state == idlegrid.JobQueued; hint != want {
			t.Errorf("%s job: hint to explain printed %v, want %v:\n%s", state, hint, want, out.String())
		}
	}
}

// A queued job that ran before points to why its leases ended; one that
// never ran, or one running, does not.
func TestPrintJob_requeuedHint(t *testing.T) {
	for _, tt := range []struct {
		state    idlegrid.JobState
		attempts int
		want     bool
	}{{idlegrid.JobQueued, 1, true}, {idlegrid.JobQueued, 0, false}, {idlegrid.JobRunning, 2, false}} {
		var out bytes.Buffer
		e := &env{Stdio: Stdio{Out: &out, Err: &bytes.Buffer{}}}
		j := &idlegrid.Job{ID: "job_1", State: tt.state, Attempts: tt.attempts}
		if err := printJob(e, j); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(out.String(), "went back to the queue; why each lease ended: idlegrid job leases job_1"); got != tt.want {
			t.Errorf("%s job of %d attempts: hint to its leases printed %v, want %v:\n%s", tt.state, tt.attempts, got, tt.want, out.String())
		}
	}
}

// A requeued job's details say what its checkpoint holds, and where.
func TestPrintJob_resumes(t *testing.T) {
	for _, tt := range []struct {
		node, want string
	}{
		{"", "from its checkpoint, 20m0s of its 1h0m0s run done\n"},
		{"node_a", "from its checkpoint, 20m0s of its 1h0m0s run done (on node node_a, which the market prefers; elsewhere it starts over)\n"},
	} {
		var out bytes.Buffer
		e := &env{Stdio: Stdio{Out: &out, Err: &bytes.Buffer{}}}
		j := &idlegrid.Job{ID: "job_1", State: idlegrid.JobQueued, ResumeSeconds: 1200, CheckpointNodeID: tt.node,
			JobSpec: idlegrid.JobSpec{DurationSeconds: 3600}}
		if err := printJob(e, j); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "Resumes") || !strings.Contains(out.String(), tt.want) {
			t.Errorf("job get of a job resuming on %q:\n%s\nwant a Resumes row %q", tt.node, out.String(), tt.want)
		}
	}
}

// A running job the renter cancelled says so, and when, until its leases
// stop and it ends.
func TestPrintJob_cancelRequested(t *testing.T) {
	var out bytes.Buffer
	e := &env{Stdio: Stdio{Out: &out, Err: &bytes.Buffer{}}}
	at := time.Date(2026, 12, 4, 14, 0, 0, 0, time.UTC)
	j := &idlegrid.Job{ID: "job_1", State: idlegrid.JobRunning, CancelRequestedAt: &at}
	if err := printJob(e, j); err != nil {
		t.Fatal(err)
	}
	if want := "Cancelled   " + stamp(&at) + " by the renter"; !strings.Contains(out.String(), want) {
		t.Errorf("job get of a cancelled running job:\n%s\nwant a row %q", out.String(), want)
	}
}

// TestQueued: a cell's queued demand in the market table, singular for
// one, and a dash for none.
func TestQueued(t *testing.T) {
	for _, tt := range []struct {
		jobs, gpus int
		want       string
	}{
		{0, 0, "-"},
		{1, 1, "1 job/1 GPU"},
		{1, 16, "1 job/16 GPUs"},
		{3, 10, "3 jobs/10 GPUs"},
	} {
		if got := queued(tt.jobs, tt.gpus); got != tt.want {
			t.Errorf("queued(%d, %d) = %q, want %q", tt.jobs, tt.gpus, got, tt.want)
		}
	}
}
