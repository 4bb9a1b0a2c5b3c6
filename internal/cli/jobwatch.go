package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// watchEvery is how often "job watch" redraws its live line, and asks a
// server without watches about the job; minWatchEvery is the least.
const (
	watchEvery    = 2 * time.Second
	minWatchEvery = 500 * time.Millisecond
)

// jobView is what "job watch" knows of a job at one moment: the job and its
// leases, as the server listed them, and the nodes they are on.
type jobView struct {
	At     time.Time         `json:"at"`
	Job    *idlegrid.Job     `json:"job"`
	Leases []*idlegrid.Lease `json:"leases"`
	Nodes  nodeNames         `json:"-"`
}

// nodeNames are the nodes a watch has read, by ID, as the market shows
// them (nil: the server would not say), so that its lines name a node as
// its owner does rather than by its ID.
type nodeNames map[string]*idlegrid.Node

// name is how the lines call node id: its name, or its ID when unknown.
func (nn nodeNames) name(id string) string {
	if n := nn[id]; n != nil && n.Name != "" {
		return n.Name
	}
	return id
}

// placedOn is how a placement names node id: its name with its ID, its
// GPUs and region, e.g. "fj-l40s-01 (node_…, L40S, eu-west)".
func (nn nodeNames) placedOn(id string) string {
	n := nn[id]
	if n == nil || n.Name == "" {
		return id
	}
	return fmt.Sprintf("%s (%s, %s, %s)", n.Name, id, gpuSummary(n.GPUs), n.Region)
}

// learn reads the nodes of leases it does not know yet. A node it cannot
// read for good (an older server, a node gone) is remembered as unknown;
// one it cannot read for now is asked again next time.
func (nn nodeNames) learn(ctx context.Context, cl *client.Client, leases []*idlegrid.Lease) {
	for _, l := range leases {
		if _, known := nn[l.NodeID]; known || l.NodeID == "" {
			continue
		}
		n, err := cl.FindNode(ctx, l.NodeID)
		if err == nil || !transient(err) {
			nn[l.NodeID] = n
		}
	}
}

// watchOptions are "job watch"'s flags, shared with "job submit --wait".
type watchOptions struct {
	every   time.Duration
	timeout time.Duration // 0: until the job ends
	json    bool
	now     func() time.Time
}

// watchFlags adds the watch flags to fs; wait names the flag that turns
// watching on in "job submit" ("" in "job watch", which always watches).
func watchFlags(fs *flagSet, wait string) *watchOptions {
	o := &watchOptions{now: time.Now}
	scope := ""
	if wait != "" {
		scope = "with --" + wait + ", "
	}
	fs.DurationVar(&o.every, "every", watchEvery, scope+"how often the live line is redrawn, and the server asked when it cannot say at once what changed (at least "+minWatchEvery.String()+")")
	fs.DurationVar(&o.timeout, "timeout", 0, scope+"stop watching after this long, e.g. 30m; the job goes on (default: until it ends)")
	return o
}

func (o *watchOptions) check() error {
	if o.every < minWatchEvery {
		return usagef("--every: %s is too often; give at least %s", o.every, minWatchEvery)
	}
	if o.timeout < 0 {
		return usagef("--timeout: %s is negative; give a duration such as 30m, or leave it out to watch until the job ends", o.timeout)
	}
	return nil
}

const watchHelp = `Follow a job until it ends: why it waits, where it is placed and at what
price, when it starts, how far it has got, notices, checkpoints and
requeues, and what it was charged. Each change shows as the server stores
it. On a terminal a live line shows the running lease's progress;
elsewhere each change is a line of its own, and --json prints each change
as one line of JSON (the job and its leases).

It exits 0 when the job succeeds and 1 when it fails or is cancelled, so a
script can wait on it. Ctrl-C stops watching (exit 0), and so does
--timeout when it passes (exit 1); the job goes on either way.`

func (c *jobCommand) watch(ctx context.Context, args []string) error {
	fs := c.env.flags("job watch", help{
		usage: "idlegrid job watch ID [--every 2s] [--timeout 30m] [--json]",
		about: watchHelp,
		examples: `idlegrid job watch job_abc123
		idlegrid job watch job_abc123 --timeout 1h && echo done
		idlegrid job watch job_abc123 --json | jq -c '{state: .job.state, progress: [.leases[].progress]}'`,
	})
	r := c.env.remoteFlags(fs)
	o := watchFlags(fs, "")
	fs.BoolVar(&o.json, "json", false, "print each change as a line of JSON: {at, job, leases}")
	args, err := fs.parseArgs(args, 1, 1, "one job ID")
	if err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	return c.follow(ctx, cl, args[0], *o)
}

// follow watches the job until it ends, the timeout passes or ctx is done
// (Ctrl-C). It asks the server to answer when the job changes (a watch);
// a server without watches is asked every o.every instead. On a terminal
// the answer comes at least every o.every, so that the live line's clock
// moves. A server it cannot reach for a while is said once and asked again
// o.every later.
func (c *jobCommand) follow(ctx context.Context, cl *client.Client, jobID string, o watchOptions) error {
	w := newJobWatcher(c.env.Out, c.env.Err, o.json)
	ask := &jobAsker{cl: cl, jobID: jobID, now: o.now, nodes: nodeNames{}, watch: true, wait: watchWait}
	if w.tty {
		ask.wait = o.every
	}
	// deadline is closed when --timeout passes: every wait after that
	// sees it, where a timer's one value would be taken by one (a watch's
	// helper, say, just as its watch was answered) and missed by the rest.
	var deadline <-chan struct{}
	if o.timeout > 0 {
		passed := make(chan struct{})
		t := time.AfterFunc(o.timeout, func() { close(passed) })
		defer t.Stop()
		deadline = passed
	}
	for {
		v, err := ask.next(ctx, deadline)
		switch {
		case ctx.Err() != nil:
			return c.stopWatching(w, jobID)
		case errors.Is(err, errWatchTimedOut):
			w.endLive()
			return w.timedOut(jobID, o.timeout)
		case err != nil && !transient(err):
			w.endLive()
			return err
		case err != nil:
			w.lost(o.now(), err)
		default:
			if err := w.show(v); err != nil {
				return err
			}
			if v.Job.State.Terminal() {
				w.endLive()
				return jobOutcome(v.Job)
			}
			if ask.watch {
				continue // the server waited: ask again at once
			}
		}
		select {
		case <-ctx.Done():
			return c.stopWatching(w, jobID)
		case <-deadline:
			w.endLive()
			return w.timedOut(jobID, o.timeout)
		case <-time.After(o.every):
		}
	}
}

// watchWait is how long one watch asks the server to wait for a change.
const watchWait = 30 * time.Second

// errWatchTimedOut is a watch's --timeout passing while it waited.
var errWatchTimedOut = errors.New("the watch timed out")

// jobAsker reads a job's view for "job watch": by the server's watch,
// which answers when the job changes (or after wait, the view as it was),
// or from a server without it, by reading the job and its leases.
type jobAsker struct {
	cl      *client.Client
	jobID   string
	now     func() time.Time
	nodes   nodeNames
	watch   bool          // the server has watches
	wait    time.Duration // how long a watch waits for a change
	version string        // the view's, as the server last said it
	last    *jobView
}

// next returns the job's view, once it changed or after a.wait. The
// deadline, closed when it passes, ends the wait with errWatchTimedOut,
// and so does one that passed before.
func (a *jobAsker) next(ctx context.Context, deadline <-chan struct{}) (*jobView, error) {
	if !a.watch {
		return fetchJobView(ctx, a.cl, a.jobID, a.now, a.nodes)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // owned by next: ends when the deadline passes or next returns
		select {
		case <-deadline:
			cancel()
		case <-ctx.Done():
		}
	}()
	jv, version, err := a.cl.WatchJob(ctx, a.jobID, a.version, a.wait)
	select {
	case <-deadline:
		return nil, errWatchTimedOut
	default:
	}
	switch {
	case isNoSuchEndpoint(err): // an older server: read the job and its leases
		a.watch = false
		return fetchJobView(ctx, a.cl, a.jobID, a.now, a.nodes)
	case err != nil:
		return nil, err
	case jv == nil: // unchanged since a.last, which set a.version: the same view, now
		v := *a.last
		v.At = a.now()
		return &v, nil
	}
	a.version = version
	a.nodes.learn(ctx, a.cl, jv.Leases)
	a.last = &jobView{At: a.now(), Job: jv.Job, Leases: nonNil(jv.Leases), Nodes: a.nodes}
	return a.last, nil
}

// isNoSuchEndpoint reports whether err is a server's answer that it has no
// such endpoint: one older than the call.
func isNoSuchEndpoint(err error) bool {
	return idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND && strings.Contains(err.Error(), "no such endpoint")
}

// timedOut is the error of a watch that ran out of time.
func (w *jobWatcher) timedOut(jobID string, after time.Duration) error {
	err := fmt.Errorf("could not read %s in %s of watching", jobID, after)
	if w.last != nil {
		err = fmt.Errorf("%s is still %s after %s of watching", jobID, w.last.Job.State, after)
	}
	return withHint(err, "it goes on; watch it again with 'idlegrid job watch "+jobID+"', or stop it with 'idlegrid job cancel "+jobID+"'")
}

// stopWatching ends a watch the user interrupted: the job goes on.
func (c *jobCommand) stopWatching(w *jobWatcher, jobID string) error {
	w.endLive()
	fmt.Fprintf(c.env.Err, "stopped watching; %s goes on ('idlegrid job cancel %s' stops it)\n", jobID, jobID)
	return nil
}

// fetchJobView asks the server for the job's leases and then the job, in
// that order: the job is then at least as new as its leases, so a job seen
// queued has no lease it was placed on since. It reads the nodes of new
// leases into nodes.
func fetchJobView(ctx context.Context, cl *client.Client, jobID string, now func() time.Time, nodes nodeNames) (*jobView, error) {
	leases, err := cl.ListLeases(ctx, idlegrid.LeaseFilter{JobID: jobID})
	if err != nil {
		return nil, err
	}
	j, err := cl.FindJob(ctx, jobID)
	if err != nil {
		return nil, err
	}
	nodes.learn(ctx, cl, leases)
	return &jobView{At: now(), Job: j, Leases: nonNil(leases), Nodes: nodes}, nil
}

// transient reports whether err may pass if asked again: the server was
// unreachable, busy or restarting. A mistake of the caller's (a wrong ID,
// key or role) will not.
func transient(err error) bool {
	switch idlegrid.ErrorCode(err) {
	case idlegrid.ENOTFOUND, idlegrid.EUNAUTHORIZED, idlegrid.EFORBIDDEN, idlegrid.EINVALID:
		return false
	}
	return true
}

// jobOutcome is the watch's result for a job that ended: nil when it
// succeeded, an error saying how it ended otherwise.
func jobOutcome(j *idlegrid.Job) error {
	switch j.State {
	case idlegrid.JobSucceeded:
		return nil
	case idlegrid.JobCancelled:
		return withHint(fmt.Errorf("%s was cancelled: %s", j.ID, orDash(j.Reason)), "its leases: 'idlegrid job leases "+j.ID+"'")
	}
	return withHint(fmt.Errorf("%s %s: %s", j.ID, j.State, orDash(j.Reason)),
		"its output: 'idlegrid job logs "+j.ID+"'; its leases: 'idlegrid job leases "+j.ID+"'")
}

// jobWatcher prints what changes between the views it is shown.
type jobWatcher struct {
	w        io.Writer
	notes    io.Writer // with --json, where the lines about the watch itself go
	tty      bool
	json     bool
	last     *jobView
	lastJSON []byte
	live     bool           // a live line is on the terminal's last line
	decile   map[string]int // off a terminal: per lease, the tenths of progress printed
	lostErr  string         // the error that cut contact, until contact returns
}

func newJobWatcher(w, notes io.Writer, asJSON bool) *jobWatcher {
	return &jobWatcher{w: w, notes: notes, tty: !asJSON && isTerminal(w), json: asJSON, decile: map[string]int{}}
}

// show prints what changed since the last view.
func (w *jobWatcher) show(v *jobView) error {
	if w.lostErr != "" {
		w.lostErr = ""
		w.line(v.At, "in contact with the server again")
	}
	if w.json {
		return w.showJSON(v)
	}
	for _, c := range jobChanges(w.last, v) {
		w.line(c.when(v.At), c.text)
	}
	if w.tty {
		w.drawLive(v)
	} else {
		w.progressLines(v)
	}
	w.last = v
	return nil
}

// showJSON prints v as a line of JSON when the job or its leases changed.
func (w *jobWatcher) showJSON(v *jobView) error {
	state, err := json.Marshal(struct {
		Job    *idlegrid.Job     `json:"job"`
		Leases []*idlegrid.Lease `json:"leases"`
	}{v.Job, v.Leases})
	if err != nil {
		return err
	}
	if bytes.Equal(state, w.lastJSON) {
		return nil
	}
	w.last, w.lastJSON = v, state
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w.w, "%s\n", line)
	return err
}

// lost says once that the server could not be reached.
func (w *jobWatcher) lost(at time.Time, err error) {
	if w.lostErr != "" {
		return
	}
	w.lostErr = errorText(err)
	w.line(at, "cannot reach the server ("+w.lostErr+"); still trying")
}

// line prints one change, above the live line; with --json, only the
// lines about the watch itself come here, and go to notes.
func (w *jobWatcher) line(at time.Time, msg string) {
	if w.json {
		fmt.Fprintf(w.notes, "%s  %s\n", at.Local().Format("15:04:05"), msg)
		return
	}
	w.clearLive()
	fmt.Fprintf(w.w, "%s  %s\n", at.Local().Format("15:04:05"), msg)
}

func (w *jobWatcher) clearLive() {
	if w.live {
		fmt.Fprint(w.w, "\r\033[K")
		w.live = false
	}
}

// endLive leaves the live line on screen, ended.
func (w *jobWatcher) endLive() {
	if w.live {
		fmt.Fprintln(w.w)
		w.live = false
	}
}

// drawLive redraws the terminal's live line.
func (w *jobWatcher) drawLive(v *jobView) {
	if s := liveLine(v); s != "" && !v.Job.State.Terminal() {
		fmt.Fprintf(w.w, "\r\033[K%s", s)
		w.live = true
	} else {
		w.clearLive()
	}
}

// progressLines prints, off a terminal, a line for each tenth of progress
// a running lease has passed.
func (w *jobWatcher) progressLines(v *jobView) {
	for _, l := range v.Leases {
		if l.State != idlegrid.LeaseRunning {
			continue
		}
		if d := int(l.Progress * 10); d > w.decile[l.ID] && d < 10 {
			w.decile[l.ID] = d
			w.line(v.At, fmt.Sprintf("%d%% done on %s", d*10, v.Nodes.name(l.NodeID)))
		}
	}
}

// liveLine is the status of the job now: how long it has waited, or the
// progress of its running leases.
func liveLine(v *jobView) string {
	j := v.Job
	if j.State == idlegrid.JobQueued {
		line := fmt.Sprintf("queued for %s", since(j.CreatedAt, v.At))
		if latest, ok := j.LatestStart(); ok {
			line += fmt.Sprintf("; must start within %s to finish by its deadline", since(v.At, latest))
		}
		return line
	}
	var running []*idlegrid.Lease
	for _, l := range v.Leases {
		if !l.State.Terminal() {
			running = append(running, l)
		}
	}
	if len(running) == 0 {
		return ""
	}
	progress, started := 0.0, (*time.Time)(nil)
	for _, l := range running {
		progress += l.Progress / float64(len(running))
		if l.StartedAt != nil && (started == nil || l.StartedAt.Before(*started)) {
			started = l.StartedAt
		}
	}
	where := v.Nodes.name(running[0].NodeID)
	if len(running) > 1 {
		where += fmt.Sprintf(" and %d more", len(running)-1)
	}
	if started == nil {
		return startingLine(running, where, v.At)
	}
	return fmt.Sprintf("%s %3.0f%% on %s · %s of %s", bar(progress, 24), 100*progress, where,
		since(*started, v.At), seconds(j.DurationSeconds))
}

// startingLine is the live line of a job whose leases have not started:
// how long since they were placed, and how far the first one's node has
// pulled the job's image, or a word on why it takes a while (a node pulls
// the image before it starts the lease, minutes for a large one).
func startingLine(leases []*idlegrid.Lease, where string, now time.Time) string {
	placed, startBy := leases[0].CreatedAt, leases[0].StartBy
	for _, l := range leases[1:] {
		if l.CreatedAt.Before(placed) {
			placed = l.CreatedAt
		}
		if l.StartBy != nil && (startBy == nil || l.StartBy.Before(*startBy)) {
			startBy = l.StartBy
		}
	}
	line := "starting on " + where
	if placed.IsZero() {
		return line
	}
	line += " for " + since(placed, now).String()
	if startBy != nil {
		// The renter learns why it may go back to the queue before it
		// starts: it must end by its deadline, before the node's window
		// closes, or before another job's reservation of the node starts.
		line += " (to start by " + startBy.UTC().Format("15:04:05 MST") + ", or it goes back to the queue)"
	}
	if p := leases[0].Pull; p != nil && p.ImageBytes > 0 {
		done := float64(p.PulledBytes) / float64(p.ImageBytes)
		return fmt.Sprintf("%s: pulling the job's image %s %3.0f%%, %s of %s", line, bar(done, 24), 100*done,
			humanize.IBytes(uint64(p.PulledBytes)), humanize.IBytes(uint64(p.ImageBytes)))
	}
	if since(placed, now) >= 30*time.Second {
		line += " (the node pulls the job's image first)"
	}
	return line
}

// since is the whole seconds from t to now, never negative (the server's
// clock and this machine's may differ a little).
func since(t, now time.Time) time.Duration {
	return max(now.Sub(t), 0).Truncate(time.Second)
}

// change is one line of a watch: what happened and, where the server
// recorded it, when (a lease's placement, start, notice and end); zero
// when the view is all that dates it. A watch that joins a job midway so
// dates what happened before it joined as it happened.
type change struct {
	at   time.Time
	text string
}

// when is the time c happened, or view's when it does not say.
func (c change) when(view time.Time) time.Time {
	if c.at.IsZero() {
		return view
	}
	return c.at
}

// texts is changes' lines without their times.
func texts(changes []change) []string {
	out := make([]string, len(changes))
	for i, c := range changes {
		out[i] = c.text
	}
	return out
}

// undated is lines with no time of their own.
func undated(lines ...string) []change {
	out := make([]change, len(lines))
	for i, l := range lines {
		out[i] = change{text: l}
	}
	return out
}

// jobChanges says what changed in a job and its leases from prev to next;
// prev nil (the first view) says where the job stands.
func jobChanges(prev, next *jobView) []change {
	var out []change
	before := map[string]*idlegrid.Lease{}
	if prev != nil {
		for _, l := range prev.Leases {
			before[l.ID] = l
		}
	}
	for _, l := range next.Leases {
		out = append(out, leaseChanges(before[l.ID], l, next.Nodes)...)
	}
	j := next.Job
	switch {
	case prev == nil:
		out = append(out, undated(jobStateLine(nil, j)...)...)
	case prev.Job.State != j.State || (j.State == idlegrid.JobQueued && prev.Job.Reason != j.Reason):
		out = append(out, undated(jobStateLine(prev.Job, j)...)...)
	}
	return out
}

// jobStateLine says the job's state, when the leases' lines do not.
func jobStateLine(prev, j *idlegrid.Job) []string {
	charged := "charged " + j.ChargedMicros.String()
	switch j.State {
	case idlegrid.JobQueued:
		reason := j.Reason
		if reason == "" {
			reason = "the market has not looked at it yet"
		}
		if prev == nil || prev.State == idlegrid.JobQueued {
			if prev == nil {
				return []string{"waits: " + reason, "  why, node by node: idlegrid job explain " + j.ID}
			}
			return []string{"waits: " + reason}
		}
		return []string{"back in the queue: " + reason, "  " + resumeLine(j)}
	case idlegrid.JobSucceeded:
		return []string{"succeeded; " + charged + " in all"}
	case idlegrid.JobFailed, idlegrid.JobCancelled:
		return []string{fmt.Sprintf("%s: %s; %s in all", j.State, orDash(j.Reason), charged)}
	}
	return nil
}

// resumeLine says where a requeued job's next run starts: from the
// checkpoint its last run reported, or over, from zero, when none was.
func resumeLine(j *idlegrid.Job) string {
	if j.CheckpointRef == "" {
		return "no checkpoint was reported: its next run starts from the beginning"
	}
	line := "its next run resumes from checkpoint " + j.CheckpointRef
	if j.ResumeSeconds > 0 && j.CheckpointNodeID != "" {
		line += fmt.Sprintf(" (%s of its %s done, kept on node %s)", seconds(j.ResumeSeconds), seconds(j.DurationSeconds), j.CheckpointNodeID)
	}
	return line
}

// leaseChanges says what changed in one lease; prev nil: it is new, and
// what it went through before (a notice too, if it has ended since) is
// said as well.
func leaseChanges(prev, l *idlegrid.Lease, nodes nodeNames) []change {
	var out []change
	on, seen := nodes.name(l.NodeID), prev != nil
	if !seen {
		out = append(out, change{l.CreatedAt, fmt.Sprintf("placed on %s: %d GPU(s) at %s, %s, attempt %d",
			nodes.placedOn(l.NodeID), len(l.GPUUUIDs), perGPUHour(l.PriceMicrosPerGPUHour), l.Tier, l.Attempt)})
		prev = &idlegrid.Lease{State: idlegrid.LeaseAssigned}
		if l.StartedAt != nil && l.State != idlegrid.LeaseRunning { // ended since it started: say both
			out = append(out, change{*l.StartedAt, "started on " + on})
		}
	}
	// A lease now running started before the checkpoints and the notice
	// said below; one that ended, after them.
	ended := stateChanges(prev, l, on)
	if l.State == idlegrid.LeaseRunning {
		out, ended = append(out, ended...), nil
	}
	switch {
	case l.CheckpointRef != "" && l.CheckpointRef != prev.CheckpointRef:
		out = append(out, change{text: fmt.Sprintf("checkpoint on %s: %s", on, l.CheckpointRef)})
	case l.CheckpointAt != nil && (prev.CheckpointAt == nil || l.CheckpointAt.Sub(*prev.CheckpointAt) > time.Second):
		// A running workload's checkpoints come as their times (its
		// runtime names the reference only when it exits). The server
		// places a checkpoint reported by its age in its own clock, and
		// keeps one within a second of the last as the same (an older
		// server let it creep on by each heartbeat's latency): within a
		// second it is the one said before.
		out = append(out, change{*l.CheckpointAt, fmt.Sprintf("checkpoint saved on %s at %s", on, l.CheckpointAt.Local().Format("15:04:05"))})
	}
	if line := stopLine(prev, l, on, !seen); line != "" {
		out = append(out, change{at: timeOr(l.NoticeAt), text: line})
	}
	return append(out, ended...)
}

// stateChanges says the state l moved to from prev's, dated as the server
// recorded the move.
func stateChanges(prev, l *idlegrid.Lease, on string) []change {
	if l.State == prev.State {
		return nil
	}
	at := l.EndedAt
	if l.State == idlegrid.LeaseRunning {
		at = l.StartedAt
	}
	var out []change
	for _, line := range leaseStateLine(l, on) {
		out = append(out, change{timeOr(at), line})
	}
	return out
}

// timeOr is *t, or the zero time for nil.
func timeOr(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// stopLine says that the server asked a live lease on node on to stop,
// when it newly did: "notice on" for a notice (its reason begins with
// idlegrid.NoticeStopPrefix: the lease has its notice period and its job
// is requeued), "stopping on" for any other stop, such as the renter's
// cancel, which also replaces a notice. Every stop sets the lease's
// NoticeAt, so only the reason tells a notice. "" when nothing changed.
// An ended lease's notice is said only when the watch first sees the
// lease (firstSight), and no other stop of it: its end says the rest.
func stopLine(prev, l *idlegrid.Lease, on string, firstSight bool) string {
	if l.State.Terminal() && !(firstSight && isNotice(l)) || l.StopRequested == "" || l.StopRequested == prev.StopRequested {
		return ""
	}
	if !isNotice(l) {
		return fmt.Sprintf("stopping on %s: %s", on, l.StopRequested)
	}
	if isNotice(prev) {
		return "" // the same notice, said before
	}
	by := "its notice period ends"
	if l.NoticeAt != nil {
		by = l.NoticeAt.Add(time.Duration(l.NoticeSeconds) * time.Second).Local().Format("15:04:05")
	}
	return fmt.Sprintf("notice on %s: it stops by %s (%s guaranteed): %s", on, by, seconds(l.NoticeSeconds), l.StopRequested)
}

// isNotice reports whether the stop asked of l is a notice.
func isNotice(l *idlegrid.Lease) bool {
	return strings.HasPrefix(l.StopRequested, idlegrid.NoticeStopPrefix)
}

// leaseStateLine says the state a lease on node on moved to.
func leaseStateLine(l *idlegrid.Lease, on string) []string {
	switch {
	case l.State == idlegrid.LeaseRunning:
		return []string{"started on " + on}
	case l.TakenBack():
		return []string{fmt.Sprintf("taken back from %s before it started: %s; charged %s", on, orDash(l.Reason), l.ChargedMicros)}
	case l.State.Terminal():
		line := fmt.Sprintf("%s on %s: %s; charged %s", l.State, on, orDash(l.Reason), l.ChargedMicros)
		if l.Fault == idlegrid.FaultProvider {
			line += " (the node's fault: you pay nothing for it)"
		}
		return []string{line}
	}
	return nil
}
