package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/idlegrid/idlegrid"
)

// printJSON writes v as indented JSON, the --json form of every listing.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table is a tab-aligned text table; call flush when done.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(toAny(headers)...)
	return t
}

func (t *table) row(cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = cellText(fmt.Sprint(c))
	}
	fmt.Fprintln(t.tw, strings.Join(parts, "\t"))
}

// cellText is s with each control character written as Go writes it in a
// quoted string (\x1b, \n, \t): a cell holds what others wrote (a job's
// name, a node's, a reason), which must neither split the row, shift its
// columns nor colour the reader's terminal, whatever an older server let
// in.
func cellText(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r) // '\x1b', with its quotes
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (t *table) flush() error { return t.tw.Flush() }

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// perGPUHour shows a price as "$2.500000/GPU-h".
func perGPUHour(m idlegrid.Micros) string { return m.String() + "/GPU-h" }

// perMTokens is what charged paid for a million of tokens, on average, or
// "-" with none.
func perMTokens(charged idlegrid.Micros, tokens int64) string {
	if tokens <= 0 {
		return "-"
	}
	return idlegrid.PerMTokens(charged, tokens).String() + "/M tokens"
}

// age shows how long ago t was, coarsely: "42s", "5m", "3h", "2d".
func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// stamp shows a time in RFC 3339, or "-".
func stamp(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// seconds shows a number of seconds as a duration, e.g. "1h30m0s".
func seconds(s int64) string { return (time.Duration(s) * time.Second).String() }

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clip shortens s to n runes for a table cell.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// gpuSummary shows a node's GPUs as "2xH100-80GB" (or "1xA100-80GB+1xT4").
func gpuSummary(gpus []idlegrid.GPU) string {
	counts := map[string]int{}
	for _, g := range gpus {
		counts[g.Model]++
	}
	models := make([]string, 0, len(counts))
	for m := range counts {
		models = append(models, m)
	}
	sort.Strings(models)
	parts := make([]string, len(models))
	for i, m := range models {
		parts[i] = fmt.Sprintf("%dx%s", counts[m], m)
	}
	return orDash(strings.Join(parts, "+"))
}

// askSummary shows a node's floors by tier, e.g. "gold $2.4 silver $2.1".
func askSummary(a idlegrid.Ask) string {
	var parts []string
	for _, t := range idlegrid.Tiers {
		if p, ok := a.Floor(t); ok {
			parts = append(parts, string(t)+" "+p.String())
		}
	}
	return orDash(strings.Join(parts, " "))
}

// modelsSummary is a node's models for inference, each with its prices
// per million prompt and completion tokens and its concurrency.
func modelsSummary(ms []idlegrid.ModelOffer) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%s %s/%s per million tokens in/out, %d at once", m.Name, m.InputMicrosPerMTokens, m.OutputMicrosPerMTokens, m.MaxConcurrency)
		if m.Embeddings {
			parts[i] += ", embeddings"
		}
	}
	return strings.Join(parts, "; ")
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// bar draws a progress bar of width cells for done in [0,1]: "[###.....]".
func bar(done float64, width int) string {
	n := min(max(int(done*float64(width)), 0), width)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

// nextPage ends a full page of a listing (listed as many as limit) with
// the command for the next: cmd, with --limit and --before the last ID
// listed. A shorter page is the last, and says nothing.
func nextPage(w io.Writer, cmd string, listed, limit int, lastID string) error {
	return pageHint(w, cmd, listed, limit, "--before", lastID)
}

// nextPageAfter is nextPage for a list that goes on after its last item
// (oldest first, or in a sort's order).
func nextPageAfter(w io.Writer, cmd string, listed, limit int, lastID string) error {
	return pageHint(w, cmd, listed, limit, "--after", lastID)
}

func pageHint(w io.Writer, cmd string, listed, limit int, cursor, lastID string) error {
	if listed < limit {
		return nil
	}
	_, err := fmt.Fprintf(w, "more may follow: %s --limit %d %s %s\n", cmd, limit, cursor, lastID)
	return err
}
