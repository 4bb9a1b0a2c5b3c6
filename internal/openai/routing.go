package openai

import "github.com/idlegrid/idlegrid"

// WithDefaults returns the routing of a request whose own "provider"
// object is p (nil when it sent none), sent with an API key whose default
// routing is d (nil when it has none): field by field, what the request
// sets wins, and the key's default fills the rest. A list the request
// sends replaces the key's whole, even an empty one, so that a request can
// lift a key's "only"; each of max_price's two prices is a field of its
// own. Neither p nor d is changed.
func WithDefaults(p *ProviderPrefs, d *idlegrid.Routing) *ProviderPrefs {
	if d == nil || d.IsZero() {
		return p
	}
	out := prefsOf(d)
	if p == nil {
		return out
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
			if mp.PromptMicros < 0 {
				mp.Prompt, mp.PromptMicros = out.MaxPrice.Prompt, out.MaxPrice.PromptMicros
			}
			if mp.CompletionMicros < 0 {
				mp.Completion, mp.CompletionMicros = out.MaxPrice.Completion, out.MaxPrice.CompletionMicros
			}
		}
		out.MaxPrice = &mp
	}
	return out
}

// prefsOf is a key's default routing as a request's preferences.
func prefsOf(d *idlegrid.Routing) *ProviderPrefs {
	p := &ProviderPrefs{
		Sort: d.Sort, Order: d.Order, Only: d.Only, Ignore: d.Ignore, AllowFallbacks: d.AllowFallbacks,
		Region: d.Region, DataResidency: d.DataResidency, Sticky: d.Sticky,
	}
	if m := d.MaxPrice; m != nil && (m.Prompt != nil || m.Completion != nil) {
		p.MaxPrice = &MaxPrice{PromptMicros: -1, CompletionMicros: -1}
		if m.Prompt != nil {
			p.MaxPrice.PromptMicros = *m.Prompt
		}
		if m.Completion != nil {
			p.MaxPrice.CompletionMicros = *m.Completion
		}
	}
	return p
}
