package trace

import (
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// The Helios traces (SenseTime; Hu et al., SC'21) come with a per-minute
// series of each virtual cluster (VC) of the Earth cluster, computed by
// HeliosArtifact from the job log: how many GPUs the VC has, and how many
// of them no job holds (idle_gpu_num). Idle GPUs are what an owner could
// offer; the series is the supply side of a replay.

// HeliosZone is the time zone the series' timestamps are read in: the
// cluster ran in China, whose clocks are UTC+8 all year.
var HeliosZone = time.FixedZone("UTC+8", 8*3600)

// HeliosOptions tune how the idle series becomes nodes.
type HeliosOptions struct {
	Options
	// NodeGPUs is the GPUs of one node; Helios servers have 8. Default 8.
	NodeGPUs int
	// MinWindow is the shortest idle span offered as a window: an owner
	// does not offer a machine for two minutes. Default 10 minutes.
	MinWindow time.Duration
}

// Defaults of HeliosOptions.
const (
	DefaultHeliosNodeGPUs  = 8
	DefaultHeliosMinWindow = 10 * time.Minute
)

func (o HeliosOptions) withDefaults() HeliosOptions {
	if o.NodeGPUs <= 0 {
		o.NodeGPUs = DefaultHeliosNodeGPUs
	}
	if o.MinWindow <= 0 {
		o.MinWindow = DefaultHeliosMinWindow
	}
	return o
}

// HeliosSample is one minute of a VC.
type HeliosSample struct {
	At          time.Time
	Total, Idle int
}

// HeliosSeries is one VC's per-minute series, in time order.
type HeliosSeries struct {
	VC      string
	Samples []HeliosSample
	Report
}

// ReadHeliosSeries reads one VC's series (cluster_sequence_vc.csv). It
// needs the columns time ("2020-05-01 00:00:00", UTC+8), total_gpu_num and
// idle_gpu_num; the others are ignored. Times must increase; idle GPUs
// must not exceed the total.
func ReadHeliosSeries(r io.Reader, source, vc string, opts Options) (*HeliosSeries, error) {
	s := &HeliosSeries{VC: vc}
	t, err := newTable(r, source, opts, &s.Report, "time", "total_gpu_num", "idle_gpu_num")
	if err != nil {
		return nil, err
	}
	if err := t.each(func() error {
		smp, err := heliosRow(t, s.Samples)
		if err == nil {
			s.Samples = append(s.Samples, smp)
		}
		return err
	}); err != nil {
		return nil, err
	}
	return s, nil
}

func heliosRow(t *table, prev []HeliosSample) (HeliosSample, error) {
	var smp HeliosSample
	at, err := time.ParseInLocation(time.DateTime, t.get("time"), HeliosZone)
	if err != nil {
		return smp, t.errf("time", "must be a time such as 2020-05-01 00:00:00, got %q", t.get("time"))
	} else if at.Year() < 1970 || at.Year() > 2200 {
		return smp, t.errf("time", "must be between the years 1970 and 2200, got %q", t.get("time"))
	}
	smp.At = at.UTC()
	if n := len(prev); n > 0 && !smp.At.After(prev[n-1].At) {
		return smp, t.errf("time", "%s is not after the row before (%s): the series must be in time order",
			t.get("time"), prev[n-1].At.In(HeliosZone).Format(time.DateTime))
	}
	total, err := t.int("total_gpu_num", 0, 1_000_000)
	if err != nil {
		return smp, err
	}
	idle, err := t.int("idle_gpu_num", 0, total)
	if err != nil {
		return smp, err
	}
	smp.Total, smp.Idle = int(total), int(idle)
	return smp, nil
}

// HeliosNodes turns VC series into nodes with windows. A VC of T GPUs is
// T ÷ NodeGPUs nodes (a remainder is never offered). In each minute the
// idle GPUs are stacked onto the VC's nodes in order: node i (from 0) is
// offered in the minutes when at least (i+1) × NodeGPUs GPUs are idle, as
// owners offer a whole machine when nothing of theirs runs on it. So the
// first node of a VC is offered most, and the last only when the whole VC
// is idle. A minute runs from its timestamp to the next minute; a minute
// missing from the series is not offered. Spans shorter than MinWindow are
// dropped. Nodes have no model, region or ask: the simulator assigns them.
func HeliosNodes(series []*HeliosSeries, opts HeliosOptions) ([]Node, Report) {
	opts = opts.withDefaults()
	var rep Report
	var nodes []Node
	for _, s := range series {
		rep.merge(s.Report)
		most := 0
		for _, smp := range s.Samples {
			most = max(most, smp.Total)
		}
		for i := range most / opts.NodeGPUs {
			n := Node{ID: fmt.Sprintf("helios-%s-%d", s.VC, i), GPUs: opts.NodeGPUs}
			n.Windows = heliosWindows(s.Samples, (i+1)*opts.NodeGPUs, opts.MinWindow, &rep)
			if len(n.Windows) > 0 {
				nodes = append(nodes, n)
			} else {
				rep.drop("node never idle for a whole window")
			}
		}
	}
	return nodes, rep
}

// heliosWindows is the spans in which at least need GPUs are idle.
func heliosWindows(samples []HeliosSample, need int, minWindow time.Duration, rep *Report) []Window {
	var out []Window
	var open time.Time
	var last time.Time // end of the last open minute
	flush := func() {
		if !open.IsZero() {
			if last.Sub(open) >= minWindow {
				out = append(out, Window{Start: open, End: last})
			} else {
				rep.drop(fmt.Sprintf("idle span shorter than %s", minWindow))
			}
		}
		open = time.Time{}
	}
	for _, smp := range samples {
		idle := smp.Idle >= need && smp.Total >= need
		switch {
		case idle && !open.IsZero() && smp.At.Equal(last):
			last = smp.At.Add(time.Minute)
		case idle:
			flush()
			open, last = smp.At, smp.At.Add(time.Minute)
		default:
			flush()
		}
	}
	flush()
	return out
}

// ReadHeliosDir reads every VC series in fsys (files named VC.csv or
// VC.csv.gz, as in HeliosArtifact's Earth_vcs and the shared data's
// earth_vc_minutely) and turns them into nodes (HeliosNodes).
func ReadHeliosDir(fsys fs.FS, source string, opts HeliosOptions) (*Supply, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".csv") || strings.HasSuffix(n, ".csv.gz")) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return nil, idlegrid.Invalid(source, "no VC series (VC.csv or VC.csv.gz files) in the folder")
	}
	var series []*HeliosSeries
	for _, name := range names {
		s, err := readHeliosFile(fsys, name, path.Join(source, name), opts.Options)
		if err != nil {
			return nil, err
		}
		series = append(series, s)
	}
	nodes, rep := HeliosNodes(series, opts)
	return &Supply{Source: source, Nodes: nodes, Report: rep}, nil
}

func readHeliosFile(fsys fs.FS, name, source string, opts Options) (*HeliosSeries, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	vc := strings.TrimSuffix(name, ".gz")
	if vc != name {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, idlegrid.Invalid(source, "not a gzip file: %v", err)
		}
		defer zr.Close()
		r = zr
	}
	vc = strings.TrimSuffix(vc, ".csv")
	s, err := ReadHeliosSeries(r, source, vc, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}
