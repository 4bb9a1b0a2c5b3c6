package market

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// FirstMatcher is the first engine: it checks every node against the job's
// hard constraints, ranks the nodes that fit by reliability-weighted ask, and
// pays each chosen node its own ask for the job's tier (pay-as-bid). It is
// the plain, obviously-correct baseline the auction will be measured against.
//
// A node is checked in this fixed order, and only its first failing check is
// counted in Decision.Rejections:
//
//  1. ReasonTier        the ask has a floor for the job's tier
//  2. ReasonKind        the ask allows the job's workload kind
//  3. ReasonMaxDuration the ask's MaxJobSeconds (when set) covers the job's duration
//  4. ReasonAvoided     the job does not avoid the node's provider (job.AvoidProviders)
//  5. ReasonTrustLevel  the node's trust level is at least job.MinTrustLevel
//  6. ReasonRegion      the node is in job.Region (when set and not merely preferred)
//  7. ReasonResidency   the node's residency equals job.Residency (when set; case-insensitive)
//  8. ReasonGPUModel    the node has a GPU of an allowed model (any, when job.GPUModels is empty)
//  9. ReasonVRAM        ... and one of those has at least job.MinVRAMMB
//  10. ReasonGPUs       ... and it has job.GPUs of those
//  11. ReasonCPU        the node has at least job.CPUCores (when asked)
//  12. ReasonRAM        the node has at least job.RAMMB (when asked)
//  13. ReasonWindow     the node's window lasts the job's duration from now
//     (a zero AvailableUntil means the node is not offered now)
//  14. ReasonPrice      the job's cap is at least the ask's floor for its tier
//  15. ReasonCapacity   the node has job.GPUs free GPUs that pass 8 and 9
//
// Model, VRAM and count (6–8) are judged on all of the node's GPUs, busy or
// not, so that "this node can never run it" and "this node is busy" read
// apart.
//
// Nodes that fit are ranked by Score = floor ÷ reliability (reliability
// clamped to (0,1]); lower wins, so a reliable node may beat a cheaper
// flaky one. When the job's region is only preferred, nodes in that region
// rank before all others whatever their score. Ties go to the lower node ID.
//
// A job on several nodes is placed on its best job.Nodes distinct nodes in
// one region: the region whose best nodes have the lowest total score (the
// preferred region first, when it can hold the job), or nowhere.
type FirstMatcher struct{}

var _ Matcher = (*FirstMatcher)(nil)

// NewFirstMatcher returns the first-fit, pay-as-bid matcher.
func NewFirstMatcher() *FirstMatcher { return &FirstMatcher{} }

// minReliability stands in for a reliability at or below zero, so that such
// a node ranks last rather than dividing by zero.
const minReliability = 1e-6

// checkOrder is the order in which constraints are checked, and the order
// that breaks ties between equally common reasons in Decision.Reason.
var checkOrder = []Reason{
	ReasonTier, ReasonKind, ReasonMaxDuration, ReasonAvoided, ReasonTrustLevel, ReasonRegion, ReasonResidency,
	ReasonGPUModel, ReasonVRAM, ReasonReliability, ReasonGPUs, ReasonCPU, ReasonRAM, ReasonWindow, ReasonPrice,
	ReasonCapacity,
}

// candidate is a node that fits the job, with what it would be paid.
type candidate struct {
	view      *NodeView
	floor     idlegrid.Micros
	score     float64
	preferred bool // in the job's preferred region
}

// Place decides where job runs in s. The job's spec is assumed validated;
// Nodes and GPUs below one count as one.
func (m *FirstMatcher) Place(job *idlegrid.Job, s *Snapshot) Decision {
	d := Decision{Rejections: map[Reason]int{}}
	if s == nil || len(s.Nodes) == 0 {
		d.Reason = "no nodes online"
		return d
	}
	var fits []candidate
	seen := make(map[string]bool, len(s.Nodes))
	for _, v := range s.Nodes {
		if v == nil || v.Node == nil || seen[v.Node.ID] {
			continue // a node appears once in a snapshot; ignore repeats
		}
		seen[v.Node.ID] = true
		c, reason := check(job, s, v)
		if reason != "" {
			d.Rejections[reason]++
			continue
		}
		fits = append(fits, c)
	}
	chosen, why := choose(fits, max(job.Nodes, 1))
	if chosen == nil {
		d.Reason = explain(why, d.Rejections)
		if len(fits) > 0 { // nodes that fit alone but not together
			d.Rejections[ReasonCapacity] += len(fits)
		}
		return d
	}
	for _, c := range chosen {
		d.Picks = append(d.Picks, pick(job, c))
	}
	return d
}

// check returns the node as a candidate for job, or the first reason it
// cannot take it.
func check(job *idlegrid.Job, s *Snapshot, v *NodeView) (candidate, Reason) {
	n := v.Node
	floor, offered := n.Ask.Floor(job.Tier)
	switch {
	case !offered:
		return candidate{}, ReasonTier
	case !n.Ask.Allows(job.Kind):
		return candidate{}, ReasonKind
	case n.Ask.MaxJobSeconds > 0 && n.Ask.MaxJobSeconds < job.DurationSeconds:
		return candidate{}, ReasonMaxDuration
	case slices.Contains(job.AvoidProviders, n.ProviderID):
		return candidate{}, ReasonAvoided
	case n.Level < job.MinTrustLevel:
		return candidate{}, ReasonTrustLevel
	case job.Region != "" && !job.RegionPreferred && n.Region != job.Region:
		return candidate{}, ReasonRegion
	case job.Residency != "" && !strings.EqualFold(n.Residency, job.Residency):
		return candidate{}, ReasonResidency
	}
	if r := hardwareReason(job, n.GPUs); r != "" {
		return candidate{}, r
	}
	switch {
	case job.CPUCores > 0 && n.CPUCores < job.CPUCores:
		return candidate{}, ReasonCPU
	case job.RAMMB > 0 && n.RAMMB < job.RAMMB:
		return candidate{}, ReasonRAM
	case !windowFits(job, s, v):
		return candidate{}, ReasonWindow
	case floor > job.MaxPriceMicrosPerGPUHour:
		return candidate{}, ReasonPrice
	case countUsable(job, v.FreeGPUs) < max(job.GPUs, 1):
		return candidate{}, ReasonCapacity
	}
	return candidate{
		view:      v,
		floor:     floor,
		score:     Score(floor, n.Reliability),
		preferred: job.RegionPreferred && n.Region == job.Region,
	}, ""
}

// hardwareReason says whether gpus could ever run the job: "" when enough
// could, ReasonGPUModel when none is of an allowed model, ReasonVRAM when
// none of those has enough memory, ReasonGPUs when too few do.
func hardwareReason(job *idlegrid.Job, gpus []idlegrid.GPU) Reason {
	reason, usable := ReasonGPUModel, 0
	for _, g := range gpus {
		if !modelAllowed(job.GPUModels, g.Model) {
			continue
		}
		reason = ReasonVRAM
		if g.VRAMMB >= job.MinVRAMMB {
			usable++
		}
	}
	switch {
	case usable >= max(job.GPUs, 1):
		return ""
	case usable > 0:
		return ReasonGPUs
	}
	return reason
}

func modelAllowed(models []string, model string) bool {
	if len(models) == 0 {
		return true
	}
	for _, m := range models {
		if strings.EqualFold(m, model) {
			return true
		}
	}
	return false
}

func countUsable(job *idlegrid.Job, gpus []idlegrid.GPU) int {
	n := 0
	for _, g := range gpus {
		if usableBy(job, g) {
			n++
		}
	}
	return n
}

// windowFits reports whether the node's window, from now, lasts the job's
// duration.
func windowFits(job *idlegrid.Job, s *Snapshot, v *NodeView) bool {
	if v.AvailableUntil.IsZero() {
		return false
	}
	return int64(v.AvailableUntil.Sub(s.Now)/time.Second) >= job.DurationSeconds
}

// Score is the ranking score of a node asking floor with the given
// reliability: the price per unit of expected completion. Lower wins.
// Reliability at or below zero (or not a number) counts as a tiny
// epsilon, above one as one.
func Score(floor idlegrid.Micros, reliability float64) float64 {
	return float64(floor) / clampReliability(reliability)
}

// better orders candidates: preferred region first, then score, then ID.
func better(a, b candidate) int {
	if a.preferred != b.preferred {
		if a.preferred {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.score, b.score); c != 0 {
		return c
	}
	return cmp.Compare(a.view.Node.ID, b.view.Node.ID)
}

// group is the candidates of one region, best first.
type group struct {
	region string
	nodes  []candidate
	total  float64
}

// choose returns the best n candidates in one region, or nil and why not.
func choose(fits []candidate, n int) ([]candidate, string) {
	if len(fits) == 0 {
		return nil, "no node fits"
	}
	if n == 1 {
		return []candidate{slices.MinFunc(fits, better)}, ""
	}
	slices.SortFunc(fits, better)
	byRegion := map[string]*group{}
	var groups []*group
	most := 0
	for _, c := range fits { // in rank order, so each group is best first
		g := byRegion[c.view.Node.Region]
		if g == nil {
			g = &group{region: c.view.Node.Region}
			byRegion[g.region] = g
			groups = append(groups, g)
		}
		g.nodes = append(g.nodes, c)
		most = max(most, len(g.nodes))
	}
	var best *group
	for _, g := range groups {
		if len(g.nodes) < n {
			continue
		}
		g.nodes = g.nodes[:n]
		for _, c := range g.nodes {
			g.total += c.score
		}
		if best == nil || betterGroup(g, best) {
			best = g
		}
	}
	if best == nil {
		return nil, fmt.Sprintf("needs %d nodes in one region, at most %d fit in one region", n, most)
	}
	return best.nodes, ""
}

// betterGroup orders regions: preferred first, then total score, then the
// ID of the region's best node.
func betterGroup(a, b *group) bool {
	if a.nodes[0].preferred != b.nodes[0].preferred {
		return a.nodes[0].preferred
	}
	if a.total != b.total {
		return a.total < b.total
	}
	return a.nodes[0].view.Node.ID < b.nodes[0].view.Node.ID
}

// pick turns a candidate into a Pick: its usable free GPUs in UUID order,
// and the ask as the locked price.
func pick(job *idlegrid.Job, c candidate) Pick {
	var gpus []idlegrid.GPU
	for _, g := range c.view.FreeGPUs {
		if usableBy(job, g) {
			gpus = append(gpus, g)
		}
	}
	slices.SortFunc(gpus, func(a, b idlegrid.GPU) int { return cmp.Compare(a.UUID, b.UUID) })
	return Pick{
		Node:                  c.view.Node,
		GPUs:                  gpus[:max(job.GPUs, 1)],
		PriceMicrosPerGPUHour: c.floor,
		Score:                 c.score,
		basis:                 priceBasis{how: pricedFirst, cap: job.MaxPriceMicrosPerGPUHour},
	}
}

// explain puts why and the rejection counts together:
// "no node fits: 3 cap below ask, 2 window too short".
func explain(why string, rejections map[Reason]int) string {
	counts := summarize(rejections)
	switch {
	case counts == "":
		return why
	case why == "no node fits":
		return why + ": " + counts
	}
	return why + " (other nodes: " + counts + ")"
}

// summarize lists rejection counts, most common first, ties in check order:
// "3 cap below ask, 2 window too short".
func summarize(rejections map[Reason]int) string {
	reasons := slices.Clone(checkOrder)
	slices.SortStableFunc(reasons, func(a, b Reason) int {
		return cmp.Compare(rejections[b], rejections[a])
	})
	var parts []string
	for _, r := range reasons {
		if n := rejections[r]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, r))
		}
	}
	return strings.Join(parts, ", ")
}

// Claim takes p's GPUs out of its node's free GPUs in s, so that later
// placements against the same snapshot do not assign them again. A pick for
// a node not in s changes nothing.
func (s *Snapshot) Claim(p Pick) {
	if p.Node == nil {
		return
	}
	taken := make(map[string]bool, len(p.GPUs))
	for _, g := range p.GPUs {
		taken[g.UUID] = true
	}
	for _, v := range s.Nodes {
		if v == nil || v.Node == nil || v.Node.ID != p.Node.ID {
			continue
		}
		free := make([]idlegrid.GPU, 0, len(v.FreeGPUs))
		for _, g := range v.FreeGPUs {
			if !taken[g.UUID] {
				free = append(free, g)
			}
		}
		v.FreeGPUs = free // a fresh slice: the caller's backing array is left alone
	}
}
