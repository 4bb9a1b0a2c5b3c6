package agent

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestNoteStanding: the agent's log says once when its node begins to
// drain or is quarantined, with what to run next, and once when that ends.
func TestNoteStanding(t *testing.T) {
	var buf bytes.Buffer
	a := &Agent{nodeID: "node_1", log: slog.New(slog.NewTextHandler(&buf, nil))}
	since := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	draining := idlegrid.NodeStanding{DrainingSince: &since}
	both := idlegrid.NodeStanding{DrainingSince: &since, Quarantined: true}
	steps := []struct {
		standing idlegrid.NodeStanding
		want     []string // in the lines logged; none when nil
	}{
		{idlegrid.NodeStanding{}, nil},
		{draining, []string{"level=WARN", "the node is draining", "since=2026-12-03T17:00:00Z", `undo="idlegrid node drain node_1 --undo"`}},
		{draining, nil},
		{both, []string{"level=WARN", "the node is quarantined", `evidence="idlegrid node hardware node_1"`}},
		{both, nil},
		{idlegrid.NodeStanding{Quarantined: true}, []string{"level=INFO", "drain was undone", "offered=false"}},
		{idlegrid.NodeStanding{}, []string{"level=INFO", "quarantine was lifted", "offered=true"}},
	}
	for i, s := range steps {
		buf.Reset()
		a.noteStanding(s.standing)
		got := buf.String()
		if s.want == nil && got != "" {
			t.Errorf("step %d, standing unchanged: logged %q, want nothing", i, got)
		}
		if strings.Count(got, "\n") > 1 {
			t.Errorf("step %d: logged %q, want one line", i, got)
		}
		for _, w := range s.want {
			if !strings.Contains(got, w) {
				t.Errorf("step %d: logged %q, want %q in it", i, got, w)
			}
		}
	}
}
