package gateway

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// candidate is a provider that passed a request's hard constraints, with
// what the gateway knows of it now.
type candidate struct {
	*provider
	up   *upstream
	load float64 // (in flight + queued at the model server) / max concurrency; from 1 up, a queue
	full bool    // at max concurrency by the gateway's own count: the agent would refuse
	ttft float64 // ms, EWMA; 0 unknown
	tps  float64 // EWMA; 0 unknown
	ok   float64 // EWMA of successes
}

// excluded counts why providers of the model were left out, for the error
// that says why none is left.
type excluded map[string]int

func (e excluded) String() string {
	reasons := make([]string, 0, len(e))
	for r, n := range e {
		reasons = append(reasons, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(reasons)
	return strings.Join(reasons, ", ")
}

// plan orders the providers of a request's model: the hard constraints
// first (region, data residency, only and ignore, max price, a live
// session, for a text completion not having answered one 404 lately, a
// breaker that lets requests through), then the order the request asks
// for. It returns at most attempts candidates.
func (g *Gateway) plan(req *openai.Request, all []*provider, attempts int) ([]*candidate, excluded) {
	p := req.Provider
	if p == nil {
		p = &idlegrid.Routing{}
	}
	why := excluded{}
	var cs []*candidate
	now := g.health.clock.Now()
	for _, pr := range all {
		if reason := g.refuse(req, p, pr); reason != "" {
			why[reason]++
			continue
		}
		up := g.health.of(pr.key)
		if !g.health.serves(up, req.Endpoint) {
			why["not serving POST /v1/"+string(req.Endpoint)]++
			continue
		}
		if !g.health.usable(up) {
			why[reasonBreaker]++
			continue
		}
		ttft, tps, ok, _ := up.snapshot()
		inflight := up.inflight.Load()
		cs = append(cs, &candidate{provider: pr, up: up, ttft: ttft, tps: tps, ok: ok,
			load: loadOf(inflight, up.queue(now), pr.Model.MaxConcurrency),
			full: inflight >= int64(pr.Model.MaxConcurrency)})
	}
	order(cs, p, req.PrefixHash)
	if p.AllowFallbacks != nil && !*p.AllowFallbacks {
		attempts = 1
	}
	if len(cs) > attempts {
		cs = cs[:attempts]
	}
	return cs, why
}

// refuse says why pr fails a hard constraint of the request, or "".
func (g *Gateway) refuse(req *openai.Request, p *idlegrid.Routing, pr *provider) string {
	if req.Endpoint == openai.Embeddings && !pr.Model.Embeddings {
		return "not serving embeddings"
	}
	if reason := outsideRouting(p, pr); reason != "" {
		return reason
	}
	if _, ok := g.cfg.Nodes.Dial(pr.NodeID); !ok {
		return reasonNoSession
	}
	return ""
}

// outsideRouting says which hard constraint of the routing p pr fails
// (region, data residency, only, ignore, max price), or "": what a request
// and GET /v1/models alike leave out.
func outsideRouting(p *idlegrid.Routing, pr *provider) string {
	switch {
	case len(p.Region) > 0 && !slices.Contains(p.Region, pr.Region):
		return "outside the regions asked for"
	case len(p.DataResidency) > 0 && !slices.Contains(p.DataResidency, pr.Residency):
		return "outside the data residency asked for"
	case len(p.Only) > 0 && !slices.Contains(p.Only, pr.NodeID) && !slices.Contains(p.Only, pr.ProviderID):
		return "not in provider.only"
	case slices.Contains(p.Ignore, pr.NodeID) || slices.Contains(p.Ignore, pr.ProviderID):
		return "in provider.ignore"
	case p.MaxPrice != nil && above(pr.Model.InputMicrosPerMTokens, p.MaxPrice.Prompt):
		return "above the max prompt price"
	case p.MaxPrice != nil && above(pr.Model.OutputMicrosPerMTokens, p.MaxPrice.Completion):
		return "above the max completion price"
	}
	return ""
}

// above reports whether price is above limit; a nil limit is none.
func above(price idlegrid.Micros, limit *idlegrid.Micros) bool {
	return limit != nil && price > *limit
}

// order sorts the candidates for the request:
//
//   - sort=price: cheapest first (prompt plus completion price), then least loaded;
//   - sort=latency: lowest time to first byte first (unknown counts as best,
//     so that a newcomer gets measured, the least loaded unknown first);
//   - sort=throughput: most tokens per second first (unknown likewise);
//   - otherwise, the default: price weighted by load and reliability,
//     (price+1) × (1+load) / (reliability × success rate)², and, when the
//     prompt has a prefix, the provider its prefix hashes to (rendezvous
//     hashing) goes first unless it is saturated, so that repeated prefixes
//     meet a warm KV cache;
//
// and, whatever the sort, the providers named in provider.order go first,
// in that order. Saturated providers (load ≥ 1: a queue, the gateway's or
// the model server's) always go after the rest, and of them those at
// their max concurrency by the gateway's count, which would refuse, last.
func order(cs []*candidate, p *idlegrid.Routing, prefix uint64) {
	price := func(c *candidate) float64 {
		return float64(c.Model.InputMicrosPerMTokens + c.Model.OutputMicrosPerMTokens)
	}
	var key func(c *candidate) float64
	switch p.Sort {
	case idlegrid.RoutingSortPrice:
		key = func(c *candidate) float64 { return price(c) + c.load*1e-3 }
	case idlegrid.RoutingSortLatency:
		key = latencyKey
	case idlegrid.RoutingSortThroughput:
		key = throughputKey
	default:
		key = func(c *candidate) float64 {
			w := c.Reliability * c.ok
			return (price(c) + 1) * (1 + c.load) / math.Max(w*w, 1e-6)
		}
	}
	keys := make(map[*candidate]float64, len(cs))
	for _, c := range cs {
		keys[c] = key(c)
	}
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if sa, sb := saturation(a), saturation(b); sa != sb {
			return sa < sb
		}
		return keys[a] < keys[b]
	})
	if p.Sort == "" && len(p.Order) == 0 && prefix != 0 && (p.Sticky == nil || *p.Sticky) {
		stickFirst(cs, prefix)
	}
	if len(p.Order) > 0 {
		rank := func(c *candidate) int {
			for i, name := range p.Order {
				if name == c.NodeID || name == c.ProviderID {
					return i
				}
			}
			return len(p.Order)
		}
		// Those at max_concurrency stay last, as order puts them: first
		// in the plan, one would make the request wait (saturated) while
		// another provider has room.
		sort.SliceStable(cs, func(i, j int) bool {
			if cs[i].full != cs[j].full {
				return !cs[i].full
			}
			return rank(cs[i]) < rank(cs[j])
		})
	}
}

// latencyKey is a candidate's key for sort=latency: the lowest time to
// first byte, weighed by load, first; an unmeasured one (ttft 0) before
// every measured one, so that it gets measured, and of those the least
// loaded first.
func latencyKey(c *candidate) float64 {
	if c.ttft <= 0 {
		return -1 / (1 + c.load)
	}
	return c.ttft * (1 + c.load)
}

// throughputKey is a candidate's key for sort=throughput: the most tokens
// per second, weighed by load, first; an unmeasured one (tps 0) before
// every measured one, so that it gets measured, and of those the least
// loaded first.
func throughputKey(c *candidate) float64 {
	if c.tps <= 0 {
		return -math.MaxFloat64 / (1 + c.load)
	}
	return -c.tps / (1 + c.load)
}

// saturation ranks a candidate for order: 0 with room, 1 with a queue (at
// the model server, or as many in flight as it takes), 2 full.
func saturation(c *candidate) int {
	switch {
	case c.full:
		return 2
	case c.load >= 1:
		return 1
	}
	return 0
}

// stickFirst moves the unsaturated candidate that prefix hashes to
// (highest rendezvous weight) to the front.
func stickFirst(cs []*candidate, prefix uint64) {
	best, bestW := -1, uint64(0)
	for i, c := range cs {
		if c.load >= 1 {
			continue
		}
		h := fnv.New64a()
		var b [8]byte
		for k := range 8 {
			b[k] = byte(prefix >> (8 * k))
		}
		h.Write(b[:])
		h.Write([]byte(c.key))
		if w := h.Sum64(); best < 0 || w > bestW {
			best, bestW = i, w
		}
	}
	if best > 0 {
		c := cs[best]
		copy(cs[1:best+1], cs[:best])
		cs[0] = c
	}
}

// noProvider is the error of a request no provider can serve: all of the
// model's providers were left out for why. With none at all, a model
// served lately is between providers (see recentlyServed), worth a retry.
func (g *Gateway) noProvider(model string, all int, why excluded) error {
	if all == 0 {
		if ago, ok := g.catalog.lastServed(model); ok {
			return retryAfter(&idlegrid.Error{Code: idlegrid.EUNAVAILABLE, Field: "model",
				Message: fmt.Sprintf("no provider serves model %q right now, though one did %s: it may be restarting, or its hours may have ended; retry shortly, or GET /v1/models for the models served now", model, agoText(ago))},
				betweenProvidersRetry)
		}
		return &idlegrid.Error{Code: idlegrid.ENOTFOUND, Field: "model",
			Message: fmt.Sprintf("no provider serves model %q now; GET /v1/models lists the models served", model)}
	}
	code := idlegrid.ENOTFOUND // the request's own constraints ruled every provider out
	if why[reasonBreaker] > 0 || why[reasonNoSession] > 0 {
		code = idlegrid.EUNAVAILABLE
	}
	return idlegrid.Errorf(code, "none of the %d providers of model %q can take this request: %s", all, model, why)
}

// agoText says when, ago before now, something last happened.
func agoText(ago time.Duration) string {
	if ago < time.Second {
		return "a moment ago"
	}
	return ago.Round(time.Second).String() + " ago"
}

// The reasons for leaving a provider out that pass with time.
const (
	reasonBreaker   = "with their circuit breaker open"
	reasonNoSession = "without a live session"
)
