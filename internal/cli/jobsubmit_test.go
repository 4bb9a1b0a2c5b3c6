package cli

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// TestJobSubmit_stuckNote: a job no node would take as the market stands
// is accepted with a note that says why; one a node would take is not.
func TestJobSubmit_stuckNote(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t) // one RTX4090 node, asking $0.40 for silver
	submit := func(args ...string) result {
		t.Helper()
		r := run(t, renter, append([]string{"job", "submit", "--image", "python:3.12", "--duration", "1m"}, args...)...)
		if r.code != 0 || !strings.Contains(r.out, "job_") {
			t.Fatalf("job submit %v: %s", args, r)
		}
		return r
	}
	r := submit("--gpu-model", "H200", "--max-price", "5")
	if !strings.Contains(r.out, "note: as the market stands no node will take it: no online node meets its hardware and rules") ||
		!strings.Contains(r.out, "idlegrid job explain job_") {
		t.Errorf("a job for a model no node has:\n%s", r.out)
	}
	r = submit("--gpu-model", "RTX4090", "--max-price", "0.10")
	if !strings.Contains(r.out, "no node will take it: every node that meets its hardware and rules asks more than the cap") {
		t.Errorf("a job capped under every ask:\n%s", r.out)
	}
	// Explain names the node whose ask it would need to beat.
	capped := regexp.MustCompile(`job_[a-z0-9]+`).FindString(r.out)
	if x := run(t, renter, "job", "explain", capped); x.code != 0 || !regexp.MustCompile(`(?m)^rig +node_[a-z0-9]+ +eu-west +RTX4090 +\$0\.400000 `).MatchString(x.out) {
		t.Errorf("job explain of the capped job: %s", x)
	}
	if r = submit("--gpu-model", "RTX4090", "--max-price", "5"); strings.Contains(r.out, "note:") {
		t.Errorf("a job the node would take:\n%s", r.out)
	}
	if r = submit("--gpu-model", "H200", "--max-price", "5", "--json"); strings.Contains(r.out, "note:") {
		t.Errorf("job submit --json printed a note into its JSON:\n%s", r.out)
	}
	// With --wait the watch says why it waits, so the note is not said twice.
	r = run(t, renter, "job", "submit", "--image", "python:3.12", "--duration", "1m", "--gpu-model", "H200", "--max-price", "5",
		"--wait", "--every", "500ms", "--timeout", "1500ms")
	if r.code != 1 || strings.Contains(r.out, "note: as the market stands") || !strings.Contains(r.out, "waits: ") {
		t.Errorf("job submit --wait of a job no node would take: %s", r)
	}
}

func TestStuckNote(t *testing.T) {
	never := "unknown: no online node meets its hardware and rules; relax those that rule out the most nodes"
	for _, tc := range []struct {
		name string
		x    wire.Explanation
		want string
	}{
		{"no node matches", wire.Explanation{EstimateNote: never}, never[len("unknown: "):]},
		{"a node fits now", wire.Explanation{Fits: 1, EstimateNote: never}, ""},
		{"a start is estimated", wire.Explanation{EstimatedStart: time.Unix(1, 0), EstimateNote: "when a lease ends"}, ""},
		{"a reservation is held", wire.Explanation{Reservation: &wire.Reservation{}, EstimateNote: never}, ""},
	} {
		if got := stuckNote(&tc.x); got != tc.want {
			t.Errorf("%s: note = %q, want %q", tc.name, got, tc.want)
		}
	}
}
