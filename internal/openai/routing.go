package openai

import (
	"fmt"
	"slices"

	"github.com/idlegrid/idlegrid"
)

// WithDefaults returns the routing of a request whose own "provider"
// object is p (nil when it sent none), sent with an API key whose default
// routing is d (nil when it has none): field by field, what the request
// sets wins, and the key's default fills the rest. A list the request
// sends replaces the key's whole, even an empty one, so that a request can
// lift a key's "only"; each of max_price's two prices is a field of its
// own. Neither p nor d is changed.
func WithDefaults(p, d *idlegrid.Routing) *idlegrid.Routing {
	if d == nil || d.IsZero() {
		return p
	}
	out := *d
	if m := d.MaxPrice; m != nil {
		if m.Prompt == nil && m.Completion == nil {
			out.MaxPrice = nil
		} else {
			mp := *m
			out.MaxPrice = &mp
		}
	}
	if p == nil {
		return &out
	}
	if p.Sort != "" {
		out.Sort = p.Sort
	}
	for _, f := range []struct{ from, to *[]string }{
		{&p.Order, &out.Order}, {&p.Only, &out.Only}, {&p.Ignore, &out.Ignore},
		{&p.Region, &out.Region}, {&p.DataResidency, &out.DataResidency},
	} {
		if *f.from != nil {
			*f.to = *f.from
		}
	}
	if p.AllowFallbacks != nil {
		out.AllowFallbacks = p.AllowFallbacks
	}
	if p.Sticky != nil {
		out.Sticky = p.Sticky
	}
	if p.MaxPrice != nil {
		mp := *p.MaxPrice
		if out.MaxPrice != nil {
			if mp.Prompt == nil {
				mp.Prompt = out.MaxPrice.Prompt
			}
			if mp.Completion == nil {
				mp.Completion = out.MaxPrice.Completion
			}
		}
		out.MaxPrice = &mp
	}
	return &out
}

// Binding returns the routing of a request whose own "provider" object is
// p, sent with an API key whose routing d binds it: a key of access use or
// read, handed to a teammate or a script, whose owner set where its
// requests may go. The request may narrow the key's hard constraints but
// not widen them: its only, region and data_residency lists are kept to
// what the key's allow (an empty one, which elsewhere lifts a list, keeps
// the key's), its ignore list adds to the key's, and each max_price is the
// lower of the two. A list the key's allows none of is refused
// (EFORBIDDEN), rather than read as no list. Its preferences (sort, order,
// fallbacks, stickiness) are the request's to set, as in WithDefaults.
// Neither p nor d is changed.
func Binding(p, d *idlegrid.Routing) (*idlegrid.Routing, error) {
	out := WithDefaults(p, d)
	if d == nil || d.IsZero() || p == nil || out == nil {
		return out, nil
	}
	for _, f := range []struct {
		name     string
		req, key []string
		to       *[]string
	}{
		{"only", p.Only, d.Only, &out.Only}, {"region", p.Region, d.Region, &out.Region},
		{"data_residency", p.DataResidency, d.DataResidency, &out.DataResidency},
	} {
		if *f.to = narrowed(f.req, f.key); len(f.req) > 0 && len(f.key) > 0 && len(*f.to) == 0 {
			return nil, &idlegrid.Error{Code: idlegrid.EFORBIDDEN, Field: "provider." + f.name,
				Message: fmt.Sprintf("this API key's routing allows %v only, and the request's %v lists none of them; "+
					"leave provider.%s out, or ask the key's owner to change its routing (idlegrid key routing)", f.key, f.req, f.name)}
		}
	}
	out.Ignore = union(d.Ignore, p.Ignore)
	out.MaxPrice = lowerPrices(p.MaxPrice, d.MaxPrice)
	return out, nil
}

// narrowed is the names of req the key's list allows: req within key when
// both are set, whichever is set otherwise.
func narrowed(req, key []string) []string {
	switch {
	case len(key) == 0:
		return req
	case len(req) == 0:
		return key
	}
	var out []string
	for _, n := range req {
		if slices.Contains(key, n) {
			out = append(out, n)
		}
	}
	return out
}

// union is a's names, then those of b that a lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, n := range b {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// lowerPrices is each price's lower cap of a and b; a missing cap is none.
func lowerPrices(a, b *idlegrid.RoutingMaxPrice) *idlegrid.RoutingMaxPrice {
	lower := func(x, y *idlegrid.Micros) *idlegrid.Micros {
		switch {
		case x == nil:
			return y
		case y == nil || *x < *y:
			return x
		}
		return y
	}
	var pa, pc, ka, kc *idlegrid.Micros
	if a != nil {
		pa, pc = a.Prompt, a.Completion
	}
	if b != nil {
		ka, kc = b.Prompt, b.Completion
	}
	out := &idlegrid.RoutingMaxPrice{Prompt: lower(pa, ka), Completion: lower(pc, kc)}
	if out.Prompt == nil && out.Completion == nil {
		return nil
	}
	return out
}
