package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

func mustFile(tb testing.TB, name, content string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// TestNodeSchedule runs the real server with a provider whose node has
// joined offered always, and has the provider set, read and clear the
// node's windows.
func TestNodeSchedule(t *testing.T) {
	url, providerKey, renterKey, nodeID := reputationMarket(t, nil)
	owner := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": providerKey}
	renter := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": renterKey}

	t.Run("Show", func(t *testing.T) {
		got := must(t, owner, "node", "schedule", nodeID)
		for _, want := range []string{nodeID, "In force", "always", "the agent's config", "Agent publishes"} {
			if !strings.Contains(got, want) {
				t.Errorf("node schedule printed:\n%s\nwant %q", got, want)
			}
		}
	})

	t.Run("SetYAML", func(t *testing.T) {
		file := mustFile(t, "nights.yaml", "mode: windows\ntime_zone: Europe/Berlin\nweekly:\n"+
			"  - {days: [mon, tue, wed, thu, fri], start: \"19:00\", end: \"07:00\"}\n"+
			"  - {days: [sat, sun], start: \"00:00\", end: \"00:00\"}\n")
		got := must(t, owner, "node", "schedule", nodeID, "--set", file)
		for _, want := range []string{"windows in Europe/Berlin: mon,tue,wed,thu,fri 19:00–07:00; sat,sun 00:00–00:00", "you (the owner)"} {
			if !strings.Contains(got, want) {
				t.Errorf("node schedule --set printed:\n%s\nwant %q", got, want)
			}
		}
		var ns idlegrid.NodeSchedule
		mustJSON(t, owner, &ns, "node", "schedule", nodeID)
		if ns.Owner == nil || ns.Schedule.Mode != idlegrid.ScheduleWindows || ns.Schedule.TimeZone != "Europe/Berlin" ||
			len(ns.Schedule.Weekly) != 2 || ns.Published.Mode != idlegrid.ScheduleAlways {
			t.Errorf("node schedule --json = %+v, want the owner's two windows in force over the agent's always", ns)
		}
	})

	t.Run("SetJSON", func(t *testing.T) {
		file := mustFile(t, "weekend.json", `{"mode":"windows","weekly":[{"days":["sat"],"start":"08:00","end":"20:00"}]}`)
		var ns idlegrid.NodeSchedule
		mustJSON(t, owner, &ns, "node", "schedule", nodeID, "--set", file)
		if ns.Owner == nil || len(ns.Schedule.Weekly) != 1 || ns.Schedule.Weekly[0].Start != "08:00" {
			t.Errorf("node schedule --set --json = %+v, want Saturday 08:00–20:00", ns)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		tests := []struct {
			name string
			env  map[string]string
			args []string
			code int
			want string // in stderr
		}{
			{"a bad day", owner, []string{"--set", mustFile(t, "bad.yaml", "mode: windows\nweekly:\n  - {days: [someday], start: \"08:00\", end: \"09:00\"}\n")},
				1, "schedule.weekly[0].days"},
			{"an unknown field", owner, []string{"--set", mustFile(t, "typo.yaml", "mode: windows\ntimezone: UTC\n")}, 1, `unknown field "timezone"`},
			{"an empty file", owner, []string{"--set", mustFile(t, "empty.yaml", "\n")}, 1, "schedule file is empty"},
			{"no such file", owner, []string{"--set", filepath.Join(t.TempDir(), "nope.yaml")}, 2, "no such file"},
			{"both --set and --clear", owner, []string{"--set", "x.yaml", "--clear"}, 2, "exclude each other"},
			{"a renter", renter, []string{"--clear"}, 1, "a renter account may not"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := run(t, tt.env, append([]string{"node", "schedule", nodeID}, tt.args...)...)
				if r.code != tt.code || !strings.Contains(r.err, tt.want) {
					t.Errorf("got %s\nwant exit %d and %q", r, tt.code, tt.want)
				}
			})
		}
		var ns idlegrid.NodeSchedule
		mustJSON(t, owner, &ns, "node", "schedule", nodeID)
		if ns.Owner == nil || ns.Owner.Weekly[0].Days[0] != "sat" {
			t.Errorf("after refused changes the schedule is %+v, want Saturday's still", ns)
		}
	})

	t.Run("Clear", func(t *testing.T) {
		var ns idlegrid.NodeSchedule
		mustJSON(t, owner, &ns, "node", "schedule", nodeID, "--clear")
		if ns.Owner != nil || ns.Schedule.Mode != idlegrid.ScheduleAlways {
			t.Errorf("node schedule --clear = %+v, want the agent's always again", ns)
		}
	})
}
