package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// A sweep is one job spec run over a grid of settings: each --sweep
// NAME=V1,V2,… is an environment variable and its values, and the sweep
// submits one job for each combination, the variables set in its env and
// its name numbered. Each job goes in under the submission's idempotency
// key and its number, so a sweep cut short is finished, without a job
// twice, by the same command with the same key.

// maxSweepJobs bounds one sweep.
const maxSweepJobs = 1000

var sweepNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// sweepVar is one --sweep: a variable and its values, in order.
type sweepVar struct {
	name   string
	values []string
}

// sweepFlag is the repeatable --sweep NAME=V1,V2,….
type sweepFlag []sweepVar

func (f *sweepFlag) String() string {
	var parts []string
	for _, v := range *f {
		parts = append(parts, v.name+"="+strings.Join(v.values, ","))
	}
	return strings.Join(parts, " ")
}

func (f *sweepFlag) Set(s string) error {
	name, list, ok := strings.Cut(s, "=")
	switch {
	case !ok || !sweepNameRE.MatchString(name):
		return fmt.Errorf("want NAME=V1,V2,… with NAME an environment variable such as LR, got %q", s)
	case strings.HasPrefix(strings.ToUpper(name), "IDLEGRID_") || strings.HasPrefix(strings.ToUpper(name), "NVIDIA_"):
		return fmt.Errorf("%s is reserved: NVIDIA_* and IDLEGRID_* are set by the node", name)
	case slices.ContainsFunc(*f, func(v sweepVar) bool { return v.name == name }):
		return fmt.Errorf("%s is swept twice; give all its values in one --sweep", name)
	}
	var values []string
	for _, v := range strings.Split(list, ",") {
		if v = strings.TrimSpace(v); v == "" || slices.Contains(values, v) {
			return fmt.Errorf("%s: values must be neither empty nor repeated, got %q", name, list)
		}
		values = append(values, v)
	}
	*f = append(*f, sweepVar{name: name, values: values})
	return nil
}

// points lists the sweep's combinations, the first variable's values
// changing slowest.
func (f sweepFlag) points() ([]map[string]string, error) {
	n := 1
	for _, v := range f {
		if n *= len(v.values); n > maxSweepJobs {
			return nil, usagef("--sweep: the grid holds more than %d jobs; sweep fewer values", maxSweepJobs)
		}
	}
	out := []map[string]string{{}}
	for _, v := range f {
		var next []map[string]string
		for _, p := range out {
			for _, val := range v.values {
				q := maps.Clone(p)
				q[v.name] = val
				next = append(next, q)
			}
		}
		out = next
	}
	return out, nil
}

// sweepSpecs is spec once for each point: its env with the point's
// values, its name numbered from 1.
func sweepSpecs(spec idlegrid.JobSpec, points []map[string]string) []idlegrid.JobSpec {
	name := spec.Name
	if name == "" {
		name = "sweep"
	}
	out := make([]idlegrid.JobSpec, len(points))
	for i, p := range points {
		s := spec
		s.Env = maps.Clone(spec.Env)
		if s.Env == nil {
			s.Env = map[string]string{}
		}
		maps.Copy(s.Env, p)
		s.Name = name + "-" + strconv.Itoa(i+1)
		out[i] = s
	}
	return out
}

// sweepName is the name the sweep's jobs share, less their numbers.
func sweepName(jobs []sweptJob) string {
	name := jobs[0].Name
	return name[:strings.LastIndex(name, "-")]
}

// sweptJob is a job of a sweep as submit --sweep lists it.
type sweptJob struct {
	*idlegrid.Job
	Settings map[string]string `json:"settings"` // the swept variables' values
	Replayed bool              `json:"replayed,omitempty"`
}

// submitSweep submits the sweep's specs, each under key and its number,
// saying how far it got, and lists the jobs.
func (c *jobCommand) submitSweep(ctx context.Context, cl *client.Client, sweep sweepFlag, specs []idlegrid.JobSpec,
	points []map[string]string, key string, asJSON bool) error {
	progress := sweepProgress{w: c.env.Err, tty: isTerminal(c.env.Err), of: len(specs)}
	var jobs []sweptJob
	for i, spec := range specs {
		job, replayed, err := cl.SubmitJobOnce(ctx, spec, fmt.Sprintf("%s-%d", key, i+1))
		if err != nil {
			progress.end()
			return withHint(fmt.Errorf("job %d of the sweep (%s): %w", i+1, spec.Name, err),
				fmt.Sprintf("%d of %d jobs went in; finish the sweep, none twice, by running the same command with --idempotency-key %s", i, len(specs), key))
		}
		jobs = append(jobs, sweptJob{Job: job, Settings: points[i], Replayed: replayed})
		progress.show(i + 1)
	}
	progress.end()
	if asJSON {
		return printJSON(c.env.Out, jobs)
	}
	if err := c.printSweep(sweep, jobs, key); err != nil {
		return err
	}
	// The jobs differ only in their environment: what a single job's
	// submission would note of its models, region or price, it notes of
	// the first.
	c.noteUnoffered(ctx, cl, jobs[0].Job)
	c.warnIfStuck(ctx, cl, jobs[0].ID)
	c.noteNoLogin(ctx, cl, specs[0].Image)
	return nil
}

// sweepProgress shows how much of a sweep went in: a bar redrawn on a
// terminal, else a line at each tenth.
type sweepProgress struct {
	w       io.Writer
	tty     bool
	of, was int // jobs in all, and submitted when last shown
}

func (p *sweepProgress) show(done int) {
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r\x1b[2Ksubmitting the sweep %s %d/%d", bar(float64(done)/float64(p.of), 20), done, p.of)
	case done*10/p.of > p.was*10/p.of || done == p.of:
		fmt.Fprintf(p.w, "submitted %d of the sweep's %d jobs\n", done, p.of)
	}
	p.was = done
}

func (p *sweepProgress) end() {
	if p.tty && p.was > 0 {
		fmt.Fprintln(p.w)
	}
}

// printSweep lists a sweep's jobs with their settings, and how to follow
// and cancel them.
func (c *jobCommand) printSweep(sweep sweepFlag, jobs []sweptJob, key string) error {
	fmt.Fprintf(c.env.Out, "submitted a sweep of %d jobs under idempotency key %s\n", len(jobs), key)
	headers := []string{"ID", "NAME"}
	for _, v := range sweep {
		headers = append(headers, v.name)
	}
	t := newTable(c.env.Out, append(headers, "STATE")...)
	for _, j := range jobs {
		row := []any{j.ID, j.Name}
		for _, v := range sweep {
			row = append(row, j.Settings[v.name])
		}
		state := string(j.State)
		if j.Replayed {
			state += " (submitted before)"
		}
		t.row(append(row, state)...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	name := sweepName(jobs)
	_, err := fmt.Fprintf(c.env.Out, "list them: idlegrid job ls --name %s-\nfollow one with: idlegrid job watch ID\n"+
		"cancel those not ended: idlegrid job cancel --name %s- --yes   (any job of yours named so)\n", name, name)
	return err
}

// sweep checks every job of the sweep before it submits any, so that a
// mistake in one is said before anything goes in.
func (c *jobCommand) sweep(ctx context.Context, cl *client.Client, spec idlegrid.JobSpec, sweep sweepFlag, key string, asJSON bool) error {
	points, err := sweep.points()
	if err != nil {
		return err
	}
	specs := sweepSpecs(spec, points)
	for i := range specs {
		if err := checkSpec(&specs[i], false); err != nil {
			return fmt.Errorf("job %d of the sweep (%s): %w", i+1, specs[i].Name, err)
		}
	}
	return c.submitSweep(ctx, cl, sweep, specs, points, key, asJSON)
}
