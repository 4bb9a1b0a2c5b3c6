package gateway

import (
	"cmp"
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// statsWindow is how many recent requests of each model the statistics
// cover.
const statsWindow = 2048

// sample is one served request, as the statistics see it.
type sample struct {
	latency time.Duration // request in to last byte out
	ttft    time.Duration // request in to first byte out
	// streamed: the answer was a stream, so ttft is a time to first
	// token; a whole answer's first byte comes with its last.
	streamed bool
	tps      float64 // completion tokens per second after the first byte; 0 unknown
	tokens   int64   // prompt plus completion
	charge   idlegrid.Micros
}

// statsBook keeps the last statsWindow samples of each model.
type statsBook struct {
	mu      sync.Mutex
	byModel map[string]*ring
}

type ring struct {
	samples []sample
	next    int
	total   int64 // requests ever
}

func (s *statsBook) add(model string, smp sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byModel == nil {
		s.byModel = map[string]*ring{}
	}
	r, ok := s.byModel[model]
	if !ok {
		r = &ring{samples: make([]sample, 0, 64)}
		s.byModel[model] = r
	}
	r.total++
	if len(r.samples) < statsWindow {
		r.samples = append(r.samples, smp)
		return
	}
	r.samples[r.next] = smp
	r.next = (r.next + 1) % statsWindow
}

// The answers of GET /v1/inference/stats and its parts are wire types,
// so that clients read them without importing the gateway.
type (
	StatsResponse = wire.InferenceStats
	ModelStats    = wire.ModelStats
	BreakerStats  = wire.BreakerStats
	ProviderLoad  = wire.ProviderLoad
	UsageResponse = wire.InferenceUsageList
)

// Breakers returns the circuit breakers that have tripped since the
// gateway started, by node and model: what GET /v1/inference/stats lists.
func (g *Gateway) Breakers() []BreakerStats {
	out := g.health.breakers()
	if out == nil {
		out = []BreakerStats{}
	}
	return out
}

// snapshot computes every model's statistics.
func (s *statsBook) snapshot() []ModelStats {
	s.mu.Lock()
	copies := map[string]*ring{}
	for m, r := range s.byModel {
		copies[m] = &ring{samples: append([]sample(nil), r.samples...), total: r.total}
	}
	s.mu.Unlock()
	out := make([]ModelStats, 0, len(copies))
	for m, r := range copies {
		out = append(out, summarise(m, r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

func summarise(model string, r *ring) ModelStats {
	n := len(r.samples)
	lat, ttft := make([]float64, 0, n), make([]float64, 0, n)
	var tps []float64
	var tokens int64
	var charge idlegrid.Micros
	for _, s := range r.samples {
		lat = append(lat, ms(s.latency))
		if s.streamed {
			ttft = append(ttft, ms(s.ttft))
		}
		if s.tps > 0 {
			tps = append(tps, s.tps)
		}
		tokens += s.tokens
		charge += s.charge
	}
	st := ModelStats{Model: model, Requests: r.total, Window: n,
		LatencyP50MS: quantile(lat, 0.5), LatencyP95MS: quantile(lat, 0.95),
		TTFTP50MS: quantile(ttft, 0.5), TTFTP95MS: quantile(ttft, 0.95), TokensPerSecond: quantile(tps, 0.5)}
	if tokens > 0 {
		st.MicrosPerMTokens = idlegrid.PerMTokens(charge, tokens)
	}
	return st
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// quantile is the nearest-rank quantile of xs (which it sorts); 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	i := int(q*float64(len(xs))+0.5) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// serveStats answers GET /v1/inference/stats: every model's figures and
// the breakers that have tripped.
func (g *Gateway) serveStats(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	if _, err := checkQuery(r); err != nil {
		return err
	}
	providers, err := g.providerLoads(r.Context())
	if err != nil {
		return err
	}
	breakers := g.Breakers()
	nameBreakers(breakers, providers)
	writeJSON(w, http.StatusOK, StatsResponse{Models: g.stats.snapshot(), Breakers: breakers, Waiting: g.waiting.depth(),
		Providers: providers})
	return nil
}

// nameBreakers gives each breaker its node's name, from the providers
// online now; a node that has gone keeps its ID only.
func nameBreakers(bs []BreakerStats, online []ProviderLoad) {
	names := make(map[string]string, len(online))
	for _, p := range online {
		names[p.NodeID] = p.NodeName
	}
	for i := range bs {
		bs[i].NodeName = names[bs[i].NodeID]
	}
}

// providerLoads returns every provider of every model in the catalog as
// routing sees it now, by model then node.
func (g *Gateway) providerLoads(ctx context.Context) ([]ProviderLoad, error) {
	byModel, err := g.catalog.models(ctx)
	if err != nil {
		return nil, err
	}
	now := g.health.clock.Now()
	out := []ProviderLoad{}
	for _, ps := range byModel {
		for _, pr := range ps {
			out = append(out, g.health.load(pr, now))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Model != out[j].Model {
			return out[i].Model < out[j].Model
		}
		return out[i].NodeID < out[j].NodeID
	})
	return out, nil
}

// serveUsage answers GET /v1/inference/usage: the caller's own metered
// requests, as renter or provider, newest first (?limit=, default 100;
// ?before=, the last request ID of a page, for the next page).
func (g *Gateway) serveUsage(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	q, err := checkQuery(r, "before", "limit")
	if err != nil {
		return err
	}
	f := idlegrid.UsageFilter{AccountID: c.AccountID, Limit: 100, Before: q.Get("before")}
	if s := q.Get("limit"); s != "" {
		n, err := parseLimit(s)
		if err != nil {
			return err
		}
		f.Limit = n
	}
	us, err := g.cfg.Store.ListInferenceUsage(r.Context(), f)
	if err != nil {
		return err
	}
	if us == nil {
		us = []*idlegrid.InferenceUsage{}
	}
	writeJSON(w, http.StatusOK, UsageResponse{Data: asSeenBy(us, c.AccountID)})
	return nil
}

// asSeenBy is us as account may see them: a provider sees who was served
// (the renter's account), not which of the renter's keys asked, which is
// the renter's own business.
func asSeenBy(us []*idlegrid.InferenceUsage, account string) []*idlegrid.InferenceUsage {
	for i, u := range us {
		if u.RenterID != account && u.KeyID != "" {
			seen := *u
			seen.KeyID = ""
			us[i] = &seen
		}
	}
	return us
}

func parseLimit(s string) (int, error) {
	n := 0
	for _, ch := range s {
		if ch < '0' || ch > '9' || n > 100_000 {
			return 0, idlegrid.Invalid("limit", "must be a whole number between 1 and 1000")
		}
		n = n*10 + int(ch-'0')
	}
	if n < 1 || n > 1000 {
		return 0, idlegrid.Invalid("limit", "must be a whole number between 1 and 1000")
	}
	return n, nil
}

// repeatable are the query parameters that may be given more than once:
// the lists OpenAI's SDKs send a value at a time.
var repeatable = map[string]bool{"include": true, "include[]": true}

// checkQuery refuses, as the rest of the API does, a query parameter the
// route does not know (known), or one given more than once, naming it.
func checkQuery(r *http.Request, known ...string) (url.Values, error) {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, idlegrid.Errorf(idlegrid.EINVALID, "malformed query string: %v", err)
	}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		field := cmp.Or(strings.ToValidUTF8(name, "?"), "query")
		switch {
		case !slices.Contains(known, name) && len(known) == 0:
			return nil, idlegrid.Invalid(field, "unknown query parameter; this endpoint takes none")
		case !slices.Contains(known, name):
			return nil, idlegrid.Invalid(field, "unknown query parameter; use %s", strings.Join(known, ", "))
		case len(values[name]) > 1 && !repeatable[name]:
			return nil, idlegrid.Invalid(field, "given %d times; give it once", len(values[name]))
		}
	}
	return values, nil
}
