package trace

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/idlegrid/idlegrid"
)

// ReadDemandCSV reads the generic demand format: a CSV file with a header,
// one job per row. Columns (case-insensitive, in any order; others are
// ignored):
//
//	submit      required  seconds from the start of the trace, or an RFC 3339 time
//	duration    required  run time: whole seconds, or a duration such as 90m
//	gpus        required  GPUs on one node, 1 to 16
//	gpu_models  optional  allowed models separated by '|', e.g. V100-32GB|A100-80GB; empty: any
//	tier        optional  gold, silver or bronze; empty: silver
//	max_price   optional  the renter's cap per GPU-hour, e.g. 2.50; empty: set from on-demand prices
//	region      optional  e.g. eu-west; empty: any
//	checkpoint_every  optional  how often it saves work it can resume from: seconds,
//	                  or a duration such as 30m; empty: as the replay's --checkpoint-every
//	id          optional  a name for the job; empty: "line-N"
func ReadDemandCSV(r io.Reader, source string, opts Options) (*Demand, error) {
	d := &Demand{Source: source}
	t, err := newTable(r, source, opts, &d.Report, "submit", "duration", "gpus")
	if err != nil {
		return nil, err
	}
	if t.has("gpu_model") && !t.has("gpu_models") { // ignored, it would let every job run on any model
		return nil, idlegrid.Invalid(source+" line 1", "gpu_model: the demand's column is gpu_models, the models a job accepts separated by '|' (gpu_model is the supply's)")
	}
	var kind timeKind
	if err := t.each(func() error {
		j, err := demandRow(t, &kind)
		if err == nil {
			d.Jobs = append(d.Jobs, j)
		}
		return err
	}); err != nil {
		return nil, err
	}
	d.Relative = kind == timeSeconds
	sortJobs(d.Jobs)
	return d, nil
}

func demandRow(t *table, kind *timeKind) (Job, error) {
	j := Job{ID: t.get("id")}
	if j.ID == "" {
		j.ID = "line-" + strconv.Itoa(t.line)
	}
	var err error
	if j.Submit, err = parseTime(t.get("submit"), kind); err != nil {
		return j, t.errf("submit", "%v", err)
	}
	if j.DurationSeconds, err = parseDuration(t.get("duration")); err != nil {
		return j, t.errf("duration", "%v", err)
	}
	gpus, err := t.int("gpus", 1, idlegrid.MaxGPUsPerNode)
	if err != nil {
		return j, err
	}
	j.GPUs = int(gpus)
	j.GPUModels = models(t.get("gpu_models"), func(m string) string { return CanonicalModel(m, 0) })
	if tier := idlegrid.Tier(t.get("tier")); tier != "" {
		if !tier.Valid() {
			return j, t.errf("tier", "must be gold, silver or bronze, got %q", tier)
		}
		j.Tier = tier
	}
	if j.MaxPrice, err = t.money("max_price"); err != nil {
		return j, err
	}
	if j.Region = t.get("region"); j.Region != "" && !regionOK(j.Region) {
		return j, t.errf("region", "must be lower-case letters, digits and '-', e.g. eu-west, got %q", j.Region)
	}
	if v := t.get("checkpoint_every"); v != "" {
		if j.CheckpointEverySeconds, err = parseDuration(v); err != nil {
			return j, t.errf("checkpoint_every", "%v", err)
		}
	}
	return j, nil
}

// ReadSupplyCSV reads the generic supply format: a CSV file with a header,
// one window of one node per row; the rows of a node may be anywhere in
// the file. Columns (case-insensitive, in any order; others are ignored):
//
//	node          required  the node's name
//	gpu_model     required  e.g. RTX4090, V100-32GB
//	gpus          required  GPUs on the node, 1 to 64
//	window_start  required  seconds from the start of the trace, or an RFC 3339 time
//	window_end    required  likewise; after window_start
//	region        optional  e.g. eu-west; empty: assigned by the simulator
//	ask           optional  the silver floor per GPU-hour in this window, e.g. 0.40;
//	                        empty: set from marketplace prices
//
// A node's model, GPUs and region must be the same on all its rows, and its
// windows must not overlap.
func ReadSupplyCSV(r io.Reader, source string, opts Options) (*Supply, error) {
	s := &Supply{Source: source}
	t, err := newTable(r, source, opts, &s.Report, "node", "gpu_model", "gpus", "window_start", "window_end")
	if err != nil {
		return nil, err
	}
	byID := map[string]int{}
	lines := map[string][]int{} // node → line of each window, for overlap errors
	var kind timeKind
	if err := t.each(func() error {
		n, err := supplyRow(t, &kind)
		if err != nil {
			return err
		}
		i, seen := byID[n.ID]
		if seen {
			if err := sameNode(t, &s.Nodes[i], &n); err != nil {
				return err
			}
		} else {
			i = len(s.Nodes)
			byID[n.ID] = i
			s.Nodes = append(s.Nodes, Node{ID: n.ID, GPUModel: n.GPUModel, GPUs: n.GPUs, Region: n.Region})
		}
		s.Nodes[i].Windows = append(s.Nodes[i].Windows, n.Windows[0])
		lines[n.ID] = append(lines[n.ID], t.line)
		return nil
	}); err != nil {
		return nil, err
	}
	s.Relative = kind == timeSeconds
	for i := range s.Nodes {
		if err := s.checkWindows(&s.Nodes[i], lines[s.Nodes[i].ID], opts); err != nil {
			return nil, err
		}
	}
	s.Nodes = slices.DeleteFunc(s.Nodes, func(n Node) bool { return len(n.Windows) == 0 })
	return s, nil
}

func supplyRow(t *table, kind *timeKind) (Node, error) {
	n := Node{ID: t.get("node")}
	if n.ID == "" || len(n.ID) > 63 {
		return n, t.errf("node", "must be a name of 1 to 63 characters, got %q", n.ID)
	}
	if n.GPUModel = CanonicalModel(t.get("gpu_model"), 0); t.get("gpu_model") == "" {
		return n, t.errf("gpu_model", "required, e.g. RTX4090")
	}
	gpus, err := t.int("gpus", 1, 64)
	if err != nil {
		return n, err
	}
	n.GPUs = int(gpus)
	if n.Region = t.get("region"); n.Region != "" && !regionOK(n.Region) {
		return n, t.errf("region", "must be lower-case letters, digits and '-', e.g. eu-west, got %q", n.Region)
	}
	var w Window
	if w.Start, err = parseTime(t.get("window_start"), kind); err != nil {
		return n, t.errf("window_start", "%v", err)
	}
	if w.End, err = parseTime(t.get("window_end"), kind); err != nil {
		return n, t.errf("window_end", "%v", err)
	}
	if !w.End.After(w.Start) {
		return n, t.errf("window_end", "must be after window_start")
	}
	if w.Ask, err = t.money("ask"); err != nil {
		return n, err
	}
	n.Windows = []Window{w}
	return n, nil
}

// sameNode checks that a later row of a node agrees with its first.
func sameNode(t *table, first, n *Node) error {
	switch {
	case first.GPUModel != n.GPUModel:
		return t.errf("gpu_model", "node %s was %s on an earlier row, now %s", n.ID, first.GPUModel, n.GPUModel)
	case first.GPUs != n.GPUs:
		return t.errf("gpus", "node %s had %d GPUs on an earlier row, now %d", n.ID, first.GPUs, n.GPUs)
	case first.Region != n.Region:
		return t.errf("region", "node %s was in %q on an earlier row, now %q", n.ID, first.Region, n.Region)
	}
	return nil
}

// checkWindows sorts a node's windows and refuses overlaps: the later row
// in the file of an overlapping pair is the bad row, and with BadRowsSkip
// it is skipped.
func (s *Supply) checkWindows(n *Node, lines []int, opts Options) error {
	if !overlapping(n.Windows) {
		slices.SortStableFunc(n.Windows, func(a, b Window) int { return a.Start.Compare(b.Start) })
		return nil
	}
	var kept []Window // sorted by start
	var keptLines []int
	for i, w := range n.Windows {
		k, _ := slices.BinarySearchFunc(kept, w.Start, func(x Window, t time.Time) int { return x.Start.Compare(t) })
		if o := overlapAt(kept, k, w); o >= 0 {
			err := rowError(s.Source, lines[i], "window_start",
				"node %s: window %s to %s overlaps the window on line %d", n.ID,
				fmtTime(w.Start, s), fmtTime(w.End, s), keptLines[o])
			if opts.BadRows != BadRowsSkip {
				return err
			}
			s.skip(err)
			continue
		}
		kept, keptLines = slices.Insert(kept, k, w), slices.Insert(keptLines, k, lines[i])
	}
	n.Windows = kept
	return nil
}

// overlapping reports whether any two windows overlap.
func overlapping(ws []Window) bool {
	sorted := slices.SortedStableFunc(slices.Values(ws), func(a, b Window) int { return a.Start.Compare(b.Start) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Start.Before(sorted[i-1].End) {
			return true
		}
	}
	return false
}

// overlapAt is the index in kept (sorted, none overlapping) of a window
// that w, to go in at k, overlaps, or -1.
func overlapAt(kept []Window, k int, w Window) int {
	if k > 0 && w.Start.Before(kept[k-1].End) {
		return k - 1
	}
	if k < len(kept) && kept[k].Start.Before(w.End) {
		return k
	}
	return -1
}

// fmtTime writes t as the file wrote it.
func fmtTime(t time.Time, s *Supply) string {
	if s.Relative {
		return fmt.Sprint(int64(t.Sub(Epoch) / time.Second))
	}
	return t.Format(time.RFC3339)
}
