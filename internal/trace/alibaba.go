package trace

import (
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// The Alibaba GPU 2023 trace (github.com/alibaba/clusterdata,
// cluster-trace-gpu-v2023; Weng et al., ATC'23) lists the pods of a
// heterogeneous GPU cluster (openb_pod_list_*.csv) and its nodes
// (openb_node_list_*.csv). Times are seconds from the start of the trace.

// AlibabaPodFile and AlibabaNodeFile are the files of the trace read by
// default: the production pod list, and the GPU nodes.
const (
	AlibabaPodFile  = "openb_pod_list_default.csv"
	AlibabaNodeFile = "openb_node_list_gpu_node.csv"
)

// AlibabaTiers maps the trace's qos column onto idlegrid's tiers. LS
// (latency-sensitive) pods and Kubernetes Guaranteed pods must not be
// interrupted and want the best nodes: gold. Burstable pods take what is
// there: silver. BE (best-effort) pods are the interruptible kind: bronze.
var AlibabaTiers = map[string]idlegrid.Tier{
	"LS":         idlegrid.TierGold,
	"Guaranteed": idlegrid.TierGold,
	"Burstable":  idlegrid.TierSilver,
	"BE":         idlegrid.TierBronze,
}

// alibabaModels maps the trace's GPU names onto canonical model names.
// G1, G2 and G3 are the cluster's undisclosed internal GPU codes; they are
// kept as they are.
var alibabaModels = map[string]string{
	"T4": "T4", "P100": "P100", "V100M16": "V100-16GB", "V100M32": "V100-32GB", "A10": "A10",
	"G1": "G1", "G2": "G2", "G3": "G3",
}

// AlibabaModel maps a GPU name of the Alibaba trace onto a canonical
// model name: V100M32 is V100-32GB.
func AlibabaModel(m string) string {
	if c, ok := alibabaModels[strings.TrimSpace(m)]; ok {
		return c
	}
	return CanonicalModel(m, 0)
}

// AlibabaOptions tune ReadAlibabaPods.
type AlibabaOptions struct {
	Options
	// Tiers maps qos values onto tiers; nil means AlibabaTiers. A pod of a
	// qos it lacks gets the simulator's default tier, silver.
	Tiers map[string]idlegrid.Tier
}

// ReadAlibabaPods reads an Alibaba pod list (openb_pod_list_default.csv
// and the variants with the same columns) as demand:
//
//   - a pod is a job submitted at creation_time that runs from
//     scheduled_time to deletion_time on num_gpu GPUs of one node;
//   - a pod that shares a GPU (gpu_milli below 1000) gets a whole GPU:
//     leases hold whole GPUs (counted in Adjusted);
//   - gpu_spec ("V100M16|V100M32") lists the allowed models; empty is any;
//   - qos sets the tier (AlibabaTiers);
//   - CPU-only pods, pods never scheduled (their run time is unknown) and
//     pods that ran for no time are dropped, by reason; run times over 30
//     days are capped at 30 days (the longest job idlegrid takes);
//   - a row with fewer fields than the header is a bad row: cut short, it
//     would read as a pod never scheduled.
//
// The trace has no prices or regions: the simulator sets caps from cloud
// on-demand prices, and the jobs accept any region.
func ReadAlibabaPods(r io.Reader, source string, opts AlibabaOptions) (*Demand, error) {
	d := &Demand{Source: source, Relative: true}
	t, err := newTable(r, source, opts.Options, &d.Report, "name", "num_gpu")
	if err != nil {
		return nil, err
	}
	for _, c := range []string{"creation_time", "deletion_time", "scheduled_time"} {
		if !t.has(c) {
			return nil, idlegrid.Invalid(source+" line 1", "no %s column: this pod list has no times "+
				"(the multigpu* variants have none); use %s", c, AlibabaPodFile)
		}
	}
	tiers := opts.Tiers
	if tiers == nil {
		tiers = AlibabaTiers
	}
	if err := t.each(func() error {
		j, drop, err := alibabaPod(t, tiers, &d.Report)
		switch {
		case err != nil:
			return err
		case drop != "":
			d.drop(drop)
		default:
			d.Jobs = append(d.Jobs, j)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	sortJobs(d.Jobs)
	return d, nil
}

// alibabaPod reads one pod: a job, or why it is not one.
func alibabaPod(t *table, tiers map[string]idlegrid.Tier, rep *Report) (Job, string, error) {
	j := Job{ID: t.get("name")}
	if err := t.whole(); err != nil {
		return j, "", err // cut short, an empty scheduled_time is no pod never scheduled
	}
	if j.ID == "" {
		return j, "", t.errf("name", "required")
	}
	gpus, err := t.int("num_gpu", 0, idlegrid.MaxGPUsPerNode)
	if err != nil {
		return j, "", err
	}
	milli := int64(1000)
	if t.has("gpu_milli") && t.get("gpu_milli") != "" {
		if milli, err = t.int("gpu_milli", 0, 1000); err != nil {
			return j, "", err
		}
	}
	const maxSecs = 100 * 365 * 24 * 3600
	created, err := t.int("creation_time", 0, maxSecs)
	if err != nil {
		return j, "", err
	}
	deleted, err := t.int("deletion_time", 0, maxSecs)
	if err != nil {
		return j, "", err
	}
	if t.get("scheduled_time") == "" {
		if gpus == 0 {
			return j, "CPU-only pod", nil
		}
		return j, "never scheduled in the source trace (run time unknown)", nil
	}
	scheduled, err := t.int("scheduled_time", 0, maxSecs)
	if err != nil {
		return j, "", err
	}
	switch {
	case scheduled < created:
		return j, "", t.errf("scheduled_time", "%d is before creation_time %d", scheduled, created)
	case deleted < scheduled:
		return j, "", t.errf("deletion_time", "%d is before scheduled_time %d", deleted, scheduled)
	case gpus == 0:
		return j, "CPU-only pod", nil
	case deleted == scheduled:
		return j, "ran for no time", nil
	}
	if gpus == 1 && milli < 1000 {
		rep.adjust("shared a GPU (gpu_milli < 1000): given a whole GPU")
	}
	j.GPUs = int(gpus)
	j.Submit = Epoch.Add(time.Duration(created) * time.Second)
	j.DurationSeconds = deleted - scheduled
	if j.DurationSeconds > idlegrid.MaxJobSeconds {
		j.DurationSeconds = idlegrid.MaxJobSeconds
		rep.adjust("ran over 30 days: capped at 30 days")
	}
	j.GPUModels = models(t.get("gpu_spec"), AlibabaModel)
	qos := t.get("qos")
	if tier, ok := tiers[qos]; ok {
		j.Tier = tier
	} else {
		rep.adjust("qos " + quoteOrEmpty(qos) + " has no tier: silver")
	}
	return j, "", nil
}

func quoteOrEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return `"` + s + `"`
}

// ReadAlibabaNodes reads an Alibaba node list (openb_node_list_*.csv) as
// supply: one node per row with gpu GPUs of model. Nodes without GPUs are
// dropped. The list says nothing of windows, so the nodes have none: the
// simulator offers them around the clock. It is also where the simulator
// takes its default mix of GPU models (ModelMix).
func ReadAlibabaNodes(r io.Reader, source string, opts Options) (*Supply, error) {
	s := &Supply{Source: source, Relative: true}
	t, err := newTable(r, source, opts, &s.Report, "sn", "gpu", "model")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	err = t.each(func() error {
		n, err := alibabaNode(t, seen)
		switch {
		case err != nil:
			return err
		case n.GPUs == 0:
			s.drop("no GPUs")
		default:
			seen[n.ID] = true
			s.Nodes = append(s.Nodes, n)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func alibabaNode(t *table, seen map[string]bool) (Node, error) {
	n := Node{ID: t.get("sn")}
	if n.ID == "" || len(n.ID) > 63 {
		return n, t.errf("sn", "must be a name of 1 to 63 characters, got %q", n.ID)
	} else if seen[n.ID] {
		return n, t.errf("sn", "node %s is listed twice", n.ID)
	}
	gpus, err := t.int("gpu", 0, 64)
	if err != nil {
		return n, err
	}
	n.GPUs = int(gpus)
	if m := t.get("model"); m != "" {
		n.GPUModel = AlibabaModel(m)
	} else if n.GPUs > 0 {
		return n, t.errf("model", "required for a node with GPUs")
	}
	return n, nil
}

// ModelMix counts the GPUs of each model in nodes.
func ModelMix(nodes []Node) map[string]int {
	mix := map[string]int{}
	for _, n := range nodes {
		if n.GPUModel != "" {
			mix[n.GPUModel] += n.GPUs
		}
	}
	return mix
}

// SortedModels returns the models of a mix, most GPUs first, ties by name.
func SortedModels(mix map[string]int) []string {
	return slices.SortedFunc(maps.Keys(mix), func(a, b string) int {
		if mix[a] != mix[b] {
			return mix[b] - mix[a]
		}
		return strings.Compare(a, b)
	})
}
