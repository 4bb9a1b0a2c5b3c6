package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/market"
)

// jobCommand is "idlegrid job": what renters do.
type jobCommand struct{ env *env }

func (c *jobCommand) Run(ctx context.Context, args []string) error {
	return c.env.runGroup("job", "Jobs are what renters run: a container image on some GPUs, at a tier and a price cap.", []subcommand{
		{"submit", "submit a job from a file or flags", func(a []string) error { return c.submit(ctx, a) }},
		{"ls", "list jobs", func(a []string) error { return c.list(ctx, a) }},
		{"get", "show one job", func(a []string) error { return c.get(ctx, a) }},
		{"cancel", "cancel a job", func(a []string) error { return c.cancel(ctx, a) }},
		{"watch", "follow a job until it ends: placement, progress, notices, charges", func(a []string) error { return c.watch(ctx, a) }},
		{"explain", "say why a queued job has not started", func(a []string) error { return c.explain(ctx, a) }},
		{"leases", "list a job's leases", func(a []string) error { return c.leases(ctx, a) }},
		{"logs", "print the logs of a job's latest lease", func(a []string) error { return c.logs(ctx, a) }},
	}, args)
}

// stringList is a repeatable flag; each value may also be comma-separated.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// envList is a repeatable K=V flag.
type envList map[string]string

func (m envList) String() string { return "" }
func (m envList) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	m[k] = val
	return nil
}

// priceFlag is a decimal price flag, e.g. --max-price 2.50.
type priceFlag struct{ m idlegrid.Micros }

func (p *priceFlag) String() string {
	if p.m == 0 {
		return ""
	}
	return p.m.String()
}
func (p *priceFlag) Set(v string) error {
	m, err := idlegrid.ParseMicros(v)
	if err != nil {
		return fmt.Errorf("%v; write a decimal amount such as 2.50", err)
	}
	p.m = m
	return nil
}

// durationFlag is a duration in whole seconds, e.g. --duration 90m.
type durationFlag struct{ secs int64 }

func (d *durationFlag) String() string {
	if d.secs == 0 {
		return ""
	}
	return seconds(d.secs)
}
func (d *durationFlag) Set(v string) error {
	s, err := parseDurationSeconds(v)
	d.secs = s
	return err
}

const jobFileHelp = `

A job file is YAML or JSON with the fields of a job spec; unknown fields are
errors. For example:

	name: llama-finetune
	kind: fine-tuning          # training, fine-tuning, batch-inference, eval, sweep, other
	image: ghcr.io/acme/trainer:1.4
	command: [python, train.py, --epochs, "3"]
	env: {WANDB_MODE: offline}
	gpus: 2                    # GPUs per node (default 1)
	nodes: 1
	gpu_models: [H100-80GB, A100-80GB]
	tier: silver               # gold, silver or bronze
	max_price: "2.50"          # per GPU-hour; or max_price_micros_per_gpu_hour: 2500000
	duration: 2h               # or duration_seconds: 7200
	checkpoint_every: 30m      # how often it saves work it can resume from (default never)
	region: eu-west
	residency: EU
	deadline: 2026-12-24T18:00:00Z   # when it must have finished, or a span from now such as 6h;
	                                 # it starts only while its run fits before
	reliability_weight: 2      # how much reliability counts against price, 0 to 4 (default 1)
	datasets: [{name: imagenet, size_gb: 150}]   # nodes that cache them rank better
	verifiable: true           # deterministic output: the market may re-run a sample to check it
	avoid_providers: [acct_1k8lr82e8u8ob9jefcacou5q3]   # providers whose nodes must not run it
	min_trust_level: 1         # the least trust level a node needs, any tier (default 0: any node)

Flags given next to -f override the file's fields.`

func (c *jobCommand) submit(ctx context.Context, args []string) error {
	fs := c.env.flags("job submit", help{
		usage: "idlegrid job submit [-f job.yaml | --from JOB_ID] [flags] [-- command...]",
		about: `Submit a job. The market places it on the cheapest reliable node that
fits, at a price no higher than your cap, and holds the worst-case cost in
escrow until the job ends; you pay only for what ran.` + jobFileHelp,
		examples: `idlegrid job submit -f job.yaml
		idlegrid job submit --image ghcr.io/acme/trainer:1.4 --gpus 2 --gpu-model H100-80GB --tier gold --max-price 2.50 --duration 1h
		idlegrid job submit --image python:3.12 --kind eval --tier bronze --max-price 0.40 --duration 20m -- python eval.py
		idlegrid job submit -f job.yaml --wait --timeout 2h   # follow it; exit 1 if it fails
		idlegrid job submit --from job_abc123 --max-price 3.00   # run an earlier job again, with a higher cap
		idlegrid job submit -f job.yaml --idempotency-key nightly-2026-12-03   # from a script: run twice, it submits once
		idlegrid job submit -f job.yaml --sweep LR=1e-3,3e-4 --sweep BATCH=32,64   # a grid: four jobs, LR and BATCH in each one's env`,
	})
	r := c.env.remoteFlags(fs)
	var (
		file, from, key string
		sf              specFlags
		sweep           sweepFlag
		asJSON, wait    bool
	)
	fs.StringVar(&file, "f", "", "job file, YAML or JSON ('-' for standard input)")
	fs.StringVar(&from, "from", "", "start from the spec of this earlier job of yours, e.g. to run it again (flags override it)")
	fs.StringVar(&key, "idempotency-key", "", "submit at most once under this key: the same submission sent again with it shows the job the first made instead of making another, while that job is live and for 24 hours after it ends; after that the key makes a new job (default: a new key each time)")
	sf.define(fs)
	fs.Var(&sweep, "sweep", "run the job once for each value of an environment variable, NAME=V1,V2,… (repeat it for a grid: one job per combination, at most 1000)")
	fs.BoolVar(&asJSON, "json", false, "print the job as JSON (with --wait, each change as a line of JSON, as 'job watch --json')")
	fs.BoolVar(&wait, "wait", false, "follow the job until it ends, as 'idlegrid job watch' does; exit 1 if it fails or is cancelled")
	watch := watchFlags(fs, "wait")
	command, err := fs.parse(args)
	if err != nil {
		return err
	}
	if err := checkWaitFlags(fs, wait, watch); err != nil {
		return err
	} else if len(sweep) > 0 && wait {
		return usagef("--wait follows one job, and --sweep submits many; follow each with idlegrid job watch ID")
	}

	spec, err := c.baseSpec(ctx, r, file, from)
	if err != nil {
		return err
	}
	set := flagsSet(fs)
	sf.apply(&spec, set, file != "" || from != "")
	if len(command) > 0 {
		spec.Command = command
	}
	if err := checkFromDeadline(from, &spec, set, time.Now()); err != nil {
		return err
	}
	if err := checkSpec(&spec, file == "" && from == "", sf.problems(set)...); err != nil {
		return inJobFile(err, file, set)
	}

	cl, err := r.client()
	if err != nil {
		return err
	}
	if key == "" {
		key = idlegrid.NewID("sub")
	}
	if len(sweep) > 0 {
		return c.sweep(ctx, cl, spec, sweep, key, asJSON)
	}
	job, replayed, err := cl.SubmitJobOnce(ctx, spec, key)
	if err != nil {
		return submitFailed(ctx, err, key)
	}
	if !wait || !asJSON {
		if err := c.printSubmitted(job, replayed, asJSON, wait); err != nil {
			return err
		}
	}
	if !asJSON {
		c.noteUnoffered(ctx, cl, job)
	}
	if !asJSON && !wait { // a watch says why the job waits
		c.warnIfStuck(ctx, cl, job.ID)
	}
	if !asJSON {
		c.noteNoLogin(ctx, cl, job.Image)
	}
	if !wait {
		return nil
	}
	watch.json = asJSON
	return c.follow(ctx, cl, job.ID, *watch)
}

// baseSpec is the spec the flags amend: the job file's, an earlier job's
// (without what the market set on it: its checkpoint, a re-run's lease),
// or none.
func (c *jobCommand) baseSpec(ctx context.Context, r *remote, file, from string) (idlegrid.JobSpec, error) {
	switch {
	case file != "" && from != "":
		return idlegrid.JobSpec{}, usagef("give -f or --from, not both")
	case file != "":
		return readJobFile(c.env, file)
	case from == "":
		return idlegrid.JobSpec{}, nil
	}
	cl, err := r.client()
	if err != nil {
		return idlegrid.JobSpec{}, err
	}
	old, err := cl.FindJob(ctx, from)
	if err != nil {
		return idlegrid.JobSpec{}, err
	}
	return old.JobSpec.Submitted(), nil
}

// checkFromDeadline refuses a job submitted --from an earlier one whose
// deadline has passed (by now) unless --deadline gives it a new one: run
// again after a deadline cancelled it, it would be refused as a deadline
// not in the future, which the renter never typed.
func checkFromDeadline(from string, spec *idlegrid.JobSpec, set map[string]bool, now time.Time) error {
	if from == "" || set["deadline"] || spec.Deadline == nil || spec.Deadline.After(now) {
		return nil
	}
	return usagef("job %s's deadline, %s, has passed: give the new job one with --deadline (a time, or a span from now such as 6h)",
		from, spec.Deadline.UTC().Format(time.RFC3339))
}

// checkWaitFlags refuses the watch flags without --wait, and bad values.
func checkWaitFlags(fs *flagSet, wait bool, o *watchOptions) error {
	if !wait {
		var given []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "every" || f.Name == "timeout" {
				given = append(given, "--"+f.Name)
			}
		})
		if len(given) > 0 {
			return usagef("%s only applies with --wait; add --wait to follow the job", strings.Join(given, " and "))
		}
		return nil
	}
	return o.check()
}

// warnIfStuck says, right after a submission, when no node would take the
// job as the market stands: no online node meets its hardware and rules,
// or every one asks more than its cap; or when nodes would, but its
// renter cannot pay the escrow hold (funds, a spend limit), with what
// would let it start. Such a job waits until one would, or until its
// renter can pay, which a renter should hear now rather than find out
// later. Nothing is said when the market cannot be asked.
func (c *jobCommand) warnIfStuck(ctx context.Context, cl *client.Client, jobID string) {
	x, err := cl.Explain(ctx, jobID)
	if err != nil {
		return
	}
	if market.WaitsForMoney(x.Summary) { // nodes would take it, but its renter cannot pay the hold
		fmt.Fprintf(c.env.Out, "note: %s\n", x.Summary)
		for _, a := range x.Advice {
			fmt.Fprintf(c.env.Out, "      to start it: %s\n", a)
		}
		return
	}
	if note := stuckNote(x); note != "" {
		fmt.Fprintf(c.env.Out, "note: as the market stands no node will take it: %s\n"+
			"      it waits until one would; what rules the nodes out: idlegrid job explain %s\n", note, jobID)
	}
}

// noteUnoffered says, right after a submission, what the job requires
// that no node in the market offers now: a GPU model, a region (unless
// only preferred) or a residency, with what the market does offer. None
// has a fixed catalogue: a node offers what its driver reports and its
// owner says, so what none offers now is not refused, since a node may
// join that does; but a misspelt one would wait for ever. Nothing is said
// when the market cannot be asked.
func (c *jobCommand) noteUnoffered(ctx context.Context, cl *client.Client, job *idlegrid.Job) {
	if len(job.GPUModels) > 0 || job.Region != "" && !job.RegionPreferred {
		if stats, err := cl.Market(ctx); err == nil {
			c.noteModels(job, offeredIn(stats, func(st wire.MarketStat) string { return st.GPUModel }))
			c.noteRegion(job, offeredIn(stats, func(st wire.MarketStat) string { return st.Region }))
		}
	}
	c.noteResidency(ctx, cl, job)
}

// noteModels says which of the GPU models the job asks for none of the
// models offered has, and the one meant where a model offered begins with
// the name given ("H100" for H100-80GB).
func (c *jobCommand) noteModels(job *idlegrid.Job, offered []string) {
	if len(job.GPUModels) == 0 {
		return
	}
	var missing, meant []string
	for _, m := range job.GPUModels {
		if slices.ContainsFunc(offered, func(o string) bool { return strings.EqualFold(o, m) }) {
			return // a node offers one of them: the job can be placed on its model
		}
		missing = append(missing, m)
		meant = appendMeant(meant, offered, m)
	}
	fmt.Fprintf(c.env.Out, "note: no node in the market has a GPU of model %s; the models in it now: %s\n", strings.Join(missing, " or "), onOffer(offered))
	if len(meant) > 0 {
		fmt.Fprintf(c.env.Out, "      models are named in full: did you mean --gpu-model %s? (cancel this one with: idlegrid job cancel %s)\n", strings.Join(meant, ","), job.ID)
	} else {
		fmt.Fprintf(c.env.Out, "      it waits until a node with one joins; to run on another model: idlegrid job cancel %s, then submit with --gpu-model MODEL\n", job.ID)
	}
}

// noteRegion says when the region the job requires is none of the
// regions offered, and the one meant where one begins with it ("eu" for
// eu-west). A region only preferred is no requirement: the job runs
// elsewhere.
func (c *jobCommand) noteRegion(job *idlegrid.Job, offered []string) {
	if job.Region == "" || job.RegionPreferred || slices.Contains(offered, job.Region) {
		return
	}
	fmt.Fprintf(c.env.Out, "note: no node in the market is in region %s; the regions in it now: %s\n", job.Region, onOffer(offered))
	if meant := appendMeant(nil, offered, job.Region); len(meant) > 0 {
		fmt.Fprintf(c.env.Out, "      regions are named in full: did you mean --region %s? (cancel this one with: idlegrid job cancel %s)\n", strings.Join(meant, " or --region "), job.ID)
	} else {
		fmt.Fprintf(c.env.Out, "      it waits until a node there joins; to run elsewhere: idlegrid job cancel %s, then submit with --region REGION\n"+
			"      (or with --region-preferred, to prefer %s but run elsewhere when it has no node)\n", job.ID, job.Region)
	}
}

// noteResidency says when no node in the market has the residency the
// job requires, with the residencies there are. It asks for the nodes on
// offer a page at a time until one has it, and says nothing of a market
// too large to ask so.
func (c *jobCommand) noteResidency(ctx context.Context, cl *client.Client, job *idlegrid.Job) {
	if job.Residency == "" {
		return
	}
	var offered []string
	after := ""
	for range maxResidencyPages {
		nodes, err := cl.ListNodes(ctx, idlegrid.NodeFilter{Limit: defaultNodePage, After: after})
		if err != nil {
			return
		}
		for _, n := range nodes {
			switch {
			case n.State != idlegrid.NodeOnline:
			case strings.EqualFold(n.Residency, job.Residency):
				return // a node has it: the job can be placed under it
			case !slices.ContainsFunc(offered, func(o string) bool { return strings.EqualFold(o, n.Residency) }):
				offered = append(offered, n.Residency)
			}
		}
		if len(nodes) < defaultNodePage {
			slices.Sort(offered)
			fmt.Fprintf(c.env.Out, "note: no node in the market has residency %s; the residencies in it now: %s\n", job.Residency, onOffer(offered))
			fmt.Fprintf(c.env.Out, "      it waits until a node with it joins; to run under another: idlegrid job cancel %s, then submit with --residency RESIDENCY\n", job.ID)
			return
		}
		after = nodes[len(nodes)-1].ID
	}
}

// maxResidencyPages is how many pages of nodes noteResidency asks for at
// most.
const maxResidencyPages = 10

// onOffer lists what the market offers, or says it has no node.
func onOffer(offered []string) string {
	if len(offered) == 0 {
		return "none: no node is online"
	}
	return strings.Join(offered, ", ")
}

// appendMeant appends to meant each of offered that begins with name,
// whatever the case, and is not in meant already.
func appendMeant(meant, offered []string, name string) []string {
	for _, o := range offered {
		if strings.HasPrefix(strings.ToLower(o), strings.ToLower(name)) && !slices.Contains(meant, o) {
			meant = append(meant, o)
		}
	}
	return meant
}

// offeredIn is what of (a GPU model, a region) the market's stats hold,
// in order: that of the nodes online, whether their windows are open or
// not, and that sold lately.
func offeredIn(stats []wire.MarketStat, of func(wire.MarketStat) string) []string {
	var offered []string
	for _, st := range stats {
		if v := of(st); v != "" && !slices.Contains(offered, v) {
			offered = append(offered, v)
		}
	}
	slices.Sort(offered)
	return offered
}

// noteNoLogin says, when the image is on a registry other than Docker Hub
// for which the renter keeps no login, how to add one should the image be
// private: the node would find out only when it pulls.
func (c *jobCommand) noteNoLogin(ctx context.Context, cl *client.Client, image string) {
	reg, err := idlegrid.ImageRegistry(image)
	if err != nil || reg == "docker.io" {
		return
	}
	logins, err := cl.ListRegistryLogins(ctx, "")
	if err != nil || slices.ContainsFunc(logins, func(l *idlegrid.RegistryLogin) bool { return l.Registry == reg }) {
		return
	}
	fmt.Fprintf(c.env.Out, "note: you keep no login for %s; if %s is private there, add one before the job starts:\n"+
		"      echo \"$TOKEN\" | idlegrid registry login %s -u USER --password-stdin\n", reg, image, reg)
}

// stuckNote says why no node would take the explained job, or "" when
// one could now or later (a fit, a reservation or an estimated start).
func stuckNote(x *wire.Explanation) string {
	if x.Fits > 0 || x.Reservation != nil || !x.EstimatedStart.IsZero() || x.EstimateNote == "" {
		return ""
	}
	return strings.TrimPrefix(x.EstimateNote, "unknown: ")
}

// submitFailed explains a submission that failed: one whose answer was
// lost may have been stored all the same, and the same key sent again says
// which.
func submitFailed(ctx context.Context, err error, key string) error {
	if !answerLost(ctx, err) {
		return err
	}
	return withHint(err, "it may have been submitted before the answer was lost: run the same command with --idempotency-key "+key+
		" to submit it at most once (it shows the job if there is one), or look with 'idlegrid job ls'")
}

// answerLost reports whether err, from a request that creates something,
// may have come after the server stored it: the request went out and no
// answer came. One the server answered, refused, or never sent for want
// of a connection (or cancelled here) stored nothing.
func answerLost(ctx context.Context, err error) bool {
	var answered *idlegrid.Error
	var op *net.OpError
	return !(errors.As(err, &answered) || ctx.Err() != nil || errors.As(err, &op) && op.Op == "dial")
}

// printSubmitted says what was submitted and how to follow it.
func (c *jobCommand) printSubmitted(job *idlegrid.Job, replayed, asJSON, wait bool) error {
	if asJSON {
		return printJSON(c.env.Out, job)
	}
	if replayed {
		fmt.Fprintf(c.env.Out, "already submitted under idempotency key %s: %s (%s), not submitted again\n", job.IdempotencyKey, job.ID, job.State)
	} else {
		fmt.Fprintf(c.env.Out, "submitted %s (%s, %d node(s) x %d GPU(s), cap %s, up to %s)\n",
			job.ID, job.Tier, job.Nodes, job.GPUs, perGPUHour(job.MaxPriceMicrosPerGPUHour), seconds(job.DurationSeconds))
	}
	if !wait {
		fmt.Fprintf(c.env.Out, "follow it with: idlegrid job watch %s    (logs: idlegrid job logs %s -f)\n", job.ID, job.ID)
	}
	if job.Tier == idlegrid.TierBronze && job.CheckpointEverySeconds == 0 {
		fmt.Fprintln(c.env.Out, "note: bronze that cannot resume starts only where a node's window covers its whole run;\n"+
			"      if it saves checkpoints, say how often with --checkpoint-every to use shorter idle windows too")
	}
	return nil
}

// checkSpec normalises spec and validates it here, so that every mistake
// is named before anything is sent; the server checks again. found are
// the problems the flags had already, which Validate does not repeat. A
// required field missing from a spec made of flags alone (fromFlags) is
// named as its flag, a mistake in the command line; from a job file, as
// the file's field.
func checkSpec(spec *idlegrid.JobSpec, fromFlags bool, found ...*idlegrid.Error) error {
	spec.Normalize()
	ps := found
	covered := map[string]bool{} // the spec's fields a missing flag's problem already names
	for _, p := range found {
		covered[p.Field] = true
	}
	require := func(missing bool, field, name, flag, example, key string) {
		switch {
		case !missing:
			return
		case fromFlags:
			ps = append(ps, idlegrid.Invalid(flag, "required: give %s, e.g. %s %s, or a job file with -f", name, flag, example))
		default:
			ps = append(ps, idlegrid.Invalid("job."+key, "required: give %s %s or %s in the job file", flag, example, key))
		}
		covered[field] = true
	}
	require(spec.Image == "", "job.image", "the container image", "--image", "ghcr.io/acme/trainer:1.4", "image")
	require(spec.MaxPriceMicrosPerGPUHour == 0, "job.max_price_micros_per_gpu_hour", "the most you pay per GPU-hour", "--max-price", "2.50", "max_price")
	require(spec.DurationSeconds == 0, "job.duration_seconds", "the run time", "--duration", "1h", "duration")
	var e *idlegrid.Error
	if errors.As(spec.Validate(time.Now()), &e) {
		for _, p := range e.All() {
			if !covered[p.Field] {
				ps = append(ps, p)
			}
		}
	}
	return idlegrid.Problems(ps)
}

// inJobFile names the job file in the problems err finds in the spec's
// fields that came from it, "job.yaml: job.gpus", as a problem found
// while reading it is named; those of the flags given (typed) are left
// for Main to name as the flags.
func inJobFile(err error, file string, typed map[string]bool) error {
	var ie *idlegrid.Error
	if file == "" || !errors.As(err, &ie) {
		return err
	}
	source := file
	if file == "-" {
		source = "standard input"
	}
	ps := ie.All()
	inFile := 0
	for i, p := range ps {
		if !strings.HasPrefix(p.Field, "--") && flagOf(p.Field, typed) == "" {
			named := *p
			named.Field = source + ": " + p.Field
			ps[i] = &named
			inFile++
		}
	}
	if inFile == len(ps) && ie.Code == idlegrid.EINVALID {
		// The file is at fault, not the flags: say where its fields
		// are described.
		return withHint(idlegrid.Problems(ps), "fix the job file where named above and try again; 'idlegrid job submit --help' shows a job file's fields")
	}
	return idlegrid.Problems(ps)
}

// readJobFile reads the job file at path ('-': standard input). A
// mistake in it is named with the file, "job.yaml: job.gpus", as
// inJobFile names one that checking the spec finds.
func readJobFile(e *env, path string) (idlegrid.JobSpec, error) {
	r := e.In
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return idlegrid.JobSpec{}, withHint(err, "give the path of a YAML or JSON job file; 'idlegrid job submit --help' shows one")
		}
		defer f.Close()
		r = f
	}
	spec, err := parseJobFile(r)
	var ie *idlegrid.Error
	if errors.As(err, &ie) {
		return spec, inJobFile(ie, path, nil)
	} else if err != nil && path != "-" {
		return spec, fmt.Errorf("%s: %w", path, err)
	}
	return spec, err
}

func (c *jobCommand) list(ctx context.Context, args []string) error {
	fs := c.env.flags("job ls", help{
		usage: "idlegrid job ls [--state queued,running] [--name PREFIX] [--limit N] [--before JOB_ID] [--json]",
		about: `List jobs, newest first: a renter sees their own, an admin sees all.
A full page ends with the command for the next one (--before, the last
job listed).`,
		examples: "idlegrid job ls\n idlegrid job ls --state queued --json\n idlegrid job ls --name lr-search-   # a sweep's jobs\n idlegrid job ls --limit 50 --before job_1k8u463kvnnic8nqadt023cub   # the next page",
	})
	r := c.env.remoteFlags(fs)
	var states stringList
	fs.Var(&states, "state", "only jobs in these states: queued, running, succeeded, failed, cancelled")
	limit := fs.Int("limit", 100, "at most this many jobs")
	before := fs.String("before", "", "list the jobs after this one, newest first: the next page after a page that ended with it")
	name := fs.String("name", "", "only jobs whose name begins with this, e.g. a sweep's: lr-search-")
	asJSON := fs.Bool("json", false, "print JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	} else if err := checkLimit(*limit, "jobs", 100); err != nil {
		return err
	}
	f := idlegrid.JobFilter{Limit: *limit, Before: *before, NamePrefix: *name}
	if f.States, err = parseStates(strings.Join(states, ","), idlegrid.JobState.Valid, "job", "queued, running, succeeded, failed or cancelled"); err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	jobs, err := cl.ListJobs(ctx, f)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(jobs))
	}
	if len(jobs) == 0 {
		return c.env.noneListed("job", "jobs", "submit one with 'idlegrid job submit'")
	}
	now := time.Now()
	t := newTable(c.env.Out, "ID", "NAME", "STATE", "TIER", "GPUS", "CAP", "CHARGED", "AGE", "REASON")
	for _, j := range jobs {
		t.row(j.ID, orDash(clip(j.Name, 24)), j.State, j.Tier, fmt.Sprintf("%dx%d", j.Nodes, j.GPUs),
			perGPUHour(j.MaxPriceMicrosPerGPUHour), j.ChargedMicros, age(j.CreatedAt, now), orDash(clip(j.Reason, 60)))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(jobs) == 0 {
		return nil
	}
	cmd := "idlegrid job ls" + statesFlag(states)
	if *name != "" {
		cmd += " --name " + *name
	}
	return nextPage(c.env.Out, cmd, len(jobs), *limit, jobs[len(jobs)-1].ID)
}

// maxPage is the most a listing's --limit may ask the server for.
const maxPage = 10000

// checkLimit refuses a --limit of a listing that no server takes: 0 or
// less would not list a page, and the pages after it would never end.
func checkLimit(n int, what string, def int) error {
	if n < 1 || n > maxPage {
		return usagef("--limit: %d is out of range; give 1 to %d %s, or leave it out for %d", n, maxPage, what, def)
	}
	return nil
}

// statesFlag is " --state a,b" for the states given, or "".
func statesFlag(states []string) string {
	if len(states) == 0 {
		return ""
	}
	return " --state " + strings.Join(states, ",")
}

// nonNil makes an empty listing print as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (c *jobCommand) get(ctx context.Context, args []string) error {
	fs := c.env.flags("job get", help{
		usage:    "idlegrid job get ID [--json]",
		about:    "Show a job: its spec, its state and why, and what it has been charged.",
		examples: "idlegrid job get job_abc123\n idlegrid job get job_abc123 --json",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "one job ID")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	j, err := cl.FindJob(ctx, args[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, j)
	}
	return printJob(c.env, j)
}

func printJob(e *env, j *idlegrid.Job) error {
	t := newTable(e.Out, "ID", j.ID)
	t.row("Name", orDash(j.Name))
	t.row("State", j.State)
	t.row("Reason", orDash(j.Reason))
	t.row("Kind", j.Kind)
	t.row("Image", j.Image)
	t.row("Command", orDash(strings.Join(j.Command, " ")))
	t.row("Tier", j.Tier)
	t.row("GPUs", fmt.Sprintf("%d node(s) x %d GPU(s)", j.Nodes, j.GPUs))
	t.row("GPU models", orDash(strings.Join(j.GPUModels, ", ")))
	t.row("Max price", perGPUHour(j.MaxPriceMicrosPerGPUHour))
	t.row("Duration", seconds(j.DurationSeconds))
	t.row("Checkpoint", checkpointsEvery(j.CheckpointEverySeconds))
	t.row("Region", orDash(j.Region))
	t.row("Residency", orDash(j.Residency))
	t.row("Deadline", deadlineOf(j))
	if j.ResumeSeconds > 0 {
		on := ""
		if j.CheckpointNodeID != "" {
			on = " (on node " + j.CheckpointNodeID + ", which the market prefers; elsewhere it starts over)"
		}
		t.row("Resumes", fmt.Sprintf("from its checkpoint, %s of its %s run done%s", seconds(j.ResumeSeconds), seconds(j.DurationSeconds), on))
	}
	optionalRows(t, &j.JobSpec)
	t.row("Attempts", j.Attempts)
	t.row("Charged", j.ChargedMicros)
	t.row("Created", stamp(&j.CreatedAt))
	if j.IdempotencyKey != "" {
		t.row("Submitted", "under idempotency key "+j.IdempotencyKey)
	}
	t.row("Started", stamp(j.StartedAt))
	if j.CancelRequested() {
		t.row("Cancelled", stamp(j.CancelRequestedAt)+" by the renter (it ends cancelled once its leases stop)")
	}
	t.row("Ended", stamp(j.EndedAt))
	if err := t.flush(); err != nil {
		return err
	}
	if j.State != idlegrid.JobQueued {
		return nil
	}
	if j.Attempts > 0 { // back in the queue: preempted, its node lost, or its provider at fault
		fmt.Fprintf(e.Out, "\nIt ran before and went back to the queue; why each lease ended: idlegrid job leases %s\n", j.ID)
	}
	_, err := fmt.Fprintf(e.Out, "\nWhy it waits, node by node, with the asks to beat and an estimated start: idlegrid job explain %s\n", j.ID)
	return err
}

// deadlineOf says when the job must have finished, and the last start
// that lets it.
func deadlineOf(j *idlegrid.Job) string {
	latest, ok := j.LatestStart()
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%s (it must start by %s)", stamp(j.Deadline), stamp(&latest))
}

// optionalRows shows the spec's less common fields, those that are set.
func optionalRows(t *table, s *idlegrid.JobSpec) {
	if s.CPUCores > 0 {
		t.row("CPU cores", s.CPUCores)
	}
	if s.RAMMB > 0 {
		t.row("RAM", fmt.Sprintf("%d MB", s.RAMMB))
	}
	if s.ReliabilityWeight > 0 {
		t.row("Rel weight", fmt.Sprintf("%g: nodes rank by ask ÷ reliability^%g", s.ReliabilityWeight, s.ReliabilityWeight))
	}
	if len(s.Datasets) > 0 {
		var parts []string
		for _, d := range s.Datasets {
			parts = append(parts, fmt.Sprintf("%s (%d GB)", d.Name, d.SizeGB))
		}
		t.row("Datasets", strings.Join(parts, ", "))
	}
	if s.Verifiable {
		t.row("Verifiable", "yes: the market may re-run a sample elsewhere and compare the output")
	}
	if len(s.AvoidProviders) > 0 {
		t.row("Avoids", strings.Join(s.AvoidProviders, ", "))
	}
	if s.MinTrustLevel > 0 {
		t.row("Min trust", fmt.Sprintf("level %d, on every node", s.MinTrustLevel))
	}
}

// checkpointsEvery says how often a job saves work it can resume from.
func checkpointsEvery(secs int64) string {
	if secs <= 0 {
		return "never (a stop loses the whole run)"
	}
	return "every " + seconds(secs)
}

func (c *jobCommand) cancel(ctx context.Context, args []string) error {
	fs := c.env.flags("job cancel", help{
		usage: "idlegrid job cancel ID [ID...] | --name PREFIX [--json]",
		about: `Cancel jobs. A queued job ends at once; a running one is stopped on its
nodes and you pay for what ran until then. Given several, it cancels each
and says which it could not; --json prints the job, or a list of them.

--name cancels every queued or running job whose name begins so, e.g. a
sweep's. When more than one matches, it lists them first and cancels them
only with --yes, or once you answer y on a terminal; without either it
cancels nothing and exits 2. Scripts give --yes.`,
		examples: "idlegrid job cancel job_abc123\n idlegrid job cancel job_abc123 job_def456 job_ghi789\n idlegrid job cancel --name lr-search-   # lists a sweep's jobs that have not ended, and asks\n idlegrid job cancel --name lr-search- --yes   # cancels them without asking",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print the job as JSON (a list, given several)")
	name := fs.String("name", "", "cancel the queued and running jobs whose name begins with this, e.g. a sweep's: lr-search-")
	yes := fs.Bool("yes", false, "with --name, cancel every job that matches without asking, however many")
	args, err := fs.parseArgs(args, 0, 1000, "one or more job IDs")
	if err != nil {
		return err
	} else if *name == "" && len(args) == 0 {
		return usagef("give the IDs of the jobs to cancel, or --name and the start of their names, e.g. idlegrid job cancel job_abc123")
	} else if *name != "" && len(args) > 0 {
		return usagef("give the IDs of the jobs to cancel or --name, not both")
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	if *name != "" {
		jobs, err := liveJobsNamed(ctx, cl, *name)
		if err != nil {
			return err
		} else if len(jobs) == 0 {
			if *asJSON { // the list of those cancelled, as for a match; the words on stderr
				fmt.Fprintf(c.env.Err, "no queued or running job's name begins with %q: nothing to cancel\n", *name)
				return printJSON(c.env.Out, []*idlegrid.Job{})
			}
			fmt.Fprintf(c.env.Out, "no queued or running job's name begins with %q: nothing to cancel\n", *name)
			return nil
		} else if len(jobs) > 1 && !*yes {
			if err := c.confirmCancel(jobs, *name); err != nil {
				return err
			}
		}
		args = make([]string, len(jobs))
		for i, j := range jobs {
			args[i] = j.ID
		}
	}
	if len(args) > 1 || *name != "" {
		return c.cancelEach(ctx, cl, args, *asJSON)
	}
	j, err := cl.CancelJob(ctx, args[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, j)
	}
	c.printCancelled(ctx, cl, j)
	return nil
}

// printCancelled says what a cancel did: a queued job ends at once; a
// running one ends when its nodes have stopped its leases, and until
// then it still runs, and costs.
func (c *jobCommand) printCancelled(ctx context.Context, cl *client.Client, j *idlegrid.Job) {
	if j.State.Terminal() {
		fmt.Fprintf(c.env.Out, "%s: %s (%s)\n", j.ID, j.State, orDash(j.Reason))
		return
	}
	var nodes []string
	if leases, err := cl.ListLeases(ctx, idlegrid.LeaseFilter{JobID: j.ID}); err == nil {
		for _, l := range leases {
			if !l.State.Terminal() {
				nodes = append(nodes, l.NodeID)
			}
		}
	}
	stopping, they := "its leases", "they stop"
	if len(nodes) == 1 {
		stopping, they = "its lease on "+nodes[0], "it stops"
	} else if len(nodes) > 1 {
		stopping += " on " + strings.Join(nodes, ", ")
	}
	fmt.Fprintf(c.env.Out, "%s: cancelling: stopping %s; the job is cancelled once %s, and you pay for what ran until then (idlegrid job watch %s)\n",
		j.ID, stopping, they, j.ID)
}

// liveJobsNamed lists the caller's queued and running jobs whose name
// begins with prefix, every page of them.
func liveJobsNamed(ctx context.Context, cl *client.Client, prefix string) ([]*idlegrid.Job, error) {
	f := idlegrid.JobFilter{NamePrefix: prefix, States: []idlegrid.JobState{idlegrid.JobQueued, idlegrid.JobRunning}, Limit: 1000}
	var all []*idlegrid.Job
	for {
		jobs, err := cl.ListJobs(ctx, f)
		if err != nil {
			return nil, err
		}
		all = append(all, jobs...)
		if len(jobs) < f.Limit {
			return all, nil
		}
		f.Before = jobs[len(jobs)-1].ID
	}
}

// confirmCancel lists, on stderr, the jobs "job cancel --name" would
// cancel, and asks on a terminal whether to; elsewhere (a script, a pipe)
// it cancels nothing without --yes. A prefix catches more than one meant
// ("w" is every job named w…), so several are cancelled only when asked.
func (c *jobCommand) confirmCancel(jobs []*idlegrid.Job, prefix string) error {
	fmt.Fprintf(c.env.Err, "%d queued or running jobs' names begin with %q:\n", len(jobs), prefix)
	t := newTable(c.env.Err, "  ID", "NAME", "STATE", "TIER", "GPUS")
	for _, j := range jobs {
		t.row("  "+j.ID, orDash(clip(j.Name, 40)), j.State, j.Tier, fmt.Sprintf("%dx%d", j.Nodes, j.GPUs))
	}
	if err := t.flush(); err != nil {
		return err
	}
	return c.env.confirm(fmt.Sprintf("cancel all %d?", len(jobs)),
		fmt.Sprintf("cancelled nothing: cancel these %d jobs with --yes (idlegrid job cancel --name %s --yes), or give the IDs of those to cancel", len(jobs), prefix),
		"cancelled nothing")
}

// cancelEach cancels each of ids, saying on stderr why any could not be,
// and fails naming those.
func (c *jobCommand) cancelEach(ctx context.Context, cl *client.Client, ids []string, asJSON bool) error {
	cancelled := []*idlegrid.Job{}
	var failed []string
	for _, id := range ids {
		j, err := cl.CancelJob(ctx, id)
		if err != nil {
			fmt.Fprintf(c.env.Err, "idlegrid: %s: %s\n", id, idlegrid.ErrorMessage(err))
			failed = append(failed, id)
			continue
		}
		cancelled = append(cancelled, j)
		if !asJSON {
			c.printCancelled(ctx, cl, j)
		}
	}
	if asJSON {
		if err := printJSON(c.env.Out, cancelled); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d jobs not cancelled: %s", len(failed), len(ids), strings.Join(failed, " "))
	}
	return nil
}

func (c *jobCommand) leases(ctx context.Context, args []string) error {
	fs := c.env.flags("job leases", help{
		usage:    "idlegrid job leases ID [--json]",
		about:    "List the leases of a job: which node ran it, at what locked price, and how it ended.",
		examples: "idlegrid job leases job_abc123",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	args, err := fs.parseArgs(args, 1, 1, "one job ID")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	leases, err := cl.ListLeases(ctx, idlegrid.LeaseFilter{JobID: args[0]})
	var job *idlegrid.Job
	if err != nil {
		return err
	} else if len(leases) == 0 { // none, or no such job of yours
		if job, err = cl.FindJob(ctx, args[0]); err != nil {
			return err
		}
	}
	if *asJSON {
		return printJSON(c.env.Out, nonNil(leases))
	}
	if job != nil { // and no lease: say why, not a bare header
		switch job.State {
		case idlegrid.JobQueued:
			_, err = fmt.Fprintf(c.env.Out, "%s has no lease yet: it is queued ('idlegrid job explain %s' says why it waits)\n", job.ID, job.ID)
		case idlegrid.JobCancelled, idlegrid.JobFailed:
			_, err = fmt.Fprintf(c.env.Out, "%s has no lease: it ended, %s, before it was placed on a node\n", job.ID, job.State)
		default:
			_, err = fmt.Fprintf(c.env.Out, "%s has no lease yet ('idlegrid job get %s' shows its state)\n", job.ID, job.ID)
		}
		return err
	}
	nodes := nodeNames{}
	nodes.learn(ctx, cl, leases)
	return printLeases(c.env, leases, nodes)
}

// printLeases lists leases with their nodes named as their owners name
// them (by ID alone where nodes do not know them), beside the ID that
// "node get" takes, and what set each price ('lease get' says how in full).
func printLeases(e *env, leases []*idlegrid.Lease, nodes nodeNames) error {
	t := newTable(e.Out, "ID", "NODE", "NODE ID", "ATTEMPT", "STATE", "GPUS", "PRICE", "PRICED BY", "HOLD", "CHARGED", "REASON")
	for _, l := range leases {
		t.row(l.ID, nodes.name(l.NodeID), l.NodeID, l.Attempt, l.StateWord(), len(l.GPUUUIDs), perGPUHour(l.PriceMicrosPerGPUHour),
			pricedBy(l.PriceNote), l.HoldMicros, l.ChargedMicros, orDash(clip(l.Reason, 50)))
	}
	return t.flush()
}

// pricedBy says in a word or two what set a lease's price, from the
// opening of its price note (internal/market/note.go writes them).
func pricedBy(note string) string {
	for _, p := range []struct{ opening, by string }{
		{"ask ", "the ask"},
		{"second score against a shadow runner-up", "a busy rival"},
		{"second score", "the runner-up"},
		{"uniform clearing", "gang clearing"},
		{"no ", "the cap"},
	} {
		if strings.HasPrefix(note, p.opening) {
			return p.by
		}
	}
	return orDash(clip(note, 20))
}

// latestLease returns the job's lease of the highest attempt, or nil.
func latestLease(ctx context.Context, cl *client.Client, jobID string) (*idlegrid.Lease, error) {
	leases, err := cl.ListLeases(ctx, idlegrid.LeaseFilter{JobID: jobID})
	if err != nil {
		return nil, err
	}
	var latest *idlegrid.Lease
	for _, l := range leases {
		if latest == nil || l.Attempt > latest.Attempt || (l.Attempt == latest.Attempt && l.CreatedAt.After(latest.CreatedAt)) {
			latest = l
		}
	}
	return latest, nil
}
