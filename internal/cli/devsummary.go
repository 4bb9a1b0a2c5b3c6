package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// maxEvents is how many recent events the live summary shows.
const maxEvents = 8

// marketWatch watches the demo market through the admin's client and turns what
// changed into events: placements with their price, completions with their
// charge, jobs that wait and why.
type marketWatch struct {
	admin *client.Client

	mu     sync.Mutex        // guards events and nodes; the renter reports from its goroutines
	events []string          // newest last
	fresh  []string          // not yet printed (for the line-by-line mode)
	nodes  map[string]string // node ID → name

	jobs map[string]jobSeen // by ID: what the last look found
}

type jobSeen struct {
	state  idlegrid.JobState
	reason string
}

func newMarketWatch(admin *client.Client) *marketWatch {
	return &marketWatch{admin: admin, jobs: map[string]jobSeen{}, nodes: map[string]string{}}
}

// note records an event.
func (w *marketWatch) note(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	line := time.Now().Format("15:04:05") + "  " + msg
	w.events = append(w.events, line)
	if len(w.events) > maxEvents {
		w.events = w.events[len(w.events)-maxEvents:]
	}
	w.fresh = append(w.fresh, line)
}

// takeFresh returns the events not yet taken.
func (w *marketWatch) takeFresh() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.fresh
	w.fresh = nil
	return f
}

func (w *marketWatch) recent() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.events...)
}

// prime records the jobs already in the market without noting events, so a
// reused data dir does not replay its history.
func (w *marketWatch) prime(ctx context.Context) {
	jobs, err := w.admin.ListJobs(ctx, idlegrid.JobFilter{Limit: 500})
	if err != nil {
		return
	}
	for _, j := range jobs {
		w.jobs[j.ID] = jobSeen{state: j.State, reason: j.Reason}
	}
}

// look reads the market once: it returns the summary and notes the events
// since the last look.
func (w *marketWatch) look(ctx context.Context) (*idlegrid.Summary, error) {
	sum, err := w.admin.Summary(ctx)
	if err != nil {
		return nil, err
	}
	if nodes, err := w.admin.ListNodes(ctx, idlegrid.NodeFilter{}); err == nil {
		w.mu.Lock()
		for _, n := range nodes {
			w.nodes[n.ID] = n.Name
		}
		w.mu.Unlock()
	}
	jobs, err := w.admin.ListJobs(ctx, idlegrid.JobFilter{Limit: 500})
	if err != nil {
		return nil, err
	}
	for i := len(jobs) - 1; i >= 0; i-- { // oldest first, so events read in order
		w.see(ctx, jobs[i])
	}
	return sum, nil
}

// see compares a job with what the last look found and notes what changed.
func (w *marketWatch) see(ctx context.Context, j *idlegrid.Job) {
	prev, known := w.jobs[j.ID]
	seen := jobSeen{state: j.State, reason: j.Reason}
	if known && prev == seen {
		return
	}
	label := jobLabel(j)
	if j.State != idlegrid.JobQueued && (!known || prev.state == idlegrid.JobQueued) {
		l, err := latestLease(ctx, w.admin, j.ID)
		if err != nil {
			return // not seen yet: the next look notes it, placement first
		}
		if l != nil {
			w.note(fmt.Sprintf("%s placed on %s at %s (%s, %d GPU)", label, w.nodeName(l.NodeID), perGPUHour(l.PriceMicrosPerGPUHour), l.Tier, len(l.GPUUUIDs)))
		}
	}
	w.jobs[j.ID] = seen
	switch j.State {
	case idlegrid.JobQueued:
		if j.Reason != "" && j.Reason != prev.reason {
			w.note(fmt.Sprintf("%s waits: %s", label, j.Reason))
		}
	case idlegrid.JobSucceeded:
		w.note(fmt.Sprintf("%s succeeded, charged %s", label, j.ChargedMicros))
	case idlegrid.JobFailed:
		w.note(fmt.Sprintf("%s failed: %s (charged %s)", label, j.Reason, j.ChargedMicros))
	case idlegrid.JobCancelled:
		w.note(fmt.Sprintf("%s cancelled: %s", label, orDash(j.Reason)))
	}
}

func (w *marketWatch) nodeName(id string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if name, ok := w.nodes[id]; ok {
		return name
	}
	return id
}

// summaryLines renders a summary as a few lines of text.
func summaryLines(s *idlegrid.Summary) []string {
	jobs := s.JobsByState
	return []string{
		fmt.Sprintf("jobs    %d queued   %d running   %d succeeded   %d failed   %d cancelled",
			jobs[idlegrid.JobQueued], jobs[idlegrid.JobRunning], jobs[idlegrid.JobSucceeded], jobs[idlegrid.JobFailed], jobs[idlegrid.JobCancelled]),
		fmt.Sprintf("gpus    %d busy of %d, on %d online nodes", s.GPUsBusy, s.GPUsTotal, s.NodesByState[idlegrid.NodeOnline]),
		"nodes   " + nodeStates(s.NodesByState),
		fmt.Sprintf("money   renters spent %s   providers earned %s   platform fees %s   refunded by disputes %s   in escrow %s",
			s.SpentMicros, s.EarnedMicros, s.FeesMicros, s.RefundedMicros, s.HeldMicros),
	}
}

// oneLine renders a summary as a single line, for logs and pipes.
func oneLine(s *idlegrid.Summary) string {
	jobs := s.JobsByState
	return fmt.Sprintf("jobs queued=%d running=%d succeeded=%d failed=%d cancelled=%d | gpus %d/%d busy | spent %s earned %s fees %s refunded %s",
		jobs[idlegrid.JobQueued], jobs[idlegrid.JobRunning], jobs[idlegrid.JobSucceeded], jobs[idlegrid.JobFailed], jobs[idlegrid.JobCancelled],
		s.GPUsBusy, s.GPUsTotal, s.SpentMicros, s.EarnedMicros, s.FeesMicros, s.RefundedMicros)
}

// screen draws the live summary: redrawn in place on a terminal, or as
// lines (events as they come, a summary line every few refreshes) elsewhere.
type screen struct {
	w      io.Writer
	tty    bool
	drawn  int // lines drawn last time, to move back over them
	frames int
}

func newScreen(w io.Writer) *screen { return &screen{w: w, tty: isTerminal(w)} }

// isTerminal reports whether w is a character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isCharDevice(f)
}

// isTerminalIn reports whether r is a terminal, one a person answers on.
func isTerminalIn(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && isCharDevice(f)
}

func isCharDevice(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// linesEvery is how many refreshes pass between summary lines off a terminal.
const linesEvery = 3

func (s *screen) draw(header string, sum *idlegrid.Summary, lookErr error, w *marketWatch) {
	s.frames++
	if !s.tty {
		for _, ev := range w.takeFresh() {
			fmt.Fprintln(s.w, ev)
		}
		if lookErr != nil {
			fmt.Fprintf(s.w, "summary unavailable: %s\n", errorText(lookErr))
		} else if s.frames%linesEvery == 1 {
			fmt.Fprintln(s.w, time.Now().Format("15:04:05")+"  "+oneLine(sum))
		}
		return
	}
	w.takeFresh()
	lines := []string{header}
	if lookErr != nil {
		lines = append(lines, "summary unavailable: "+errorText(lookErr))
	} else {
		lines = append(lines, summaryLines(sum)...)
	}
	lines = append(lines, "recent")
	lines = append(lines, indent(w.recent())...)
	s.drawn = redraw(s.w, lines, s.drawn)
}

// redraw writes lines on a terminal over the drawn lines of the last
// frame, and returns how many it drew.
func redraw(w io.Writer, lines []string, drawn int) int {
	var b strings.Builder
	if drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", drawn) // back to the top of the last frame
	}
	for _, l := range lines {
		b.WriteString("\x1b[2K" + l + "\n") // clear the line, then write it
	}
	b.WriteString("\x1b[J") // clear what the last frame had below
	io.WriteString(w, b.String())
	return len(lines)
}

func indent(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = "  " + l
	}
	return out
}
