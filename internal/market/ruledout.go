package market

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/idlegrid/idlegrid"
)

// ruledOut is what the nodes a job's hard constraints rule out have
// instead, for Explain's advice on a job that waits: their residencies,
// regions and GPU models, each with how many nodes have it, and the most
// GPU memory, CPU cores and RAM among those its VRAM, CPU and RAM rule
// out. A renter whose job waits reads there a value misspelt ("eu" for
// EU) or a constraint that rules out most of the market. All but CPU and
// RAM are the class's (classReason), so it counts the nodes of each class
// and reads those values once a class.
type ruledOut struct {
	classes map[*class]*ruledClass
	// maxCPU and maxRAMMB are the most CPU cores and RAM among the nodes
	// the job's CPU and RAM rule out, which are each node's own.
	maxCPU, maxRAMMB int
}

// ruledClass is a class whose nodes a hard constraint rules out: the
// reason, one of its nodes and how many.
type ruledClass struct {
	reason Reason
	nd     *node
	n      int
}

func newRuledOut() *ruledOut { return &ruledOut{classes: map[*class]*ruledClass{}} }

// add counts nd, which Explain found fails r first.
func (o *ruledOut) add(r Reason, nd *node) {
	switch r {
	case ReasonResidency, ReasonRegion, ReasonGPUModel, ReasonVRAM:
	case ReasonCPU:
		o.maxCPU = max(o.maxCPU, nd.n.CPUCores)
		return
	case ReasonRAM:
		o.maxRAMMB = max(o.maxRAMMB, nd.n.RAMMB)
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

func residencyOf(nd *node) []string { return []string{nd.n.Residency} }
func regionOf(nd *node) []string    { return []string{nd.n.Region} }

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
