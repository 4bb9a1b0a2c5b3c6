package trustsim

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

// Report is what a run measured.
type Report struct {
	Providers int     `json:"providers"`
	Seed      uint64  `json:"seed"`
	Leases    int     `json:"watched_leases"` // Config.Leases
	FlagScore float64 `json:"flag_score"`
	Hours     float64 `json:"simulated_hours"`
	// LeasesTotal counts the leases every provider was given.
	LeasesTotal int64 `json:"leases_total"`
	// Rows are per behaviour, honest first.
	Rows []Row `json:"behaviours"`
	// CheatersDetected is the share of all cheaters flagged within Leases.
	CheatersDetected float64 `json:"cheaters_detected"`
	// HonestFlagged is the share of honest providers flagged at any
	// time in the run, within Leases or later: the false positives. An
	// honest provider wrongly flagged is as wronged after its watched
	// leases as within them.
	HonestFlagged float64 `json:"honest_flagged"`
}

// Row is one behaviour's outcome.
type Row struct {
	Behaviour Behaviour `json:"behaviour"`
	Providers int       `json:"providers"`
	// Flagged within their first Leases leases; Rate is its share.
	Flagged int     `json:"flagged"`
	Rate    float64 `json:"rate"`
	// FlaggedLater were flagged after their watched leases.
	FlaggedLater int `json:"flagged_later"`
	// MedianLeases is the median leases seen when flagged, of those
	// flagged within Leases; -1 when none was.
	MedianLeases float64 `json:"median_leases_to_detection"`
	// MedianHours is the median simulated hours to detection, likewise.
	MedianHours float64 `json:"median_hours_to_detection"`
	// Short counts providers that got fewer leases than watched by the
	// end of the run without being flagged.
	Short int `json:"short_of_leases"`
	// Signals counts the first signal that flagged each provider.
	Signals map[string]int `json:"signals"`
}

func (w *world) report() *Report {
	r := &Report{Providers: len(w.provs), Seed: w.cfg.Seed, Leases: w.cfg.Leases, FlagScore: w.cfg.FlagScore,
		Hours: w.hours(), LeasesTotal: w.leases.Load()}
	var cheaters, caught int
	for _, b := range Behaviours {
		row := Row{Behaviour: b, MedianLeases: -1, MedianHours: -1, Signals: map[string]int{}}
		var leases, hours []float64
		for _, p := range w.provs {
			if p.behaviour != b {
				continue
			}
			row.Providers++
			switch {
			case p.flaggedAt >= 0 && p.flaggedAt <= w.cfg.Leases:
				row.Flagged++
				row.Signals[p.flaggedBy]++
				leases, hours = append(leases, float64(p.flaggedAt)), append(hours, p.flaggedHrs)
			case p.flaggedAt >= 0:
				row.FlaggedLater++
			case p.seen < w.cfg.Leases:
				row.Short++
			}
		}
		if row.Providers == 0 {
			continue
		}
		row.Rate = float64(row.Flagged) / float64(row.Providers)
		if len(leases) > 0 {
			row.MedianLeases, row.MedianHours = median(leases), median(hours)
		}
		if b == Honest {
			r.HonestFlagged = float64(row.Flagged+row.FlaggedLater) / float64(row.Providers)
		} else {
			cheaters += row.Providers
			caught += row.Flagged
		}
		r.Rows = append(r.Rows, row)
	}
	if cheaters > 0 {
		r.CheatersDetected = float64(caught) / float64(cheaters)
	}
	return r
}

func median(xs []float64) float64 {
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// WriteTable prints the report as a table with a summary.
func (r *Report) WriteTable(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "behaviour\tproviders\tflagged ≤%d leases\trate\tmedian leases\tmedian hours\tflagged later\tshort of leases\tfirst signal\n", r.Leases)
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\t%s\t%s\t%d\t%d\t%s\n", row.Behaviour, row.Providers, row.Flagged, 100*row.Rate,
			orDash(row.MedianLeases, "%.1f"), orDash(row.MedianHours, "%.1f"), row.FlaggedLater, row.Short, signals(row.Signals))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "\ncheaters flagged within %d leases: %.1f%%; honest providers flagged at any time (false positives): %.1f%%\n"+
		"%d providers, %d leases, %.1f simulated hours, seed %d; flagged = upheld dispute, quarantine, or reputation flag (score < %.2f, ≥2 incidents, not only plausible accidents)\n",
		r.Leases, 100*r.CheatersDetected, 100*r.HonestFlagged, r.Providers, r.LeasesTotal, r.Hours, r.Seed, r.FlagScore)
	return err
}

func orDash(v float64, format string) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func signals(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
