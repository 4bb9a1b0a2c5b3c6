package market

import (
	"cmp"
	"slices"
	"time"

	"github.com/idlegrid/idlegrid"
)

// MarketStat is the market for one GPU model in one region.
type MarketStat struct {
	GPUModel   string `json:"gpu_model"`
	Region     string `json:"region"`
	SupplyGPUs int    `json:"supply_gpus"` // GPUs on online nodes whose window is open
	FreeGPUs   int    `json:"free_gpus"`   // of those, GPUs no lease holds
	// QueuedJobs and QueuedGPUs are the queued jobs that would accept this
	// model in this region: some node of the cell meets the job's hardware
	// and rules (a job that accepts several cells counts in each).
	QueuedJobs int `json:"queued_jobs"`
	QueuedGPUs int `json:"queued_gpus"`
	// FillRate is the share of the supply that leases hold.
	FillRate float64 `json:"fill_rate"`
	// Prices are the latest clearing prices, oldest first.
	Prices []PricePoint `json:"prices"`
	// SuggestedAsk is a floor per tier that should sell: the median recent
	// clearing price (the median ask when nothing cleared yet), 10% higher
	// when queued demand exceeds the free GPUs, 10% lower when less than
	// half the supply is filled. The tiers keep their order: a tier never
	// gets a lower suggestion than a less certain one (bronze ≤ silver ≤
	// gold), since a renter who pays a price for interruptible GPUs would
	// pay at least as much for ones that stay.
	SuggestedAsk map[idlegrid.Tier]idlegrid.Micros `json:"suggested_ask_micros_per_gpu_hour"`
}

// PricePoint is one clearing price: one node's share of a placement.
type PricePoint struct {
	At                    time.Time       `json:"at"`
	Tier                  idlegrid.Tier   `json:"tier"`
	PriceMicrosPerGPUHour idlegrid.Micros `json:"price_micros_per_gpu_hour"`
	GPUs                  int             `json:"gpus"`
	JobID                 string          `json:"job_id"`
}

// historyLen is how many clearing prices each cell keeps.
const historyLen = 64

type cellKey struct{ model, region string }

type cell struct {
	prices []PricePoint // a ring once full
	next   int
}

func (c *cell) add(p PricePoint) {
	if len(c.prices) < historyLen {
		c.prices = append(c.prices, p)
		return
	}
	c.prices[c.next] = p
	c.next = (c.next + 1) % historyLen
}

// ordered returns the prices oldest first.
func (c *cell) ordered() []PricePoint {
	return append(slices.Clone(c.prices[c.next:]), c.prices[:c.next]...)
}

// record enters a pick's clearing price in the market history. nd is its
// node, which remembers its cell, or nil.
func (e *Engine) record(job *idlegrid.Job, p Pick, nd *node, now time.Time) {
	if len(p.GPUs) == 0 || p.Node == nil {
		return
	}
	model := p.GPUs[0].Model
	var c *cell
	if nd != nil && nd.n == p.Node && nd.cell != nil && nd.cellModel == model {
		c = nd.cell
	} else {
		k := cellKey{model, p.Node.Region}
		if c = e.market[k]; c == nil {
			c = &cell{}
			e.market[k] = c
		}
		if nd != nil && nd.n == p.Node {
			nd.cell, nd.cellModel = c, model
		}
	}
	c.add(PricePoint{At: now, Tier: job.Tier, PriceMicrosPerGPUHour: p.PriceMicrosPerGPUHour, GPUs: len(p.GPUs), JobID: job.ID})
}

// RecordPrice enters in the market history of model in region a clearing
// price the engine did not set itself: one a lease stored before the
// engine was built, so that the market view's prices over time survive a
// restart of the server. Give them oldest first, before the engine
// places: a cell keeps the latest historyLen of what it is given.
func (e *Engine) RecordPrice(model, region string, p PricePoint) {
	k := cellKey{model, region}
	c := e.market[k]
	if c == nil {
		c = &cell{}
		e.market[k] = c
	}
	c.add(p)
}

// TakeMarket carries the clearing-price history of old, an engine e
// replaces, over to e: the coordinator rebuilds its engine from the store
// every few minutes, and the market view's prices over time must not go
// blank with it. old must not be used afterwards.
func (e *Engine) TakeMarket(old *Engine) {
	if old == nil {
		return
	}
	for k, c := range old.market {
		if e.market[k] == nil {
			e.market[k] = c
		}
	}
}

// FreeNow returns, for each of ids the engine holds, how many of its GPUs
// a job could take now: those no lease or claim holds, while its window
// is open (none while it is closed), as MarketView counts them. A node
// the engine does not hold (lost, in quarantine, unknown) is left out.
func (e *Engine) FreeNow(ids []string, now time.Time) map[string]int {
	out := make(map[string]int, len(ids))
	open := now.UnixNano()
	for _, id := range ids {
		if nd := e.nodes[id]; nd != nil {
			out[id] = nd.freeNow(open)
		}
	}
	return out
}

// NodesFree returns the IDs of the nodes with at least f.MinFreeGPUs
// (1 or more) GPUs a job could take now, as FreeNow counts them, among
// those of f's regions with a GPU of one of its models and one of at least
// its memory (the rest of f is the store's), by class. It walks each
// matching class's index, skipping the subtrees with too few free GPUs or
// no window open, so it reads the nodes it returns and few others.
func (e *Engine) NodesFree(f idlegrid.NodeFilter, now time.Time) []string {
	e.cleanShelves()
	var ids []string
	atLeast, open := max(f.MinFreeGPUs, 1), now.UnixNano()
	for _, c := range e.classes {
		if !c.mayHold(f) {
			continue
		}
		c.eachFree(atLeast, secDown(open), func(nd *node) {
			if nd.freeNow(open) >= atLeast {
				ids = append(ids, nd.id)
			}
		})
	}
	return ids
}

// mayHold reports whether the class's nodes are in f's regions, with a
// GPU of one of its models and one of at least its memory.
func (c *class) mayHold(f idlegrid.NodeFilter) bool {
	if len(f.Regions) > 0 && !slices.Contains(f.Regions, c.key.region) {
		return false
	}
	model, vram := len(f.GPUModels) == 0, false
	for _, t := range c.types {
		model = model || slices.Contains(f.GPUModels, t.model)
		vram = vram || t.vram >= f.MinVRAMMB
	}
	return model && vram
}

// freeNow is how many of the node's GPUs no hold takes, while its window
// is open at open (unix nanos); none while it is closed.
func (nd *node) freeNow(open int64) int {
	if nd.until <= open {
		return 0
	}
	free := 0
	for _, h := range nd.held {
		if h == nil {
			free++
		}
	}
	return free
}

// viewCell is one GPU model and region of MarketView as it is counted:
// its stat and the asks of the nodes whose first GPU is of its model.
type viewCell struct {
	stat *MarketStat
	asks [tierCount][]idlegrid.Micros
}

// MarketView returns the market per GPU model and region, by model then
// region. It reads every node, so it is for the API, not the placement loop.
func (e *Engine) MarketView(now time.Time) []MarketStat {
	cells := map[cellKey]*viewCell{}
	get := func(k cellKey) *viewCell {
		c := cells[k]
		if c == nil {
			c = &viewCell{stat: &MarketStat{GPUModel: k.model, Region: k.region}}
			cells[k] = c
		}
		return c
	}
	open := now.UnixNano()
	for _, nd := range e.nodes {
		var c *viewCell
		var k cellKey
		for i, g := range nd.gpus {
			if c == nil || g.Model != k.model { // a node's GPUs are mostly of one model
				k = cellKey{g.Model, nd.n.Region}
				c = get(k)
			}
			if nd.until <= open {
				continue
			}
			c.stat.SupplyGPUs++
			if nd.held[i] == nil {
				c.stat.FreeGPUs++
			}
		}
		if len(nd.gpus) > 0 && nd.until > open {
			a := get(cellKey{nd.gpus[0].Model, nd.n.Region})
			for t := range tierCount {
				if nd.asks[t] > 0 {
					a.asks[t] = append(a.asks[t], nd.asks[t])
				}
			}
		}
	}
	for k, c := range e.market {
		get(k).stat.Prices = c.ordered()
	}
	for _, j := range e.queued {
		for k := range e.demandCells(j) {
			if c := cells[k]; c != nil {
				c.stat.QueuedJobs++
				c.stat.QueuedGPUs += max(j.GPUs, 1) * max(j.Nodes, 1)
			}
		}
	}
	out := make([]MarketStat, 0, len(cells))
	for _, c := range cells {
		s := c.stat
		if s.SupplyGPUs > 0 {
			s.FillRate = float64(s.SupplyGPUs-s.FreeGPUs) / float64(s.SupplyGPUs)
		}
		s.SuggestedAsk = suggestAsks(s, c.asks)
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b MarketStat) int {
		return cmp.Or(compareStrings(a.GPUModel, b.GPUModel), compareStrings(a.Region, b.Region))
	})
	return out
}

// demandCells returns the cells whose nodes a queued job would accept
// for its hardware and rules: the GPU types that fit it (model and VRAM)
// of the classes its signature accepts (region, residency, workload kind)
// that hold a node selling its tier and allow a job as long.
func (e *Engine) demandCells(job *idlegrid.Job) map[cellKey]bool {
	cells := map[cellKey]bool{}
	for _, c := range e.signatureOf(job).all {
		if c.sold[job.Tier.Rank()] == 0 || (c.key.maxJob > 0 && c.key.maxJob < job.DurationSeconds) {
			continue
		}
		for _, t := range c.types {
			if t.serves(job) {
				cells[cellKey{t.model, c.key.region}] = true
			}
		}
	}
	return cells
}

// suggestAsks applies the rule documented on MarketStat.SuggestedAsk.
func suggestAsks(s *MarketStat, asks [tierCount][]idlegrid.Micros) map[idlegrid.Tier]idlegrid.Micros {
	out := map[idlegrid.Tier]idlegrid.Micros{}
	for t, tier := range idlegrid.Tiers {
		var seen []idlegrid.Micros
		for _, p := range s.Prices {
			if p.Tier == tier {
				seen = append(seen, p.PriceMicrosPerGPUHour)
			}
		}
		if len(seen) == 0 {
			seen = asks[t]
		}
		if len(seen) == 0 {
			continue
		}
		slices.Sort(seen)
		m := seen[(len(seen)-1)/2]
		switch {
		case s.QueuedGPUs > s.FreeGPUs:
			m = m * 110 / 100
		case s.SupplyGPUs > 0 && s.FillRate < 0.5:
			m = m * 90 / 100
		}
		out[tier] = m
	}
	orderTiers(out)
	return out
}

// orderTiers raises each tier's suggestion to the one below it where the
// less certain tier's price came out higher, walking up from bronze.
func orderTiers(asks map[idlegrid.Tier]idlegrid.Micros) {
	var below idlegrid.Micros
	for _, tier := range slices.Backward(idlegrid.Tiers) {
		m, ok := asks[tier]
		if !ok {
			continue
		}
		if m < below {
			asks[tier] = below
		}
		below = max(m, below)
	}
}
