package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"gopkg.in/yaml.v3"
)

// maxScheduleFileBytes bounds a schedule file: a week of windows and a
// few hundred one-off windows fit many times over.
const maxScheduleFileBytes = 256 << 10

// schedule is "idlegrid node schedule": show, set or clear the owner's
// schedule of a node (docs/dashboard.md, "The window editor").
func (c *nodeCommand) schedule(ctx context.Context, args []string) error {
	fs := c.env.flags("node schedule", help{
		usage: "idlegrid node schedule ID|NAME [--set FILE|--clear] [--json]",
		about: `Show when a node is offered: the schedule in force, the one you set (if
any) and the one its agent publishes from its config. --set FILE sets your
schedule, which replaces the agent's until --clear; FILE (or - for stdin)
holds the schedule as YAML or JSON:

    mode: windows            # always, or windows
    time_zone: Europe/Berlin # IANA name; UTC when absent
    weekly:                  # an end at or before the start runs past midnight
      - {days: [mon, tue, wed, thu, fri], start: "19:00", end: "07:00"}
      - {days: [sat, sun], start: "00:00", end: "00:00"}

An agent that withdraws every GPU (its owner is using the machine) still
closes the node. Providers set their own nodes' schedules; admins may read.`,
		examples: "idlegrid node schedule node_abc123\n\t\tidlegrid node schedule node_abc123 --set nights.yaml\n\t\tidlegrid node schedule node_abc123 --clear",
	})
	r := c.env.remoteFlags(fs)
	set := fs.String("set", "", "set your schedule from this YAML or JSON file (- for stdin)")
	remove := fs.Bool("clear", false, "remove your schedule, so that the agent's applies again")
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 1, 1, "one node: its ID or its name"); err != nil {
		return err
	} else if *set != "" && *remove {
		return usagef("--set and --clear exclude each other: set a schedule, or remove yours")
	}
	var s idlegrid.Schedule
	if *set != "" {
		if s, err = c.readSchedule(*set); err != nil {
			return err
		}
	}
	cl, id, err := r.nodeClient(ctx, args[0])
	if err != nil {
		return err
	}
	var ns *idlegrid.NodeSchedule
	switch {
	case *set != "":
		ns, err = cl.SetNodeSchedule(ctx, id, s)
	case *remove:
		ns, err = cl.RemoveNodeSchedule(ctx, id)
	default:
		ns, err = cl.NodeSchedule(ctx, id)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, ns)
	}
	return printNodeSchedule(c.env.Out, ns)
}

// readSchedule reads a schedule file: YAML or JSON with the API's field
// names, unknown fields refused.
func (c *nodeCommand) readSchedule(name string) (idlegrid.Schedule, error) {
	var in io.Reader
	if name == "-" {
		if c.env.In == nil {
			return idlegrid.Schedule{}, usagef("--set -: nothing on standard input")
		}
		in = c.env.In
	} else {
		f, err := os.Open(name)
		if err != nil {
			return idlegrid.Schedule{}, usagef("--set: %v", err)
		}
		defer f.Close()
		in = f
	}
	data, err := io.ReadAll(io.LimitReader(in, maxScheduleFileBytes+1))
	if err != nil {
		return idlegrid.Schedule{}, err
	} else if len(data) > maxScheduleFileBytes {
		return idlegrid.Schedule{}, idlegrid.Invalid("schedule", "schedule file is over %d bytes", maxScheduleFileBytes)
	}
	return parseSchedule(data)
}

// parseSchedule decodes a schedule from YAML or JSON. YAML goes through
// JSON so that both spell the fields as the API does (time_zone, one_off).
func parseSchedule(data []byte) (idlegrid.Schedule, error) {
	var s idlegrid.Schedule
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return s, idlegrid.Invalid("schedule", "schedule file is empty")
	}
	if trimmed[0] != '{' {
		var doc any
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return s, idlegrid.Invalid("schedule", "not YAML or JSON: %v", err)
		}
		if _, ok := doc.(map[string]any); !ok {
			return s, idlegrid.Invalid("schedule", "want a mapping with mode, time_zone, weekly, one_off; got %T", doc)
		}
		var err error
		if trimmed, err = json.Marshal(doc); err != nil {
			return s, idlegrid.Invalid("schedule", "%v", err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, idlegrid.Invalid("schedule", "%v (fields: mode, time_zone, weekly[{days, start, end}], one_off[{start, end}])", err)
	} else if dec.More() {
		return s, idlegrid.Invalid("schedule", "schedule file holds more than one JSON object")
	}
	return s, nil
}

// printNodeSchedule writes a node's schedules for people.
func printNodeSchedule(w io.Writer, ns *idlegrid.NodeSchedule) error {
	t := newTable(w, "Node", ns.NodeID)
	t.row("In force", scheduleLine(ns.Schedule))
	if ns.Owner != nil {
		t.row("Set by", "you (the owner), "+ns.UpdatedAt.UTC().Format(time.RFC3339))
		t.row("Yours", scheduleLine(*ns.Owner))
	} else {
		t.row("Set by", "the agent's config")
	}
	t.row("Agent publishes", scheduleLine(ns.Published))
	if err := t.flush(); err != nil {
		return err
	}
	if ns.Owner != nil && !equalSchedules(ns.Schedule, *ns.Owner) {
		_, err := fmt.Fprintln(w, "\nYour schedule is not in force: the agent has withdrawn every GPU (its owner is using the machine, or they failed a check).")
		return err
	}
	return nil
}

// scheduleLine is a schedule in one line: "always", or its windows and
// time zone.
func scheduleLine(s idlegrid.Schedule) string {
	if s.Mode != idlegrid.ScheduleWindows {
		return firstNonEmpty(string(s.Mode), "always")
	}
	var parts []string
	for _, w := range s.Weekly {
		parts = append(parts, strings.Join(w.Days, ",")+" "+w.Start+"–"+w.End)
	}
	for _, o := range s.OneOff {
		parts = append(parts, o.Start.UTC().Format(time.RFC3339)+"–"+o.End.UTC().Format(time.RFC3339))
	}
	if len(parts) == 0 {
		parts = []string{"no windows (never offered)"}
	}
	return "windows in " + firstNonEmpty(s.TimeZone, "UTC") + ": " + strings.Join(parts, "; ")
}

func equalSchedules(a, b idlegrid.Schedule) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errors.Join(errA, errB) == nil && bytes.Equal(x, y)
}
