package market

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// ruledOut is what the nodes a job's hard constraints rule out have
// instead, for Explain's advice on a job that waits: their residencies,
// regions, GPU models, allowed kinds and sold tiers, each with how many
// nodes have it, the longest run allowed among those its duration rules
// out, the most GPU memory, CPU cores, RAM and usable GPUs among those its
// VRAM, CPU, RAM and GPU count rule out, the most reliable node below
// gold's bar and the highest trust level below the job's. A renter whose
// job waits reads there a value misspelt ("eu" for EU) or a constraint
// that rules out most of the market. Kind, longest run, region,
// residency, model and VRAM are the class's (classStaticReason), so it
// counts the nodes of each class and reads those values once a class; the
// rest are each node's own.
type ruledOut struct {
	classes map[*class]*ruledClass
	// maxCPU and maxRAMMB are the most CPU cores and RAM among the nodes
	// the job's CPU and RAM rule out, which are each node's own.
	maxCPU, maxRAMMB int
	// maxGPUs is the most GPUs that could serve the job on one node among
	// those with too few.
	maxGPUs int
	// sold counts, by tier rank, the tiers sold by the nodes that do not
	// sell the job's.
	sold [tierCount]int
	// maxRel and maxLevel are the best reliability and trust level among
	// the nodes below gold's bar.
	maxRel   float64
	maxLevel int
	gold     Config // the engine's bar for gold
	// maxTrust is the highest trust level among the nodes below the job's.
	maxTrust int
}

// ruledClass is a class whose nodes a hard constraint rules out: the
// reason, one of its nodes and how many.
type ruledClass struct {
	reason Reason
	nd     *node
	n      int
}

func newRuledOut(cfg Config) *ruledOut {
	return &ruledOut{classes: map[*class]*ruledClass{}, gold: cfg}
}

// add counts nd, which Explain found fails r first for job.
func (o *ruledOut) add(r Reason, nd *node, job *idlegrid.Job) {
	switch r {
	case ReasonResidency, ReasonRegion, ReasonGPUModel, ReasonVRAM, ReasonKind, ReasonMaxDuration:
	case ReasonCPU:
		o.maxCPU = max(o.maxCPU, nd.n.CPUCores)
		return
	case ReasonRAM:
		o.maxRAMMB = max(o.maxRAMMB, nd.n.RAMMB)
		return
	case ReasonGPUs:
		o.maxGPUs = max(o.maxGPUs, countUsable(job, nd.gpus))
		return
	case ReasonTier:
		for t := range tierCount {
			if nd.floors[t] > 0 {
				o.sold[t]++
			}
		}
		return
	case ReasonReliability:
		o.maxRel, o.maxLevel = max(o.maxRel, nd.n.Reliability), max(o.maxLevel, nd.n.Level)
		return
	case ReasonTrustLevel:
		o.maxTrust = max(o.maxTrust, nd.n.Level)
		return
	default:
		return
	}
	if c := o.classes[nd.cls]; c == nil {
		o.classes[nd.cls] = &ruledClass{reason: r, nd: nd, n: 1}
	} else if c.reason == r { // as it is for every node of the class
		c.n++
	}
}

// values counts, over the classes r ruled out, what value of each node
// tells them apart (a node may count under several, as GPU models do).
func (o *ruledOut) values(r Reason, of func(*node) []string) map[string]int {
	counts := map[string]int{}
	for _, c := range o.classes {
		if c.reason != r {
			continue
		}
		vs := of(c.nd)
		slices.Sort(vs)
		for _, v := range slices.Compact(vs) {
			counts[v] += c.n
		}
	}
	return counts
}

// maxVRAMMB is the most GPU memory among the nodes VRAM ruled out.
func (o *ruledOut) maxVRAMMB() int {
	most := 0
	for _, c := range o.classes {
		if c.reason == ReasonVRAM {
			for _, g := range c.nd.n.GPUs {
				most = max(most, g.VRAMMB)
			}
		}
	}
	return most
}

// maxJobSeconds is the longest run allowed by the nodes whose longest run
// ruled them out.
func (o *ruledOut) maxJobSeconds() int64 {
	var most int64
	for c, rc := range o.classes {
		if rc.reason == ReasonMaxDuration {
			most = max(most, c.key.maxJob)
		}
	}
	return most
}

func residencyOf(nd *node) []string { return []string{nd.n.Residency} }
func regionOf(nd *node) []string    { return []string{nd.n.Region} }

func kindsOf(nd *node) []string {
	var kinds []string
	for _, k := range nd.cls.kinds {
		kinds = append(kinds, string(k))
	}
	return kinds
}

func modelsOf(nd *node) []string {
	var models []string
	for _, g := range nd.n.GPUs {
		models = append(models, g.Model)
	}
	return models
}

// advice says, for each hard constraint of job that rules out nodes, how
// many and what they have instead.
func (o *ruledOut) advice(job *idlegrid.Job, rejections map[Reason]int) []string {
	var out []string
	if n := rejections[ReasonTier]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s not sell %s; %s", n, plural(n, "node does", "nodes do"), job.Tier, o.soldText(n)))
	}
	if n := rejections[ReasonKind]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s not allow %s work; %s only: %s",
			n, plural(n, "node does", "nodes do"), job.Kind, plural(n, "it allows", "they allow"), counted(o.values(ReasonKind, kindsOf))))
	}
	if n := rejections[ReasonMaxDuration]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s no run longer than %s, and its duration is %s; a shorter run (duration, --duration) would fit there",
			n, plural(n, "node takes", "nodes take"), runLength(o.maxJobSeconds()), runLength(job.DurationSeconds)))
	}
	if n := rejections[ReasonResidency]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s data under another residency than %s, which it requires: %s",
			n, plural(n, "node keeps its", "nodes keep their"), job.Residency, counted(o.values(ReasonResidency, residencyOf))))
	}
	if n := rejections[ReasonRegion]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s in another region than %s, which it requires: %s; a region it only prefers "+
			"(region_preferred, --region-preferred) lets it run elsewhere when %s has no room",
			n, plural(n, "node is", "nodes are"), job.Region, counted(o.values(ReasonRegion, regionOf)), job.Region))
	}
	if n := rejections[ReasonGPUModel]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s none of its GPU models (%s; models are named in full): %s",
			n, plural(n, "node has", "nodes have"), strings.Join(job.GPUModels, ", "), counted(o.values(ReasonGPUModel, modelsOf))))
	}
	if n := rejections[ReasonVRAM]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s GPUs with less memory than its %d MB; the most among them is %d MB",
			n, plural(n, "node has", "nodes have"), job.MinVRAMMB, o.maxVRAMMB()))
	}
	if n := rejections[ReasonReliability]; n > 0 {
		out = append(out, o.belowBarText(n))
	}
	if n := rejections[ReasonTrustLevel]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s below its trust level %d (min_trust_level, --min-trust-level); the highest among them is %d",
			n, plural(n, "node is", "nodes are"), job.MinTrustLevel, o.maxTrust))
	}
	if n := rejections[ReasonGPUs]; n > 0 {
		out = append(out, o.fewGPUsText(n, job))
	}
	if n := rejections[ReasonCPU]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s fewer CPU cores than its %d; the most among them is %d",
			n, plural(n, "node has", "nodes have"), job.CPUCores, o.maxCPU))
	}
	if n := rejections[ReasonRAM]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s less RAM than its %d MB; the most among them is %d MB",
			n, plural(n, "node has", "nodes have"), job.RAMMB, o.maxRAMMB))
	}
	return out
}

// maxCounted is how many values counted names before it sums the rest.
const maxCounted = 5

// counted lists the values of counts, the most common first, each with
// its count: "US (4), CH (1)"; past maxCounted, the rest as one.
func counted(counts map[string]int) string {
	values := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b))
	})
	var parts []string
	rest := 0
	for i, v := range values {
		if i >= maxCounted {
			rest += counts[v]
			continue
		}
		name := v
		if name == "" {
			name = "none given"
		}
		parts = append(parts, fmt.Sprintf("%s (%d)", name, counts[v]))
	}
	if others := len(values) - maxCounted; others > 0 {
		parts = append(parts, fmt.Sprintf("%d %s (%d)", others, plural(others, "other", "others"), rest))
	}
	return strings.Join(parts, ", ")
}

// soldText says which tiers the n nodes that do not sell a job's tier
// sell instead, in tier order.
func (o *ruledOut) soldText(n int) string {
	var sold []string
	for t, k := range o.sold {
		if k > 0 {
			sold = append(sold, fmt.Sprintf("%s (%d)", idlegrid.Tiers[t], k))
		}
	}
	if len(sold) == 0 {
		return plural(n, "it sells", "they sell") + " no tier now"
	}
	return plural(n, "it sells", "they sell") + ": " + strings.Join(sold, ", ")
}

// belowBarText says how far the n nodes below gold's bar are from it.
func (o *ruledOut) belowBarText(n int) string {
	bar := fmt.Sprintf("reliability at least %.2f", o.gold.GoldMinReliability)
	best := fmt.Sprintf("%.2f", o.maxRel)
	if o.gold.GoldMinLevel > 0 {
		bar += fmt.Sprintf(" and trust level at least %d", o.gold.GoldMinLevel)
		best += fmt.Sprintf(" at level %d", o.maxLevel)
	}
	return fmt.Sprintf("%d %s below gold's bar (%s); the most reliable of them has %s; silver runs on %s",
		n, plural(n, "node is", "nodes are"), bar, best, plural(n, "it", "them"))
}

// fewGPUsText says how the job could fit the n nodes with too few GPUs
// that could serve it: its GPUs spread evenly over more nodes, each with
// no more than the most of them has, when the market allows that many
// nodes.
func (o *ruledOut) fewGPUsText(n int, job *idlegrid.Job) string {
	of := ""
	if len(job.GPUModels) > 0 || job.MinVRAMMB > 0 {
		of = " of its models and memory"
	}
	text := fmt.Sprintf("%d %s fewer than its %d GPUs%s on one node; the most among them is %d",
		n, plural(n, "node has", "nodes have"), job.GPUs, of, o.maxGPUs)
	total := job.GPUs * max(job.Nodes, 1)
	for g := o.maxGPUs; g > 1 && total/g <= idlegrid.MaxNodesPerJob; g-- {
		if total%g == 0 {
			text += fmt.Sprintf("; if it can run across nodes, %d nodes of %d GPUs (nodes, gpus; --nodes %d --gpus %d) would fit there",
				total/g, g, total/g, g)
			break
		}
	}
	return text
}

// runLength writes a run's length in seconds as a duration without its
// zero parts: 30m, 4h, 1h30m.
func runLength(seconds int64) string {
	s := (time.Duration(seconds) * time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
