package openai

import "github.com/idlegrid/idlegrid"

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
