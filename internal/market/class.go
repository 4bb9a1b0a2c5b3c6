package market

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/idlegrid/idlegrid"
)

// classKey is what a job's hard constraints read of a node's offer,
// besides the tiers it sells: nodes with equal keys are one class, which a
// job accepts whole or not at all. (Which tiers a node sells, and whether
// it meets the gold bar, decide which of its class's views it is in.)
//
// Nodes offered in windows are kept apart from nodes offered around the
// clock (windowed), though jobs accept both alike: when windows near
// their end, a search for a job longer than what is left would otherwise
// walk past the closing nodes one by one among the open ones of the same
// price; apart, their shelf's root turns the job away at once. Only the
// mode is in the key, not the windows: a class per schedule could be a
// class per node.
type classKey struct {
	region    string
	residency string
	gpuTypes  string // "model/vram" of each distinct GPU type, sorted, comma-separated
	kinds     string // allowed kinds, sorted; empty: all
	maxJob    int64
	windowed  bool // offered in windows, not always
}

// gpuType is one kind of GPU a class's nodes have.
type gpuType struct {
	model string
	vram  int
}

// serves reports whether a GPU of the type can serve job: an allowed
// model with enough memory, as usableBy says of one GPU.
func (t gpuType) serves(job *idlegrid.Job) bool {
	return modelAllowed(job.GPUModels, t.model) && t.vram >= job.MinVRAMMB
}

// class is the nodes with one classKey, on a shelf.
type class struct {
	shelf
	key   classKey
	idx   int // position in Engine.classes
	types []gpuType
	kinds []idlegrid.WorkloadKind
	sold  [tierCount]int // nodes that sell each tier
	// cached holds, per dataset, the sub-shelf of the class's nodes that
	// cache it, so that a job naming the dataset finds them by its credit.
	cached map[string]*shelf
}

// keyOf returns the class key of a node.
func (e *Engine) keyOf(nd *node) (classKey, []gpuType) {
	n := nd.n
	var types []gpuType
	for _, g := range n.GPUs {
		t := gpuType{g.Model, g.VRAMMB}
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	slices.SortFunc(types, func(a, b gpuType) int {
		return cmp.Or(strings.Compare(a.model, b.model), cmp.Compare(a.vram, b.vram))
	})
	var tb strings.Builder
	for i, t := range types {
		if i > 0 {
			tb.WriteByte(',')
		}
		tb.WriteString(t.model + "/" + strconv.Itoa(t.vram))
	}
	kinds := make([]string, 0, len(n.Ask.AllowedKinds))
	for _, k := range n.Ask.AllowedKinds {
		kinds = append(kinds, string(k))
	}
	slices.Sort(kinds)
	return classKey{
		region:    n.Region,
		residency: n.Residency,
		gpuTypes:  tb.String(),
		kinds:     strings.Join(slices.Compact(kinds), ","),
		maxJob:    n.Ask.MaxJobSeconds,
		windowed:  n.Schedule.Mode == idlegrid.ScheduleWindows,
	}, types
}

// classFor returns the class of key, making it when it is new.
func (e *Engine) classFor(key classKey, types []gpuType) *class {
	if c := e.classByKey[key]; c != nil {
		return c
	}
	c := &class{key: key, idx: len(e.classes), types: types, cached: map[string]*shelf{}}
	c.shelf = *e.newShelf()
	for _, k := range strings.Split(key.kinds, ",") {
		if k != "" {
			c.kinds = append(c.kinds, idlegrid.WorkloadKind(k))
		}
	}
	e.classByKey[key] = c
	e.classes = append(e.classes, c)
	e.classGen++
	return c
}

// dropClass forgets an empty class.
func (e *Engine) dropClass(c *class) {
	delete(e.classByKey, c.key)
	e.classes = slices.Delete(e.classes, c.idx, c.idx+1)
	for i := c.idx; i < len(e.classes); i++ {
		e.classes[i].idx = i
	}
	e.classGen++
}

// add puts a node on the class's shelf and on the sub-shelf of each
// dataset it caches.
func (e *Engine) addToClass(c *class, nd *node) {
	e.memberGen++
	nd.cls, nd.mixed = c, c.mixed()
	c.shelf.add(nd)
	for t := range tierCount {
		if nd.floors[t] > 0 {
			c.sold[t]++
		}
	}
	for _, ds := range nd.datasets {
		sub := c.cached[ds]
		if sub == nil {
			sub = e.newShelf()
			c.cached[ds] = sub
			e.subGen++
		}
		sub.add(nd)
	}
}

func (c *class) remove(nd *node) {
	c.shelf.remove(nd)
	for t := range tierCount {
		if nd.floors[t] > 0 {
			c.sold[t]--
		}
	}
	for _, ds := range nd.datasets {
		if sub := c.cached[ds]; sub != nil {
			sub.remove(nd)
			if sub.count == 0 {
				delete(c.cached, ds)
				sub.e.subGen++
			}
		}
	}
	nd.cls = nil
}

// mixed reports whether the class's nodes have more than one kind of GPU,
// so that a node's free GPUs may not all be usable by a job.
func (c *class) mixed() bool { return len(c.types) > 1 }

// classReason is the first constraint of a class that every one of its
// nodes fails for job, in check order (kind, region, residency, GPU model,
// VRAM), or "". The longest job a node allows is checked apart, because
// durations vary within a signature.
func classReason(c *class, job *idlegrid.Job) Reason {
	k := &c.key
	switch {
	case len(c.kinds) > 0 && !slices.Contains(c.kinds, job.Kind):
		return ReasonKind
	case job.Region != "" && !job.RegionPreferred && k.region != job.Region:
		return ReasonRegion
	case job.Residency != "" && !strings.EqualFold(k.residency, job.Residency):
		return ReasonResidency
	}
	reason := ReasonGPUModel
	for _, g := range c.types {
		if !modelAllowed(job.GPUModels, g.model) {
			continue
		}
		if g.vram >= job.MinVRAMMB {
			return ""
		}
		reason = ReasonVRAM
	}
	return reason
}

// allUsable reports whether every GPU of the class's nodes can serve
// job, so that a node's usable GPUs are all its GPUs.
func (c *class) allUsable(job *idlegrid.Job) bool {
	for _, t := range c.types {
		if !t.serves(job) {
			return false
		}
	}
	return true
}

// staticReason is the first constraint nd fails for job that its offer
// and record alone decide, in check order, or "": tier, kind, longest
// job, region, residency, GPU model, VRAM, reliability bar, GPU count.
func (e *Engine) staticReason(nd *node, job *idlegrid.Job) Reason {
	if nd.floors[job.Tier.Rank()] <= 0 {
		return ReasonTier
	}
	if r := classStaticReason(nd.cls, job); r != "" {
		return r
	}
	return e.nodeStaticReason(nd, job)
}

// classStaticReason is the part of staticReason that nd's class decides
// for all its nodes alike: kind, longest job, region, residency, GPU
// model, VRAM.
func classStaticReason(c *class, job *idlegrid.Job) Reason {
	switch {
	case len(c.kinds) > 0 && !slices.Contains(c.kinds, job.Kind):
		return ReasonKind
	case c.key.maxJob > 0 && c.key.maxJob < job.DurationSeconds:
		return ReasonMaxDuration
	}
	return classReason(c, job)
}

// nodeStaticReason is the part of staticReason after the class's: the
// node's own record and GPUs.
func (e *Engine) nodeStaticReason(nd *node, job *idlegrid.Job) Reason {
	if job.Tier == idlegrid.TierGold && !goldAllowed(nd.n, e.cfg) {
		return ReasonReliability
	}
	if countUsable(job, nd.gpus) < max(job.GPUs, 1) {
		return ReasonGPUs
	}
	return ""
}

// goldAllowed reports whether n meets the bar for gold jobs: the
// reliability and the trust level cfg asks.
func goldAllowed(n *idlegrid.Node, cfg Config) bool {
	return n.Reliability >= cfg.GoldMinReliability && n.Level >= cfg.GoldMinLevel
}

// viewsOf is the tiers whose views nd is in: bit t when it sells t, and
// for gold meets the bar.
func viewsOf(nd *node, cfg Config) uint8 {
	var v uint8
	for t := range tierCount {
		if nd.floors[t] > 0 && (t != 0 || goldAllowed(nd.n, cfg)) {
			v |= 1 << t
		}
	}
	return v
}

// usableBy reports whether g can serve the job.
func usableBy(job *idlegrid.Job, g idlegrid.GPU) bool {
	return modelAllowed(job.GPUModels, g.Model) && g.VRAMMB >= job.MinVRAMMB
}

// sigKey is the part of a job that decides which classes accept it.
type sigKey struct {
	tier      idlegrid.Tier
	kind      idlegrid.WorkloadKind
	region    string // when required
	residency string
	nModels   int
	models    [3]string // the first three allowed models
	more      string    // the rest, joined, when there are more
	vram      int
}

// signature is the classes that accept every job with one sigKey.
type signature struct {
	gen      uint64
	entries  []sigEntry // one per class in all, what the class loop reads
	all      []*class
	byRegion map[string][]sigEntry
	regions  []string // keys of byRegion, sorted
	accepts  []bool   // by class idx
	rejected []*class // with reason in reasons
	reasons  []Reason
	// waits caches wait reasons, which count nodes and read their least
	// asks (and, for a job that avoids providers or asks a trust level,
	// their providers and levels), while waitGen is the engine's
	// memberGen, waitAskGen its askGen and waitLevelGen its levelGen.
	waits        map[waitKey]string
	waitGen      uint64
	waitAskGen   uint64
	waitLevelGen uint64
	// subs caches, per dataset, the sub-shelves of accepted classes that
	// cache it, while subGen is the engine's.
	subs   map[string][]subEntry
	subGen uint64
}

// sigEntry is an accepted class as a search's class loop reads it.
type sigEntry struct {
	maxJob int64
	sh     *shelf
}

// subEntry is a sub-shelf as a search reads it.
type subEntry struct {
	maxJob int64
	region string
	sh     *shelf
}

// subShelves returns the sub-shelves of the classes sig accepts that cache
// dataset ds.
func (e *Engine) subShelves(sig *signature, ds string) []subEntry {
	if sig.subGen != e.subGen || sig.subs == nil {
		sig.subs, sig.subGen = map[string][]subEntry{}, e.subGen
	}
	subs, ok := sig.subs[ds]
	if !ok {
		for _, c := range e.cachedBy[ds] {
			if sig.accepts[c.idx] {
				subs = append(subs, subEntry{c.key.maxJob, c.key.region, c.cached[ds]})
			}
		}
		sig.subs[ds] = subs
	}
	return subs
}

// maxSignatures bounds the signature cache; it is emptied when full.
const maxSignatures = 4096

// signatureOf returns the cached classes that accept job.
func (e *Engine) signatureOf(job *idlegrid.Job) *signature {
	key := sigKey{tier: job.Tier, kind: job.Kind, residency: job.Residency, vram: job.MinVRAMMB, nModels: len(job.GPUModels)}
	if !job.RegionPreferred {
		key.region = job.Region
	}
	copy(key.models[:], job.GPUModels)
	if len(job.GPUModels) > len(key.models) {
		key.more = strings.Join(job.GPUModels[len(key.models):], "\x00")
	}
	if s := e.sigs[key]; s != nil && s.gen == e.classGen {
		return s
	}
	if len(e.sigs) >= maxSignatures {
		clear(e.sigs)
	}
	s := &signature{gen: e.classGen, byRegion: map[string][]sigEntry{}, accepts: make([]bool, len(e.classes))}
	for _, c := range e.classes {
		if r := classReason(c, job); r != "" {
			s.rejected = append(s.rejected, c)
			s.reasons = append(s.reasons, r)
			continue
		}
		entry := sigEntry{c.key.maxJob, &c.shelf}
		s.all = append(s.all, c)
		s.entries = append(s.entries, entry)
		s.accepts[c.idx] = true
		if s.byRegion[c.key.region] == nil {
			s.regions = append(s.regions, c.key.region)
		}
		s.byRegion[c.key.region] = append(s.byRegion[c.key.region], entry)
	}
	slices.Sort(s.regions)
	e.sigs[key] = s
	return s
}
