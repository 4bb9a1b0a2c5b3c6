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
// GPU memory among those its VRAM rules out. A renter whose job waits
// reads there a value misspelt ("eu" for EU) or a constraint that rules
// out most of the market.
type ruledOut struct {
	residency, region, model map[string]int
	maxVRAMMB                int
}

func newRuledOut() *ruledOut {
	return &ruledOut{residency: map[string]int{}, region: map[string]int{}, model: map[string]int{}}
}

// add counts nd, which Explain found fails r first.
func (o *ruledOut) add(r Reason, nd *node) {
	switch r {
	case ReasonResidency:
		o.residency[nd.n.Residency]++
	case ReasonRegion:
		o.region[nd.n.Region]++
	case ReasonGPUModel:
		var models []string
		for _, g := range nd.n.GPUs {
			models = append(models, g.Model)
		}
		slices.Sort(models)
		for _, m := range slices.Compact(models) {
			o.model[m]++
		}
	case ReasonVRAM:
		for _, g := range nd.n.GPUs {
			o.maxVRAMMB = max(o.maxVRAMMB, g.VRAMMB)
		}
	}
}

// advice says, for each hard constraint of job that rules out nodes, how
// many and what they have instead.
func (o *ruledOut) advice(job *idlegrid.Job, rejections map[Reason]int) []string {
	var out []string
	if n := rejections[ReasonResidency]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s data under another residency than %s, which it requires: %s",
			n, plural(n, "node keeps its", "nodes keep their"), job.Residency, counted(o.residency)))
	}
	if n := rejections[ReasonRegion]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s in another region than %s, which it requires: %s; a region it only prefers "+
			"(region_preferred, --region-preferred) lets it run elsewhere when %s has no room",
			n, plural(n, "node is", "nodes are"), job.Region, counted(o.region), job.Region))
	}
	if n := rejections[ReasonGPUModel]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s none of its GPU models (%s; models are named in full): %s",
			n, plural(n, "node has", "nodes have"), strings.Join(job.GPUModels, ", "), counted(o.model)))
	}
	if n := rejections[ReasonVRAM]; n > 0 {
		out = append(out, fmt.Sprintf("%d %s GPUs with less memory than its %d MB; the most among them is %d MB",
			n, plural(n, "node has", "nodes have"), job.MinVRAMMB, o.maxVRAMMB))
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
