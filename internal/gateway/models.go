package gateway

import (
	"net/http"
	"sort"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// listModels answers GET /v1/models: every model some provider serves
// now to the caller's key, with its cheapest prices and its number of
// providers. A provider outside the key's routing (its hard constraints:
// region, data residency, only, ignore, max price), without a live
// session, or with its breaker open, does not count; a model no provider
// counts for is not listed.
func (g *Gateway) listModels(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	rt, err := c.routingOf(nil)
	if err != nil {
		return err
	}
	byModel, err := g.catalog.models(r.Context())
	if err != nil {
		return err
	}
	list := openai.ModelList{Object: "list", Data: []openai.Model{}}
	for name, ps := range byModel {
		m := openai.Model{ID: name, Object: "model", OwnedBy: "idlegrid"}
		for _, p := range ps {
			if !g.listable(rt, p) {
				continue
			}
			m.Providers++
			in, out := int64(p.Model.InputMicrosPerMTokens), int64(p.Model.OutputMicrosPerMTokens)
			if m.Pricing == nil {
				m.Pricing = &openai.ModelPricing{InputMicrosPerMTokens: in, OutputMicrosPerMTokens: out}
			}
			m.Pricing.InputMicrosPerMTokens = min(m.Pricing.InputMicrosPerMTokens, in)
			m.Pricing.OutputMicrosPerMTokens = min(m.Pricing.OutputMicrosPerMTokens, out)
		}
		if m.Providers > 0 {
			list.Data = append(list.Data, m)
		}
	}
	sort.Slice(list.Data, func(i, j int) bool { return list.Data[i].ID < list.Data[j].ID })
	writeJSON(w, http.StatusOK, list)
	return nil
}

// listable reports whether p counts in GET /v1/models for a key whose
// routing is rt (nil: none): within its hard constraints, with a live
// session and a breaker that lets requests through.
func (g *Gateway) listable(rt *idlegrid.Routing, p *provider) bool {
	if rt != nil && outsideRouting(rt, p) != "" {
		return false
	}
	if _, ok := g.cfg.Nodes.Dial(p.NodeID); !ok {
		return false
	}
	return g.health.usable(g.health.of(p.key))
}
