package cli

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// specFlags are job submit's flags for the fields of a job spec. Each one
// given overrides the job file's field.
type specFlags struct {
	name, image, kind, tier, region, residency string
	gpus, nodes, minVRAM, cpuCores, ramMB      int
	minTrustLevel                              int
	maxPrice                                   priceFlag
	duration, checkpointEvery                  durationFlag
	deadline                                   deadlineFlag
	reliabilityWeight                          float64
	models, avoid                              stringList
	datasets                                   datasetList
	envs                                       envList
	regionPreferred, verifiable                bool
}

func (f *specFlags) define(fs *flagSet) {
	f.envs = envList{}
	fs.StringVar(&f.name, "name", "", "a name for the job")
	fs.StringVar(&f.image, "image", "", "container image, e.g. ghcr.io/acme/trainer:1.4")
	fs.StringVar(&f.kind, "kind", "", "workload kind: training, fine-tuning, batch-inference, eval, sweep, other (default other)")
	fs.IntVar(&f.gpus, "gpus", 1, "GPUs per node")
	fs.IntVar(&f.nodes, "nodes", 1, "nodes, all placed at once")
	fs.Var(&f.models, "gpu-model", "acceptable GPU model, e.g. H100-80GB (repeat or comma-separate; default any)")
	fs.IntVar(&f.minVRAM, "min-vram-mb", 0, "minimum memory per GPU in MB")
	fs.IntVar(&f.cpuCores, "cpu-cores", 0, "CPU cores the job needs on each node; it gets no more (default 2 per GPU)")
	fs.IntVar(&f.ramMB, "ram-mb", 0, "memory in MB the job needs on each node; it gets no more (default 8192 per GPU)")
	fs.StringVar(&f.tier, "tier", "", "gold (guaranteed), silver (on demand) or bronze (interruptible) (default silver)")
	fs.Var(&f.maxPrice, "max-price", "the most you pay per GPU-hour, e.g. 2.50")
	fs.Var(&f.duration, "duration", "expected run time and time limit, e.g. 90m")
	fs.Var(&f.deadline, "deadline", "when the job must have finished: a time such as 2026-12-24T18:00:00Z, or a span from now such as 6h;\n"+
		"it starts only while its whole duration fits before then, and is cancelled once it no longer can")
	fs.Var(&f.checkpointEvery, "checkpoint-every", "how often the job saves a checkpoint it can resume from, e.g. 30m (default never;\n"+
		"bronze that checkpoints may take window fragments shorter than its run)")
	fs.StringVar(&f.region, "region", "", "region, e.g. eu-west")
	fs.BoolVar(&f.regionPreferred, "region-preferred", false, "treat --region as a preference, not a requirement")
	fs.StringVar(&f.residency, "residency", "", "required data jurisdiction, e.g. EU")
	fs.Float64Var(&f.reliabilityWeight, "reliability-weight", 0, "how much reliability counts against price, 0 to 4: nodes rank by ask ÷ reliability^weight (default 1)")
	fs.Var(&f.datasets, "dataset", "a dataset the job reads, NAME:SIZE_GB, e.g. imagenet:150 (repeatable);\n"+
		"nodes that cache it rank better by what moving SIZE_GB would cost")
	fs.BoolVar(&f.verifiable, "verifiable", false, "the job's output is deterministic, so the market may re-run a sample elsewhere to check it")
	fs.Var(&f.avoid, "avoid-provider", "a provider ID whose nodes must not run the job (repeat or comma-separate)")
	fs.IntVar(&f.minTrustLevel, "min-trust-level", 0, "the least trust level a node needs to run the job, in any tier (default 0: any node);\n"+
		"'idlegrid node reputation' shows a node's level, and a provider held for a proven offence is at 0")
	fs.Var(f.envs, "env", "environment variable KEY=VALUE (repeatable); the node's owner can read it, so pass\n"+
		"credentials only as short-lived, narrowly scoped tokens (docs/trust.md)")
}

// apply sets the fields of spec whose flags were given (set), and, when
// no job file or earlier job gave the spec (based false), the defaults
// of --gpus and --nodes too.
func (f *specFlags) apply(spec *idlegrid.JobSpec, set map[string]bool, based bool) {
	given := func(name string) bool { return set[name] || !based && (name == "gpus" || name == "nodes") }
	for _, o := range []struct {
		flag string
		do   func()
	}{
		{"gpus", func() { spec.GPUs = f.gpus }},
		{"nodes", func() { spec.Nodes = f.nodes }},
		{"name", func() { spec.Name = f.name }},
		{"image", func() { spec.Image = f.image }},
		{"kind", func() { spec.Kind = idlegrid.WorkloadKind(f.kind) }},
		// Only bronze is interruptible: a job copied from a bronze one
		// (--from) and moved to another tier is not.
		{"tier", func() {
			spec.Tier, spec.Interruptible = idlegrid.Tier(f.tier), idlegrid.Tier(f.tier) == idlegrid.TierBronze
		}},
		{"region", func() { spec.Region = f.region }},
		{"region-preferred", func() { spec.RegionPreferred = f.regionPreferred }},
		{"residency", func() { spec.Residency = f.residency }},
		{"gpu-model", func() { spec.GPUModels = f.models }},
		{"min-vram-mb", func() { spec.MinVRAMMB = f.minVRAM }},
		{"cpu-cores", func() { spec.CPUCores = f.cpuCores }},
		{"ram-mb", func() { spec.RAMMB = f.ramMB }},
		{"max-price", func() { spec.MaxPriceMicrosPerGPUHour = f.maxPrice.m }},
		{"duration", func() { spec.DurationSeconds = f.duration.secs }},
		{"deadline", func() { spec.Deadline = f.deadline.at }},
		{"checkpoint-every", func() { spec.CheckpointEverySeconds = f.checkpointEvery.secs }},
		{"reliability-weight", func() { spec.ReliabilityWeight = f.reliabilityWeight }},
		{"dataset", func() { spec.Datasets = f.datasets }},
		{"verifiable", func() { spec.Verifiable = f.verifiable }},
		{"avoid-provider", func() { spec.AvoidProviders = f.avoid }},
		{"min-trust-level", func() { spec.MinTrustLevel = f.minTrustLevel }},
	} {
		if given(o.flag) {
			o.do()
		}
	}
	if len(f.envs) > 0 && spec.Env == nil {
		spec.Env = map[string]string{}
	}
	for k, v := range f.envs {
		spec.Env[k] = v
	}
}

// problems are the mistakes in the flags given (set) that the spec cannot
// show: --nodes 0 would read as a spec that leaves the count out, one node.
func (f *specFlags) problems(set map[string]bool) []*idlegrid.Error {
	if set["nodes"] && f.nodes < 1 {
		return []*idlegrid.Error{idlegrid.Invalid("job.nodes", "must be between 1 and %d, got %d", idlegrid.MaxNodesPerJob, f.nodes)}
	}
	return nil
}

// flagsSet names the flags given on fs's command line.
func flagsSet(fs *flagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// deadlineFlag is --deadline: a time (RFC 3339, or a date and a time in
// UTC) or a span from now.
type deadlineFlag struct{ at *time.Time }

func (d *deadlineFlag) String() string {
	if d.at == nil {
		return ""
	}
	return d.at.Format(time.RFC3339)
}

func (d *deadlineFlag) Set(v string) error {
	at, err := parseDeadline(v, time.Now())
	if err != nil {
		return err
	}
	d.at = &at
	return nil
}

// parseDeadline reads a deadline as a time, "2026-12-24T18:00:00Z" or
// "2026-12-24 18:00" (UTC), or as a span from now, "6h" or "90m".
func parseDeadline(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("a span from now must be positive, got %q", v)
		}
		return now.Add(d).Truncate(time.Second).UTC(), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("must be %s, got %q", deadlineForms, v)
}

// deadlineForms says the ways a deadline may be written, in the flag and
// in a job file alike.
const deadlineForms = "a time such as 2026-12-24T18:00:00Z (or 2026-12-24 18:00, UTC) or a span from now such as 6h"

// datasetList is the repeatable --dataset NAME[:SIZE_GB].
type datasetList []idlegrid.Dataset

func (l *datasetList) String() string {
	var parts []string
	for _, d := range *l {
		parts = append(parts, fmt.Sprintf("%s:%d", d.Name, d.SizeGB))
	}
	return strings.Join(parts, ",")
}

func (l *datasetList) Set(v string) error {
	name, size, sized := strings.Cut(strings.TrimSpace(v), ":")
	if name == "" || !sized {
		return fmt.Errorf("want NAME:SIZE_GB, e.g. imagenet:150 (the size is what a node that caches it saves moving), got %q", v)
	}
	gb, err := strconv.ParseInt(size, 10, 64)
	if err != nil || gb < 0 {
		return fmt.Errorf("the size after %q must be whole gigabytes, e.g. %s:150, got %q", name+":", name, size)
	}
	*l = append(*l, idlegrid.Dataset{Name: name, SizeGB: gb})
	return nil
}
