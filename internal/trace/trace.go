// Package trace reads the public traces the simulator replays, and the
// generic CSV formats anyone can write to bring their own:
//
//	demand  who wants GPUs, when, for how long: the Alibaba GPU 2023 pod list
//	        (ReadAlibabaPods) or the generic demand CSV (ReadDemandCSV)
//	supply  which GPUs are offered, and in which windows: the Helios
//	        per-minute idle-GPU series (ReadHeliosDir, HeliosNodes), the
//	        Alibaba node list (ReadAlibabaNodes) or the generic supply CSV
//	        (ReadSupplyCSV)
//	prices  cloud on-demand and marketplace prices per GPU model
//	        (ReadPrices, ReadCloudPrices, ReadVastPrices)
//
// Every reader takes Options: a bad row either stops the read with an
// *idlegrid.Error naming the file, the line, the column and the reason
// (BadRowsFail), or is skipped and counted (BadRowsSkip). Rows that are
// well formed but are not work for a GPU market (a CPU-only pod, a pod that
// never ran) are never errors: they are dropped and counted by reason.
// docs/traces.md states every format and every mapping choice.
//
// The package does no I/O beyond reading the files it is given, and keeps
// no state.
package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Epoch anchors traces whose times count seconds from their own start
// (Relative traces): second s of such a trace is Epoch + s, a Monday
// midnight UTC, so that weekly windows line up with a trace's days. The
// simulator moves relative traces onto the span of the other side of the
// market when the two count time differently. (It must be after
// 2020-01-01: the engine's index keeps times from then.)
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Job is one unit of demand: a renter's job as a trace tells it.
type Job struct {
	ID              string
	Submit          time.Time
	DurationSeconds int64    // how long it runs once started
	GPUs            int      // on one node
	GPUModels       []string // canonical names; empty: any model
	// Tier is empty when the trace does not say; the simulator then uses
	// silver.
	Tier idlegrid.Tier
	// MaxPrice is the renter's cap per GPU-hour; zero when the trace does
	// not say, and the simulator sets it from cloud on-demand prices.
	MaxPrice idlegrid.Micros
	Region   string // empty: any region
	// CheckpointEverySeconds is how often the job saves work it can
	// resume from; zero when the trace does not say, and the simulator
	// uses its --checkpoint-every.
	CheckpointEverySeconds int64
}

// Demand is the jobs of a trace, sorted by Submit.
type Demand struct {
	Source   string
	Relative bool // Submit times count from Epoch, not from the calendar
	Jobs     []Job
	Report
}

// Window is a span in which a node is offered, [Start, End), with the ask
// for it. A zero Ask means the trace does not say, and the simulator sets
// one from marketplace prices.
type Window struct {
	Start, End time.Time
	Ask        idlegrid.Micros // silver floor per GPU-hour
}

// Node is one unit of supply: a machine, its GPUs and its windows, sorted
// and not overlapping.
type Node struct {
	ID       string
	GPUModel string // canonical name; empty when the trace does not say
	GPUs     int
	Region   string // empty when the trace does not say
	Windows  []Window
}

// OfferedGPUSeconds is what the node offers over its windows.
func (n *Node) OfferedGPUSeconds() int64 {
	var s int64
	for _, w := range n.Windows {
		s += int64(w.End.Sub(w.Start)/time.Second) * int64(n.GPUs)
	}
	return s
}

// Supply is the nodes of a trace.
type Supply struct {
	Source   string
	Relative bool // window times count from Epoch, not from the calendar
	Nodes    []Node
	Report
}

// Span returns the earliest window start and the latest window end.
func (s *Supply) Span() (start, end time.Time) {
	for _, n := range s.Nodes {
		for _, w := range n.Windows {
			if start.IsZero() || w.Start.Before(start) {
				start = w.Start
			}
			if w.End.After(end) {
				end = w.End
			}
		}
	}
	return start, end
}

// Report says what a read left out or changed: bad rows skipped
// (BadRowsSkip only), with the first few reasons; good rows dropped
// because they are not work or capacity for a GPU market, by reason; and
// rows kept with a change, by the change.
type Report struct {
	Rows      int // data rows read, header excluded
	Skipped   int
	SkipNotes []string // the first maxSkipNotes reasons, "file line N: ..."
	Dropped   map[string]int
	Adjusted  map[string]int
}

// maxSkipNotes is how many skipped rows a Report describes.
const maxSkipNotes = 5

func (r *Report) drop(reason string) {
	if r.Dropped == nil {
		r.Dropped = map[string]int{}
	}
	r.Dropped[reason]++
}

func (r *Report) adjust(change string) {
	if r.Adjusted == nil {
		r.Adjusted = map[string]int{}
	}
	r.Adjusted[change]++
}

func (r *Report) skip(err error) {
	r.Skipped++
	if len(r.SkipNotes) < maxSkipNotes {
		r.SkipNotes = append(r.SkipNotes, idlegrid.ErrorMessage(err))
	}
}

// merge adds o's counts to r.
func (r *Report) merge(o Report) {
	r.Rows += o.Rows
	r.Skipped += o.Skipped
	for _, n := range o.SkipNotes {
		if len(r.SkipNotes) < maxSkipNotes {
			r.SkipNotes = append(r.SkipNotes, n)
		}
	}
	for k, v := range o.Dropped {
		if r.Dropped == nil {
			r.Dropped = map[string]int{}
		}
		r.Dropped[k] += v
	}
	for k, v := range o.Adjusted {
		if r.Adjusted == nil {
			r.Adjusted = map[string]int{}
		}
		r.Adjusted[k] += v
	}
}

// BadRows says what a reader does with a row it cannot read.
type BadRows int

const (
	// BadRowsFail stops the read with an error naming the line.
	BadRowsFail BadRows = iota
	// BadRowsSkip skips the row and counts it in the Report.
	BadRowsSkip
)

// ParseBadRows parses "fail" or "skip".
func ParseBadRows(s string) (BadRows, error) {
	switch s {
	case "fail", "":
		return BadRowsFail, nil
	case "skip":
		return BadRowsSkip, nil
	}
	return 0, idlegrid.Invalid("bad-rows", "must be fail or skip, got %q", s)
}

func (b BadRows) String() string {
	if b == BadRowsSkip {
		return "skip"
	}
	return "fail"
}

// Options tune every reader.
type Options struct {
	BadRows BadRows
}

// MaxRows caps the rows one file may hold, so that a runaway file fails
// rather than filling memory.
const MaxRows = 50_000_000

// rowError is a bad row: the file, the line, the column and why.
func rowError(source string, line int, column, format string, args ...any) error {
	field := fmt.Sprintf("%s line %d", source, line)
	if column != "" {
		field += ": " + column
	}
	return idlegrid.Invalid(field, format, args...)
}

// table reads a CSV file with a header row, by column name.
type table struct {
	source string
	r      *csv.Reader
	cols   map[string]int // lower-case, trimmed header name → index
	width  int            // the header's fields
	line   int            // line of the current record
	rec    []string
	opts   Options
	rep    *Report
}

// newTable reads the header of r. want lists the columns that must be
// there; others are ignored.
func newTable(r io.Reader, source string, opts Options, rep *Report, want ...string) (*table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, idlegrid.Invalid(source, "empty file: the first line must be a header naming the columns (%s)", strings.Join(want, ", "))
	} else if err != nil {
		return nil, idlegrid.Invalid(source+" line 1", "cannot read the header: %v", csvReason(err))
	}
	t := &table{source: source, r: cr, cols: map[string]int{}, width: len(header), opts: opts, rep: rep}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := t.cols[h]; !dup && h != "" {
			t.cols[h] = i
		}
	}
	var missing []string
	for _, w := range want {
		if _, ok := t.cols[w]; !ok {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		return nil, idlegrid.Invalid(source+" line 1", "missing column(s) %s; the header has %s",
			strings.Join(missing, ", "), strings.Join(header, ","))
	}
	return t, nil
}

// has reports whether the header names the column.
func (t *table) has(col string) bool { _, ok := t.cols[col]; return ok }

// next reads the next record. It returns false at the end, or with an
// error; a record the CSV layer cannot read is a bad row.
func (t *table) next() (bool, error) {
	for {
		rec, err := t.r.Read()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			t.rep.Rows++
			if err := t.bad(rowError(t.source, pe.StartLine, "", "%s", csvReason(err))); err != nil {
				return false, err
			}
			continue
		} else if err != nil {
			return false, err
		}
		t.line, _ = t.r.FieldPos(0)
		t.rec = rec
		t.rep.Rows++
		if t.rep.Rows > MaxRows {
			return false, idlegrid.Invalid(t.source, "more than %d rows", MaxRows)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			t.rep.Rows--
			continue // a blank line
		}
		return true, nil
	}
}

// each reads every record and hands it to row, as t's current record;
// an error from row is a bad row (bad), read past or the end of the read.
func (t *table) each(row func() error) error {
	for {
		ok, err := t.next()
		if err != nil || !ok {
			return err
		}
		if err := row(); err != nil {
			if err := t.bad(err); err != nil {
				return err
			}
		}
	}
}

// bad handles a bad row: with BadRowsFail it returns err, with
// BadRowsSkip it counts it and returns nil.
func (t *table) bad(err error) error {
	if t.opts.BadRows == BadRowsSkip {
		t.rep.skip(err)
		return nil
	}
	return err
}

// get returns the trimmed value of a column, "" when the row is short or
// the header lacks it.
func (t *table) get(col string) string {
	i, ok := t.cols[col]
	if !ok || i >= len(t.rec) {
		return ""
	}
	return strings.TrimSpace(t.rec[i])
}

// whole reports a row with fewer fields than the header as bad: read by
// name, the cells it lacks would look empty, where a file of fixed
// columns means something by an empty one.
func (t *table) whole() error {
	if len(t.rec) < t.width {
		return t.errf("", "the row has %d fields, the header %d", len(t.rec), t.width)
	}
	return nil
}

// errf is a bad value in a column of the current row.
func (t *table) errf(col, format string, args ...any) error {
	return rowError(t.source, t.line, col, format, args...)
}

// int reads a whole number between lo and hi.
func (t *table) int(col string, lo, hi int64) (int64, error) {
	v := t.get(col)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, t.errf(col, "must be a whole number, got %q", v)
	} else if n < lo || n > hi {
		return 0, t.errf(col, "must be between %d and %d, got %d", lo, hi, n)
	}
	return n, nil
}

// money reads a decimal amount per GPU-hour, "" as zero.
func (t *table) money(col string) (idlegrid.Micros, error) {
	v := strings.TrimPrefix(t.get(col), "$")
	if v == "" {
		return 0, nil
	}
	m, err := idlegrid.ParseMicros(v)
	if err != nil {
		return 0, t.errf(col, "%v; write a decimal amount such as 1.25", err)
	} else if m <= 0 || m > 1000*idlegrid.MicrosPerUnit {
		return 0, t.errf(col, "must be between 0.000001 and 1000, got %s", m)
	}
	return m, nil
}

func csvReason(err error) string {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return "not valid CSV: " + pe.Err.Error()
	}
	return err.Error()
}

// timeKind is how a trace writes times: seconds from its start, or
// RFC 3339 instants. A file must use one kind throughout.
type timeKind int

const (
	timeUnknown timeKind = iota
	timeSeconds
	timeInstant
)

// parseTime reads "3600" (seconds from the trace's start, Epoch-based) or
// "2025-03-10T12:00:00Z", and checks it is of kind *k, setting *k at the
// first value.
func parseTime(v string, k *timeKind) (time.Time, error) {
	kind, t := timeInstant, time.Time{}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 || secs > 100*365*24*3600 {
			return time.Time{}, fmt.Errorf("seconds from the start must be between 0 and 100 years, got %d", secs)
		}
		kind, t = timeSeconds, Epoch.Add(time.Duration(secs)*time.Second)
	} else if t, err = time.Parse(time.RFC3339, v); err != nil {
		return time.Time{}, fmt.Errorf("must be seconds from the start of the trace (e.g. 3600) or an RFC 3339 time (e.g. 2025-03-10T12:00:00Z), got %q", v)
	} else if t.Year() < 1970 || t.Year() > 2200 {
		return time.Time{}, fmt.Errorf("must be between the years 1970 and 2200, got %q", v)
	}
	switch {
	case *k == timeUnknown:
		*k = kind
	case *k != kind:
		return time.Time{}, fmt.Errorf("mixes seconds and RFC 3339 times in one file; use one kind, got %q", v)
	}
	return t.UTC().Truncate(time.Second), nil
}

// parseDuration reads whole seconds ("5400") or a Go duration ("90m").
func parseDuration(v string) (int64, error) {
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 1 || secs > idlegrid.MaxJobSeconds {
			return 0, fmt.Errorf("must be between 1 second and 30 days, got %d", secs)
		}
		return secs, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("must be whole seconds (e.g. 5400) or a duration (e.g. 90m), got %q", v)
	} else if d < time.Second || d > idlegrid.MaxJobSeconds*time.Second {
		return 0, fmt.Errorf("must be between 1s and 720h (30 days), got %q", v)
	} else if d%time.Second != 0 {
		return 0, fmt.Errorf("must be whole seconds, got %q", v)
	}
	return int64(d / time.Second), nil
}

// regionOK reports whether s is a region name as offers write it.
func regionOK(s string) bool {
	if s == "" || len(s) > 40 || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// models splits "A|B|A" into sorted, unique canonical names.
func models(v string, canon func(string) string) []string {
	if v == "" {
		return nil
	}
	var out []string
	for _, m := range strings.Split(v, "|") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, canon(m))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sortJobs orders jobs by submit time, then ID, so that a replay is the
// same whatever order the file was in.
func sortJobs(jobs []Job) {
	slices.SortStableFunc(jobs, func(a, b Job) int {
		if c := a.Submit.Compare(b.Submit); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}
