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
	rt, byModel, err := g.keysModels(r, c)
	if err != nil {
		return err
	}
	list := openai.ModelList{Object: "list", Data: []openai.Model{}}
	for name, ps := range byModel {
		if m := g.model(rt, name, ps); m.Providers > 0 {
			list.Data = append(list.Data, m)
		}
	}
	sort.Slice(list.Data, func(i, j int) bool { return list.Data[i].ID < list.Data[j].ID })
	writeJSON(w, http.StatusOK, list)
	return nil
}

// GET /v1/models/{model}: one model as GET /v1/models lists it. A model
// no provider serves now but one did lately is a 503 to retry, as a
// completion for it is (noProvider); one whose providers are all out of
// reach for now (no live session, breaker open) is a 503 too; otherwise
// a model no provider the key's routing reaches serves is a 404.
func (g *Gateway) getModel(w http.ResponseWriter, r *http.Request, c *apiKey) error {
	rt, byModel, err := g.keysModels(r, c)
	if err != nil {
		return err
	}
	name := r.PathValue("model")
	ps := byModel[name]
	m := g.model(rt, name, ps)
	switch {
	case len(ps) == 0:
		return g.noProvider(name, 0, nil)
	case m.Providers == 0 && g.reachableLater(rt, ps):
		return retryAfter(idlegrid.Errorf(idlegrid.EUNAVAILABLE, "the providers of model %q your key may use are out of reach for now (reconnecting, or failing); retry shortly", name),
			betweenProvidersRetry)
	case m.Providers == 0:
		return idlegrid.Errorf(idlegrid.ENOTFOUND, "model %q is not served now by any provider your key may use; GET /v1/models lists those that are", name)
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

// reachableLater reports whether some provider in ps within the routing rt
// (nil: none) is left out of the listing only for a while: no live
// session, or its breaker open.
func (g *Gateway) reachableLater(rt *idlegrid.Routing, ps []*provider) bool {
	for _, p := range ps {
		if rt == nil || outsideRouting(rt, p) == "" {
			return true
		}
	}
	return false
}

// keysModels is the routing of key c (nil: none) and the models served
// now, by name.
func (g *Gateway) keysModels(r *http.Request, c *apiKey) (*idlegrid.Routing, map[string][]*provider, error) {
	rt, err := c.routingOf(nil)
	if err != nil {
		return nil, nil, err
	}
	byModel, err := g.catalog.models(r.Context())
	return rt, byModel, err
}

// model is the model name as the key whose routing is rt sees it, served
// by ps: how many of them it may use, and the lowest prices among those.
// It was created, as far as renters can tell, when this gateway began to
// list it.
func (g *Gateway) model(rt *idlegrid.Routing, name string, ps []*provider) openai.Model {
	m := openai.Model{ID: name, Object: "model", OwnedBy: "idlegrid"}
	if since := g.catalog.listedSince(name); !since.IsZero() {
		m.Created = since.Unix()
	}
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
	return m
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
