package market_test

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// The property test builds small random markets and checks the engine's
// decision against a reference that states every rule of docs/market.md
// on its own, node by node, and enumerates every choice of nodes. It
// shares no code with the engine.

const (
	refNotice     = 120
	refMinRuntime = 300
	refGoldBar    = 0.9
	refTransfer   = 10_000 // micros per GB
)

// refMarket is a random market: nodes and the leases on them.
type refMarket struct {
	nodes  []*idlegrid.Node
	leases []*idlegrid.Lease
}

var (
	refModels  = []string{"H100-80GB", "A100-40GB", "RTX4090"}
	refRegions = []string{"eu-west", "us-east", "ap-south"}
	refVRAM    = map[string]int{"H100-80GB": 81920, "A100-40GB": 40960, "RTX4090": 24576}
)

func randomEngineMarket(r *rand.Rand, size int, wide bool) *refMarket {
	m := &refMarket{}
	ids := r.Perm(9 * size)
	for i := range 2 + r.IntN(size) {
		id := fmt.Sprintf("n%04d", ids[i]+1000)
		n := &idlegrid.Node{ID: id, ProviderID: fmt.Sprintf("p%d", ids[i]%3), State: idlegrid.NodeOnline, Level: ids[i] / 3 % 3}
		n.Name = id
		model := refModels[r.IntN(len(refModels))]
		gpus := 1 + r.IntN(4)
		if wide {
			gpus = []int{4, 8}[r.IntN(2)]
		}
		for g := range gpus {
			mm := model
			if r.IntN(8) == 0 {
				mm = refModels[r.IntN(len(refModels))] // a mixed node
			}
			n.GPUs = append(n.GPUs, idlegrid.GPU{UUID: fmt.Sprintf("%s-g%d", id, g), Model: mm, VRAMMB: refVRAM[mm]})
		}
		n.CPUCores = 8 * (1 + r.IntN(4))
		n.RAMMB = 64000 * (1 + r.IntN(4))
		n.Region = refRegions[r.IntN(len(refRegions))]
		n.Residency = map[string]string{"eu-west": "EU", "us-east": "US", "ap-south": "IN"}[n.Region]
		n.Reliability = []float64{1, 0.97, 0.9, 0.85, 0.6, 0.3}[r.IntN(6)]
		n.Ask.FloorMicrosPerGPUHour = map[idlegrid.Tier]idlegrid.Micros{}
		for _, t := range idlegrid.Tiers {
			if r.IntN(6) > 0 {
				n.Ask.FloorMicrosPerGPUHour[t] = idlegrid.Micros(1+r.IntN(6)) * 400_000 // few prices: ties happen
			}
		}
		if len(n.Ask.FloorMicrosPerGPUHour) == 0 {
			n.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver] = 1_000_000
		}
		if r.IntN(6) == 0 {
			n.Ask.AllowedKinds = []idlegrid.WorkloadKind{idlegrid.KindInference, idlegrid.KindEval}
		}
		if r.IntN(6) == 0 {
			n.Ask.MaxJobSeconds = int64(1+r.IntN(3)) * 3600
		}
		switch r.IntN(10) {
		case 0, 1, 2:
			n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{
				{Start: now.Add(-time.Hour), End: now.Add(time.Duration(1+r.IntN(20)) * 15 * time.Minute)}}}
		case 3:
			n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{
				{Start: now.Add(time.Hour), End: now.Add(5 * time.Hour)}}}
		case 4:
			if r.IntN(3) == 0 { // closed for good, as a drained node is: it competes for nothing
				n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{
					{Start: now.Add(-5 * time.Hour), End: now.Add(-time.Hour)}}}
				break
			}
			n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
		default:
			n.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
		}
		if r.IntN(4) == 0 {
			n.Schedule.TimeZone = []string{"UTC", "Asia/Tokyo", "America/New_York"}[r.IntN(3)]
			n.Ask.TimeOfDay = []idlegrid.PriceWindow{{Start: []string{"11:00", "20:00", "06:00"}[r.IntN(3)],
				End: []string{"13:00", "23:00", "08:00"}[r.IntN(3)], MultiplierPercent: []int64{50, 150, 200}[r.IntN(3)]}}
		}
		for _, ds := range []string{"alpha", "beta"} {
			if r.IntN(3) == 0 {
				n.CachedDatasets = append(n.CachedDatasets, ds)
			}
		}
		m.nodes = append(m.nodes, n)
		// Leases hold some GPUs.
		for g := 0; g < len(n.GPUs); {
			if r.IntN(3) > 0 {
				g++
				continue
			}
			k := 1 + r.IntN(len(n.GPUs)-g)
			ago := r.IntN(120)
			if wide {
				ago -= ago % 30 // leases that started together lose the same: plans tie, and go by score
			}
			started := now.Add(-time.Duration(ago) * time.Minute)
			l := &idlegrid.Lease{
				ID: fmt.Sprintf("l-%s-%d", id, g), JobID: fmt.Sprintf("jl-%s-%d", id, g), NodeID: id,
				Tier: idlegrid.Tiers[r.IntN(3)], State: idlegrid.LeaseRunning, CreatedAt: started, StartedAt: &started,
				LimitSeconds: int64(60+r.IntN(180)) * 60,
			}
			for i := g; i < g+k; i++ {
				l.GPUUUIDs = append(l.GPUUUIDs, n.GPUs[i].UUID)
			}
			m.leases = append(m.leases, l)
			g += k
		}
	}
	return m
}

func randomEngineJob(r *rand.Rand, wide bool) *idlegrid.Job {
	j := &idlegrid.Job{ID: "job", JobSpec: idlegrid.JobSpec{
		Kind: []idlegrid.WorkloadKind{idlegrid.KindTraining, idlegrid.KindEval}[r.IntN(2)], Image: "x",
		GPUs: []int{1, 1, 2, 3}[r.IntN(4)], Nodes: []int{1, 1, 1, 2, 3}[r.IntN(5)], Tier: idlegrid.Tiers[r.IntN(3)],
		MaxPriceMicrosPerGPUHour: idlegrid.Micros(2+r.IntN(8)) * 300_000,
		DurationSeconds:          int64(1+r.IntN(16)) * 900,
		ReliabilityWeight:        []float64{0, 0, 0.5, 1, 2}[r.IntN(5)],
		CheckpointEverySeconds:   []int64{0, 0, 60, 1800}[r.IntN(4)],
	}}
	if r.IntN(4) == 0 {
		j.GPUModels = []string{refModels[r.IntN(len(refModels))]}
	}
	if r.IntN(5) == 0 {
		j.MinVRAMMB = 40960
	}
	if r.IntN(5) == 0 {
		j.CPUCores = 8 * (1 + r.IntN(3))
	}
	if r.IntN(5) == 0 {
		j.RAMMB = 64000 * (1 + r.IntN(3))
	}
	if r.IntN(4) == 0 {
		j.Region = refRegions[r.IntN(len(refRegions))]
		j.RegionPreferred = r.IntN(2) == 0
	}
	if r.IntN(6) == 0 {
		j.Residency = []string{"EU", "us"}[r.IntN(2)]
	}
	if r.IntN(3) == 0 {
		// Sizes from none to large: small credits leave a caching node
		// behind plain ones, large ones put it first.
		j.Datasets = []idlegrid.Dataset{{Name: "alpha", SizeGB: []int64{0, 2, 10, 60, 500, 1000}[r.IntN(6)]}}
		if r.IntN(2) == 0 {
			j.Datasets = append(j.Datasets, idlegrid.Dataset{Name: "beta", SizeGB: 2000})
		}
	}
	if wide { // one node, of 4 to 8 GPUs: the preemption bounds by job size
		j.GPUs, j.Nodes = []int{4, 5, 8}[r.IntN(3)], 1
	}
	if r.IntN(10) == 0 { // a trust level: nodes are at 0, 1 and 2 alike
		j.MinTrustLevel = []int{1, 1, 2}[r.IntN(3)]
	}
	return j
}

// resumeSomewhere gives one job in three a checkpoint on one of the
// market's nodes, holding from none to all of its run.
func resumeSomewhere(r *rand.Rand, j *idlegrid.Job, m *refMarket) {
	if r.IntN(3) != 0 {
		return
	}
	j.CheckpointNodeID = m.nodes[r.IntN(len(m.nodes))].ID
	j.ResumeSeconds = j.DurationSeconds * int64(r.IntN(5)) / 4
}

// refNode is the reference's view of one node for one job.
type refNode struct {
	n      *idlegrid.Node
	reason market.Reason
	ask    idlegrid.Micros
	credit idlegrid.Micros
	rel    float64
	score  float64
	free   []string // usable free GPUs
	until  time.Time
	// competes: it passes every check its offer and record decide (all
	// but window and capacity), within the cap: a shadow runner-up.
	competes bool
}

func refUntil(n *idlegrid.Node) time.Time {
	if n.Schedule.Mode == idlegrid.ScheduleAlways {
		return now.Add(1000 * time.Hour)
	}
	for _, w := range n.Schedule.OneOff {
		if !w.Start.After(now) && w.End.After(now) {
			return w.End
		}
	}
	return time.Time{}
}

// refOpens reports whether n's window is open or opens later.
func refOpens(n *idlegrid.Node) bool {
	return n.Schedule.Mode == idlegrid.ScheduleAlways ||
		slices.ContainsFunc(n.Schedule.OneOff, func(w idlegrid.OneOffWindow) bool { return w.End.After(now) })
}

func refMultiplier(n *idlegrid.Node) int64 { return refMultiplierAt(n, now) }

// refMultiplierAt is n's time-of-day multiplier at t, in percent.
func refMultiplierAt(n *idlegrid.Node, t time.Time) int64 {
	if len(n.Ask.TimeOfDay) == 0 {
		return 100
	}
	loc, _ := time.LoadLocation(n.Schedule.TimeZone)
	lt := t.In(loc)
	minute := lt.Hour()*60 + lt.Minute()
	w := n.Ask.TimeOfDay[0]
	var sh, sm, eh, em int
	fmt.Sscanf(w.Start, "%d:%d", &sh, &sm)
	fmt.Sscanf(w.End, "%d:%d", &eh, &em)
	s, e := sh*60+sm, eh*60+em
	in := (s < e && minute >= s && minute < e) || (e <= s && (minute >= s || minute < e))
	if in {
		return w.MultiplierPercent
	}
	return 100
}

// refAffordableAt reports whether n asks within j's cap at t, when a plan
// would start j there (a reservation's start, a preemption's notice end).
func refAffordableAt(j *idlegrid.Job, n *idlegrid.Node, t time.Time) bool {
	return n.Ask.FloorMicrosPerGPUHour[j.Tier]*idlegrid.Micros(refMultiplierAt(n, t))/100 <= j.MaxPriceMicrosPerGPUHour
}

func refUsable(j *idlegrid.Job, g idlegrid.GPU) bool {
	okModel := len(j.GPUModels) == 0 || slices.ContainsFunc(j.GPUModels, func(m string) bool { return strings.EqualFold(m, g.Model) })
	return okModel && g.VRAMMB >= j.MinVRAMMB
}

// judge applies every rule, in check order, to one node.
func judge(j *idlegrid.Job, n *idlegrid.Node, leases []*idlegrid.Lease) refNode {
	v := refNode{n: n, rel: min(max(n.Reliability, 1e-6), 1), until: refUntil(n)}
	held := map[string]bool{}
	for _, l := range leases {
		if l.NodeID == n.ID {
			for _, u := range l.GPUUUIDs {
				held[u] = true
			}
		}
	}
	for _, g := range n.GPUs {
		if !held[g.UUID] && refUsable(j, g) {
			v.free = append(v.free, g.UUID)
		}
	}
	slices.Sort(v.free)
	floor := n.Ask.FloorMicrosPerGPUHour[j.Tier]
	v.ask = floor * idlegrid.Micros(refMultiplier(n)) / 100
	need := j.DurationSeconds
	if j.Tier == idlegrid.TierBronze && j.CheckpointEverySeconds > 0 && j.Nodes <= 1 { // else it cannot resume (a gang counts from zero), and needs it all
		need = min(need, max(j.CheckpointEverySeconds, refMinRuntime)+refNotice)
	}
	anyModel, anyVRAM, usable := false, false, 0
	for _, g := range n.GPUs {
		if len(j.GPUModels) == 0 || slices.ContainsFunc(j.GPUModels, func(m string) bool { return strings.EqualFold(m, g.Model) }) {
			anyModel = true
			anyVRAM = anyVRAM || g.VRAMMB >= j.MinVRAMMB
			if g.VRAMMB >= j.MinVRAMMB {
				usable++
			}
		}
	}
	switch {
	case floor <= 0:
		v.reason = market.ReasonTier
	case len(n.Ask.AllowedKinds) > 0 && !slices.Contains(n.Ask.AllowedKinds, j.Kind):
		v.reason = market.ReasonKind
	case n.Ask.MaxJobSeconds > 0 && n.Ask.MaxJobSeconds < j.DurationSeconds:
		v.reason = market.ReasonMaxDuration
	case j.Region != "" && !j.RegionPreferred && n.Region != j.Region:
		v.reason = market.ReasonRegion
	case j.Residency != "" && !strings.EqualFold(n.Residency, j.Residency):
		v.reason = market.ReasonResidency
	case !anyModel:
		v.reason = market.ReasonGPUModel
	case !anyVRAM:
		v.reason = market.ReasonVRAM
	case j.Tier == idlegrid.TierGold && n.Reliability < refGoldBar:
		v.reason = market.ReasonReliability
	case usable < max(j.GPUs, 1):
		v.reason = market.ReasonGPUs
	case n.Level < j.MinTrustLevel:
		v.reason = market.ReasonTrustLevel
	case n.CPUCores < j.CPUCores:
		v.reason = market.ReasonCPU
	case n.RAMMB < j.RAMMB:
		v.reason = market.ReasonRAM
	case v.until.Before(now.Add(time.Duration(need) * time.Second)):
		v.reason = market.ReasonWindow
	case v.ask > j.MaxPriceMicrosPerGPUHour:
		v.reason = market.ReasonPrice
	case len(v.free) < max(j.GPUs, 1):
		v.reason = market.ReasonCapacity
	}
	switch v.reason {
	case "", market.ReasonWindow, market.ReasonPrice, market.ReasonCapacity:
		v.competes = v.ask <= j.MaxPriceMicrosPerGPUHour && !slices.Contains(j.AvoidProviders, n.ProviderID) && n.Level >= j.MinTrustLevel && refOpens(n)
	}
	var gb int64
	for _, d := range j.Datasets {
		if slices.Contains(n.CachedDatasets, d.Name) {
			gb += d.SizeGB
		}
	}
	v.credit = idlegrid.Micros(gb*refTransfer*3600) / idlegrid.Micros(int64(max(j.GPUs, 1))*j.DurationSeconds)
	if n.ID == j.CheckpointNodeID && max(j.Nodes, 1) == 1 && j.ResumeSeconds > 0 { // it would not run again what the checkpoint holds
		v.credit += j.MaxPriceMicrosPerGPUHour * idlegrid.Micros(min(j.ResumeSeconds, j.DurationSeconds)) / idlegrid.Micros(j.DurationSeconds)
	}
	w := j.ReliabilityWeight
	if w == 0 {
		w = 1
	}
	v.score = float64(v.ask)/math.Pow(v.rel, w) - float64(v.credit)
	return v
}

// refAward is the reference's auction: winners and their prices.
type refAward struct {
	winners []refNode
	prices  map[string]idlegrid.Micros
	total   float64
	reserve bool   // no node left out: refShadow may price it
	shadow  string // the shadow runner-up refShadow priced it against
}

func refAuction(j *idlegrid.Job, fits []refNode) *refAward {
	n := max(j.Nodes, 1)
	pref := func(v refNode) bool { return j.RegionPreferred && v.n.Region == j.Region }
	better := func(a, b refNode) int {
		return cmp.Or(cmp.Compare(a.score, b.score), strings.Compare(a.n.ID, b.n.ID))
	}
	if len(fits) > 16 {
		return refAuctionSorted(j, fits, pref, better)
	}
	var best []refNode
	bestTotal := 0.0
	var walk func(start int, set []refNode)
	walk = func(start int, set []refNode) {
		if len(set) == n {
			total := 0.0
			for _, v := range set {
				total += v.score
			}
			switch {
			case best == nil:
			case pref(set[0]) != pref(best[0]):
				if !pref(set[0]) {
					return
				}
			case total == bestTotal || (n > 1 && near(total, bestTotal)): // gangs: totals summed in another order
				if refMinID(set) > refMinID(best) {
					return
				}
			case total > bestTotal:
				return
			}
			best, bestTotal = slices.Clone(set), total
			return
		}
		for i := start; i < len(fits); i++ {
			if len(set) > 0 && fits[i].n.Region != set[0].n.Region {
				continue
			}
			walk(i+1, append(set, fits[i]))
		}
	}
	walk(0, nil)
	return refPrices(j, fits, best, bestTotal, pref, better)
}

// refAuctionSorted chooses as refAuction does, for markets too large to
// enumerate: scores add up, so a region's best set is its n best nodes.
func refAuctionSorted(j *idlegrid.Job, fits []refNode, pref func(refNode) bool, better func(a, b refNode) int) *refAward {
	n := max(j.Nodes, 1)
	byRegion := map[string][]refNode{}
	for _, v := range fits {
		byRegion[v.n.Region] = append(byRegion[v.n.Region], v)
	}
	var best []refNode
	bestTotal := 0.0
	for _, set := range byRegion {
		if len(set) < n {
			continue
		}
		slices.SortFunc(set, better)
		set = set[:n]
		total := 0.0
		for _, v := range set {
			total += v.score
		}
		switch {
		case best == nil:
		case pref(set[0]) != pref(best[0]):
			if !pref(set[0]) {
				continue
			}
		case total == bestTotal || (n > 1 && near(total, bestTotal)):
			if refMinID(set) > refMinID(best) {
				continue
			}
		case total > bestTotal:
			continue
		}
		best, bestTotal = set, total
	}
	return refPrices(j, fits, best, bestTotal, pref, better)
}

// refPrices prices the winners against the best node left out.
func refPrices(j *idlegrid.Job, fits, best []refNode, bestTotal float64, pref func(refNode) bool, better func(a, b refNode) int) *refAward {
	n := max(j.Nodes, 1)
	if best == nil {
		return nil
	}
	// Competitors: nodes left out, in regions that could hold the gang, in
	// the winners' preference group.
	count := map[string]int{}
	for _, v := range fits {
		count[v.n.Region]++
	}
	var loser *refNode
	for i, v := range fits {
		if slices.ContainsFunc(best, func(b refNode) bool { return b.n.ID == v.n.ID }) ||
			count[v.n.Region] < n || pref(v) != pref(best[0]) {
			continue
		}
		if loser == nil || better(v, *loser) < 0 {
			loser = &fits[i]
		}
	}
	a := &refAward{winners: best, prices: map[string]idlegrid.Micros{}, total: bestTotal, reserve: loser == nil}
	w := j.ReliabilityWeight
	if w == 0 {
		w = 1
	}
	for _, v := range best {
		p := j.MaxPriceMicrosPerGPUHour
		if loser != nil {
			p = idlegrid.Micros(math.Round((loser.score + float64(v.credit)) * math.Pow(v.rel, w)))
			p = min(max(p, v.ask), j.MaxPriceMicrosPerGPUHour)
		}
		a.prices[v.n.ID] = p
	}
	return a
}

// refShadow prices an award that no node left out priced against the
// shadow runner-up: among the judged nodes that compete, of no winner's
// provider, in the winners' preference group, the one with the least
// score at or above the worst winner's.
func refShadow(j *idlegrid.Job, judged []refNode, a *refAward) {
	if a == nil || !a.reserve {
		return
	}
	floor := math.Inf(-1)
	for _, v := range a.winners {
		floor = max(floor, v.score)
	}
	// With a preferred region, the winners' group is that region when
	// they are there, and every other region when they fell back.
	pref := func(v refNode) bool { return j.RegionPreferred && v.n.Region == j.Region }
	var sh *refNode
	for i, v := range judged {
		if !v.competes || v.score < floor || pref(v) != pref(a.winners[0]) ||
			slices.ContainsFunc(a.winners, func(b refNode) bool { return b.n.ID == v.n.ID || b.n.ProviderID == v.n.ProviderID }) {
			continue
		}
		if sh == nil || cmp.Or(cmp.Compare(v.score, sh.score), strings.Compare(v.n.ID, sh.n.ID)) < 0 {
			sh = &judged[i]
		}
	}
	if sh == nil {
		return
	}
	w := j.ReliabilityWeight
	if w == 0 {
		w = 1
	}
	for _, v := range a.winners {
		p := idlegrid.Micros(math.Round((sh.score + float64(v.credit)) * math.Pow(v.rel, w)))
		a.prices[v.n.ID] = min(max(p, v.ask), j.MaxPriceMicrosPerGPUHour)
	}
	a.shadow = sh.n.ID
}

func refMinID(set []refNode) string {
	id := set[0].n.ID
	for _, v := range set {
		id = min(id, v.n.ID)
	}
	return id
}

// refPreemption is the reference's best single-node preemption: the node
// and the least lost work, or "" when no node can be freed.
func refPreemption(j *idlegrid.Job, m *refMarket, judged []refNode) (string, int64) {
	bestID, bestLost, bestScore, bestPref := "", int64(0), 0.0, false
	for _, v := range judged {
		switch v.reason {
		case "", market.ReasonWindow, market.ReasonCapacity:
		default:
			continue
		}
		if v.until.Before(now.Add(time.Duration(refNotice+j.DurationSeconds)*time.Second)) ||
			!refAffordableAt(j, v.n, now.Add(refNotice*time.Second)) {
			continue
		}
		var victims []*idlegrid.Lease
		need := max(j.GPUs, 1) - len(v.free)
		if need <= 0 {
			continue
		}
		noticeEnd := now.Add(refNotice * time.Second)
		for _, l := range m.leases {
			if l.NodeID != v.n.ID {
				continue
			}
			if !l.StartedAt.Add(time.Duration(l.LimitSeconds) * time.Second).After(noticeEnd) { // any tier: free by then anyway
				for _, u := range l.GPUUUIDs {
					if refUsable(j, gpuOf(v.n, u)) {
						need--
					}
				}
				continue
			}
			if l.Tier == idlegrid.TierBronze && now.Sub(*l.StartedAt) >= refMinRuntime*time.Second {
				victims = append(victims, l)
			}
		}
		if need <= 0 {
			continue // leases that end by the notice's end are enough: no victim, no preemption
		}
		found, least := false, int64(0)
		for mask := 1; mask < 1<<len(victims); mask++ {
			got, lost := 0, int64(0)
			for i, l := range victims {
				if mask&(1<<i) == 0 {
					continue
				}
				for _, u := range l.GPUUUIDs {
					if refUsable(j, gpuOf(v.n, u)) {
						got++
					}
				}
				lost += int64(now.Sub(*l.StartedAt)/time.Second) * int64(len(l.GPUUUIDs))
			}
			if got >= need && (!found || lost < least) {
				found, least = true, lost
			}
		}
		if !found {
			continue
		}
		pref := j.RegionPreferred && v.n.Region == j.Region
		if bestID == "" || (pref && !bestPref) || (pref == bestPref && (least < bestLost ||
			(least == bestLost && (v.score < bestScore || (v.score == bestScore && v.n.ID < bestID))))) {
			bestID, bestLost, bestScore, bestPref = v.n.ID, least, v.score, pref
		}
	}
	return bestID, bestLost
}

// refReservation is the reference's single-node reservation: the node
// whose GPUs free up first with a window that still covers the job.
func refReservation(j *idlegrid.Job, m *refMarket, judged []refNode) (string, time.Time) {
	bestID, bestStart, bestScore, bestPref := "", time.Time{}, 0.0, false
	for _, v := range judged {
		switch v.reason {
		case "", market.ReasonWindow, market.ReasonCapacity:
		default:
			continue
		}
		free := len(v.free)
		var ends []*idlegrid.Lease
		for _, l := range m.leases {
			if l.NodeID == v.n.ID {
				ends = append(ends, l)
			}
		}
		slices.SortFunc(ends, func(a, b *idlegrid.Lease) int {
			return a.StartedAt.Add(time.Duration(a.LimitSeconds) * time.Second).Compare(b.StartedAt.Add(time.Duration(b.LimitSeconds) * time.Second))
		})
		start := now
		for _, l := range ends {
			if free >= max(j.GPUs, 1) {
				break
			}
			for _, u := range l.GPUUUIDs {
				if refUsable(j, gpuOf(v.n, u)) {
					free++
				}
			}
			if end := l.StartedAt.Add(time.Duration(l.LimitSeconds) * time.Second); end.After(now) {
				start = end
			} else {
				start = now
			}
		}
		if free < max(j.GPUs, 1) || v.until.Before(start.Add(time.Duration(j.DurationSeconds)*time.Second)) ||
			!refAffordableAt(j, v.n, start) {
			continue
		}
		pref := j.RegionPreferred && v.n.Region == j.Region
		if bestID == "" || (pref && !bestPref) || (pref == bestPref && (start.Before(bestStart) ||
			(start.Equal(bestStart) && (v.score < bestScore || (v.score == bestScore && v.n.ID < bestID))))) {
			bestID, bestStart, bestScore, bestPref = v.n.ID, start, v.score, pref
		}
	}
	return bestID, bestStart
}

func gpuOf(n *idlegrid.Node, uuid string) idlegrid.GPU {
	for _, g := range n.GPUs {
		if g.UUID == uuid {
			return g
		}
	}
	return idlegrid.GPU{}
}

// TestEngine_Place_bruteForce compares the engine with the reference on
// many small random markets, where the reference enumerates every set of
// nodes, and on fewer large ones, where the index's pruning matters. Before
// each placement the engine's index is churned (leases come and go, nodes
// are re-offered), so that what it answers from is an index updated in
// place, not a fresh one.
func TestEngine_Place_bruteForce(t *testing.T) {
	for _, tc := range []struct {
		name            string
		size, rounds    int
		saturated, wide bool
	}{
		{"small", 11, 20000, false, false},
		{"large", 400, 300, false, false},
		// Nearly every node busy: most prices come from a shadow runner-up,
		// found in classes of many blocks.
		{"saturated", 1500, 600, true, false},
		// Nodes of 4 and 8 GPUs and one-node jobs of 4 to 8, so that plans
		// use the bounds kept per job size (index.go, coverRestarts).
		{"wide", 60, 3000, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rounds := tc.rounds
			if testing.Short() {
				rounds /= 10
			}
			bruteForce(t, tc.size, rounds, tc.saturated, tc.wide)
		})
	}
}

// churn changes the engine's index and changes it back, but for new
// reliabilities, which it keeps in m too.
func churn(r *rand.Rand, e *market.Engine, m *refMarket) {
	var extra []string
	for i, n := range m.nodes {
		if r.IntN(3) == 0 {
			e.UpsertNode(n) // re-offered unchanged
		}
		if r.IntN(2) == 0 {
			started := now.Add(-time.Minute)
			id := fmt.Sprintf("churn-%d", i)
			e.AddLease(&idlegrid.Lease{ID: id, JobID: id, NodeID: n.ID, Tier: idlegrid.TierSilver, State: idlegrid.LeaseRunning,
				CreatedAt: started, StartedAt: &started, LimitSeconds: 60, GPUUUIDs: []string{n.GPUs[0].UUID}})
			extra = append(extra, id)
		}
	}
	probe := &idlegrid.Job{ID: "probe", JobSpec: idlegrid.JobSpec{Kind: idlegrid.KindOther, GPUs: 1, Nodes: 1,
		Tier: idlegrid.TierSilver, MaxPriceMicrosPerGPUHour: 1000 * unit, DurationSeconds: 60}}
	e.Place(probe, now) // builds the views with the extra leases in
	for i, n := range m.nodes {
		if r.IntN(3) == 0 { // a lease ended and its reputation moved: the same offer, a new score
			moved := *n
			moved.Reliability = []float64{0.5, 0.7, 0.85, 0.9, 0.95, 1}[r.IntN(6)]
			m.nodes[i] = &moved
			e.UpsertNode(&moved) // moves along its clean shelves (restand.go)
		}
	}
	for _, id := range extra {
		e.RemoveLease(id)
	}
	for _, l := range m.leases { // a lease on a GPU an extra lease took comes back
		e.AddLease(l)
	}
}

// saturate holds every free GPU of all but about one node in a hundred.
func saturate(r *rand.Rand, m *refMarket) {
	held := map[string]bool{}
	for _, l := range m.leases {
		for _, u := range l.GPUUUIDs {
			held[u] = true
		}
	}
	for _, n := range m.nodes {
		if r.IntN(100) == 0 {
			continue
		}
		started := now.Add(-time.Duration(r.IntN(120)) * time.Minute)
		l := &idlegrid.Lease{ID: "sat-" + n.ID, JobID: "jsat-" + n.ID, NodeID: n.ID, Tier: idlegrid.TierSilver,
			State: idlegrid.LeaseRunning, CreatedAt: started, StartedAt: &started, LimitSeconds: 3 * 3600}
		for _, g := range n.GPUs {
			if !held[g.UUID] {
				l.GPUUUIDs = append(l.GPUUUIDs, g.UUID)
			}
		}
		if len(l.GPUUUIDs) > 0 {
			m.leases = append(m.leases, l)
		}
	}
}

func bruteForce(t *testing.T, size, rounds int, saturated, wide bool) {
	var placed, gangs, preempted, reserved, shadowed int
	for seed := range uint64(rounds) {
		r := rand.New(rand.NewPCG(seed, uint64(size)))
		m := randomEngineMarket(r, size, wide)
		j := randomEngineJob(r, wide)
		if saturated {
			saturate(r, m)
		}
		resumeSomewhere(rand.New(rand.NewPCG(seed, 7)), j, m) // a source of its own: the markets stay as they were
		e := market.NewEngine(market.Config{})
		e.Advance(now)
		for _, n := range m.nodes {
			e.UpsertNode(n)
		}
		for _, l := range m.leases {
			e.AddLease(l)
		}
		churn(r, e, m)
		got := e.Place(j, now)
		var judged, fits []refNode
		for _, n := range m.nodes {
			v := judge(j, n, m.leases)
			judged = append(judged, v)
			if v.reason == "" {
				fits = append(fits, v)
			}
		}
		want := refAuction(j, fits)
		refShadow(j, judged, want)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d: %s\njob %+v\nmarket:\n%s", seed, fmt.Sprintf(format, args...), j.JobSpec, describeRef(judged, m))
		}
		if got.Placed() != (want != nil) {
			fail("placed = %v (%s), reference placed = %v", got.Placed(), got.Reason, want != nil)
		}
		if want != nil {
			placed++
			if j.Nodes > 1 {
				gangs++
			}
			if want.shadow != "" {
				shadowed++
			}
			checkAward(t, j, got, want, fail)
			continue
		}
		ex := e.Explain(j, now)
		wantRej := map[market.Reason]int{}
		for _, v := range judged {
			if v.reason != "" {
				wantRej[v.reason]++
			}
		}
		if ex.Fits != len(fits) || !mapsEqual(ex.Rejections, wantRej) {
			fail("explain: fits %d, rejections %v; reference fits %d, rejections %v", ex.Fits, ex.Rejections, len(fits), wantRej)
		}
		if j.Tier == idlegrid.TierBronze {
			if got.Reservation != nil || len(got.Preemptions) > 0 {
				fail("bronze job got a plan: %+v", got)
			}
			continue
		}
		checkPlan(t, j, m, judged, got, fail)
		if len(got.Preemptions) > 0 {
			preempted++
		} else if got.Reservation != nil {
			reserved++
		}
	}
	t.Logf("%d rounds: placed %d (%d gangs, %d priced by a shadow runner-up), preempted for %d, reserved for %d", rounds, placed, gangs, shadowed, preempted, reserved)
	if saturated {
		if shadowed < rounds/10 {
			t.Errorf("the generator exercises too little: tune it")
		}
		return
	}
	if wide {
		if preempted < rounds/20 || reserved < rounds/20 {
			t.Errorf("the generator exercises too little: tune it")
		}
		return
	}
	if size > 20 {
		if placed < rounds/2 || gangs < rounds/20 {
			t.Errorf("the generator exercises too little: tune it")
		}
		return
	}
	if placed < rounds/5 || gangs < rounds/50 || shadowed < rounds/100 || preempted < rounds/100 || reserved < rounds/100 {
		t.Errorf("the generator exercises too little: tune it")
	}
}

func checkAward(t *testing.T, j *idlegrid.Job, got market.Decision, want *refAward, fail func(string, ...any)) {
	t.Helper()
	if len(got.Picks) != max(j.Nodes, 1) {
		fail("%d picks, want %d", len(got.Picks), j.Nodes)
	}
	var ids, wantIDs []string
	total := 0.0
	for _, p := range got.Picks {
		ids = append(ids, p.Node.ID)
		total += p.Score
		if len(p.GPUs) != max(j.GPUs, 1) {
			fail("%s: %d GPUs", p.Node.ID, len(p.GPUs))
		}
		if p.PriceMicrosPerGPUHour < p.AskMicrosPerGPUHour || p.PriceMicrosPerGPUHour > j.MaxPriceMicrosPerGPUHour {
			fail("%s: price %s outside ask %s and cap %s", p.Node.ID, p.PriceMicrosPerGPUHour, p.AskMicrosPerGPUHour, j.MaxPriceMicrosPerGPUHour)
		}
	}
	for _, v := range want.winners {
		wantIDs = append(wantIDs, v.n.ID)
	}
	slices.Sort(ids)
	slices.Sort(wantIDs)
	if !slices.Equal(ids, wantIDs) {
		if near(total, want.total) && j.Nodes > 1 {
			return // an exact tie between gangs, summed in another order
		}
		fail("picked %v (total %v), reference %v (total %v)", ids, total, wantIDs, want.total)
	}
	for _, p := range got.Picks {
		if w := want.prices[p.Node.ID]; p.PriceMicrosPerGPUHour != w {
			fail("%s priced %s, reference %s (shadow runner-up %q)\nnote: %s", p.Node.ID, p.PriceMicrosPerGPUHour, w, want.shadow, p.PriceNote())
		}
		if want.shadow != "" && (!p.ShadowRunnerUp || p.RunnerUpNodeID != want.shadow) {
			fail("%s priced against %q (shadow %v), reference shadow runner-up %s\nnote: %s", p.Node.ID, p.RunnerUpNodeID, p.ShadowRunnerUp, want.shadow, p.PriceNote())
		}
		if want.reserve && want.shadow == "" && (p.RunnerUpNodeID != "" || p.ShadowRunnerUp) {
			fail("%s priced against %q; reference: the cap\nnote: %s", p.Node.ID, p.RunnerUpNodeID, p.PriceNote())
		}
	}
}

func checkPlan(t *testing.T, j *idlegrid.Job, m *refMarket, judged []refNode, got market.Decision, fail func(string, ...any)) {
	t.Helper()
	tiers := map[string]idlegrid.Tier{}
	for _, l := range m.leases {
		tiers[l.ID] = l.Tier
	}
	for _, p := range got.Preemptions {
		if tiers[p.LeaseID] != idlegrid.TierBronze {
			fail("preempts %s lease %s", tiers[p.LeaseID], p.LeaseID)
		}
	}
	if j.Nodes > 1 {
		if r := got.Reservation; r != nil && len(r.Nodes) != j.Nodes {
			fail("gang reservation on %d nodes", len(r.Nodes))
		}
		return
	}
	wantNode, wantLost := refPreemption(j, m, judged)
	resNode, resStart := refReservation(j, m, judged)
	if wantNode != "" && resNode != "" && !resStart.After(now.Add(refNotice*time.Second)) {
		wantNode = "" // GPUs free up by the end of the notice anyway: nothing need be lost
	}
	if wantNode != "" {
		if len(got.Preemptions) == 0 {
			fail("no preemption; reference preempts on %s losing %d", wantNode, wantLost)
		}
		var lost int64
		for _, p := range got.Preemptions {
			lost += p.LostGPUSeconds
		}
		if node := got.Reservation.Nodes[0].NodeID; node != wantNode || lost != wantLost {
			fail("preempts on %s losing %d, reference %s losing %d: %+v", node, lost, wantNode, wantLost, got.Preemptions)
		}
		return
	}
	if len(got.Preemptions) > 0 {
		fail("preempts %+v; reference finds no node to free, or reserves one that frees up as soon", got.Preemptions)
	}
	switch {
	case resNode == "" && got.Reservation != nil:
		fail("reserved %+v; reference reserves nothing", *got.Reservation)
	case resNode != "" && got.Reservation == nil:
		fail("no reservation; reference reserves %s from %s (%s)", resNode, resStart, got.Reason)
	case resNode != "" && (got.Reservation.Nodes[0].NodeID != resNode || !got.Reservation.Start.Equal(resStart)):
		fail("reserved %+v; reference %s from %s", *got.Reservation, resNode, resStart)
	}
}

func describeRef(judged []refNode, m *refMarket) string {
	var b strings.Builder
	for _, v := range judged {
		n := v.n
		fmt.Fprintf(&b, "  %s %s/%s rel=%v asks=%v tod=%v tz=%q kinds=%v max=%d cpu=%d ram=%d until=%v cached=%v\n    -> %q ask=%s credit=%s score=%v free=%v\n",
			n.ID, n.Region, n.Residency, n.Reliability, n.Ask.FloorMicrosPerGPUHour, n.Ask.TimeOfDay, n.Schedule.TimeZone,
			n.Ask.AllowedKinds, n.Ask.MaxJobSeconds, n.CPUCores, n.RAMMB, v.until.Sub(now), n.CachedDatasets,
			v.reason, v.ask, v.credit, v.score, v.free)
		for _, g := range n.GPUs {
			fmt.Fprintf(&b, "    gpu %s %s\n", g.UUID, g.Model)
		}
	}
	for _, l := range m.leases {
		fmt.Fprintf(&b, "  lease %s %s %s age=%v limit=%ds gpus=%v\n", l.ID, l.NodeID, l.Tier, now.Sub(*l.StartedAt), l.LimitSeconds, l.GPUUUIDs)
	}
	return b.String()
}
