package idlegrid

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Routing is how the inference gateway chooses among the providers of a
// model: the renter's "provider" object, in the style of OpenRouter
// (docs/gateway.md). A request may carry its own (ParseRouting reads it);
// an API key may carry defaults (KeyRouting), which apply to every request
// the key sends, each field giving way to the same field of the request's
// own object (openai.WithDefaults). Provider names are node IDs or
// provider account IDs.
type Routing struct {
	// Sort orders the providers: price, latency or throughput. Empty: the
	// gateway's default, price weighted by load and reliability.
	Sort string `json:"sort,omitempty"`
	// Order are tried first, in this order.
	Order []string `json:"order,omitempty"`
	// Only, when set, are the only providers used; Ignore are never used.
	Only   []string `json:"only,omitempty"`
	Ignore []string `json:"ignore,omitempty"`
	// AllowFallbacks false allows one provider only: no failover.
	AllowFallbacks *bool `json:"allow_fallbacks,omitempty"`
	// Region and DataResidency are hard constraints.
	Region        []string `json:"region,omitempty"`
	DataResidency []string `json:"data_residency,omitempty"`
	// MaxPrice caps a provider's prices per million tokens.
	MaxPrice *RoutingMaxPrice `json:"max_price,omitempty"`
	// Sticky false turns off routing by prompt prefix; default on.
	Sticky *bool `json:"sticky,omitempty"`
}

// RoutingMaxPrice caps the prices per million tokens; nil: no cap. In JSON
// each is a decimal amount, "1.50" or 1.5, read as text, never a float.
type RoutingMaxPrice struct {
	Prompt     *Micros
	Completion *Micros
}

// The routing sorts.
const (
	RoutingSortPrice      = "price"
	RoutingSortLatency    = "latency"
	RoutingSortThroughput = "throughput"
)

// RoutingSorts are the routing sorts a key may name.
var RoutingSorts = []string{RoutingSortPrice, RoutingSortLatency, RoutingSortThroughput}

// Bounds on a Routing's lists.
const (
	MaxRoutingNames   = 64
	MaxRoutingNameLen = 256
)

// Validate checks r; field prefixes the names of the fields in its errors,
// e.g. "routing".
func (r *Routing) Validate(field string) error {
	if r.Sort != "" && !slices.Contains(RoutingSorts, r.Sort) {
		return Invalid(field+".sort", "must be price, latency or throughput, got %q", r.Sort)
	}
	for _, l := range []struct {
		name  string
		names []string
	}{{"order", r.Order}, {"only", r.Only}, {"ignore", r.Ignore}, {"region", r.Region}, {"data_residency", r.DataResidency}} {
		if err := validateNames(field+"."+l.name, l.names); err != nil {
			return err
		}
	}
	if err := validateRegions(field+".region", r.Region); err != nil {
		return err
	}
	if p := r.MaxPrice; p != nil {
		if p.Prompt != nil && *p.Prompt < 0 {
			return Invalid(field+".max_price.prompt", "must not be negative")
		}
		if p.Completion != nil && *p.Completion < 0 {
			return Invalid(field+".max_price.completion", "must not be negative")
		}
	}
	return nil
}

// validateNames checks a list of names at field: not too many, none
// empty or too long, none twice.
func validateNames(field string, names []string) error {
	if len(names) > MaxRoutingNames {
		return Invalid(field, "at most %d entries", MaxRoutingNames)
	}
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		switch {
		case strings.TrimSpace(n) == "":
			return Invalid(fmt.Sprintf("%s[%d]", field, i), "must not be empty")
		case len(n) > MaxRoutingNameLen:
			return Invalid(fmt.Sprintf("%s[%d]", field, i), "at most %d characters", MaxRoutingNameLen)
		case seen[n]:
			return Invalid(fmt.Sprintf("%s[%d]", field, i), "%q is listed twice", n)
		}
		seen[n] = true
	}
	return nil
}

// validateRegions checks that each of regions is written as a node's
// region is (ValidRegion): one that is not, "EU-West" say, no node can
// have, and would match none.
func validateRegions(field string, regions []string) error {
	for i, r := range regions {
		if !ValidRegion(r) {
			return Invalid(fmt.Sprintf("%s[%d]", field, i),
				"%q is not a region: regions are lower-case letters, digits and '-', at most 40, e.g. \"eu-west\"", r)
		}
	}
	return nil
}

// IsZero reports whether r sets nothing.
func (r *Routing) IsZero() bool {
	return r.Sort == "" && len(r.Order) == 0 && len(r.Only) == 0 && len(r.Ignore) == 0 &&
		r.AllowFallbacks == nil && len(r.Region) == 0 && len(r.DataResidency) == 0 &&
		(r.MaxPrice == nil || (r.MaxPrice.Prompt == nil && r.MaxPrice.Completion == nil)) && r.Sticky == nil
}

type routingMaxPriceJSON struct {
	Prompt     json.RawMessage `json:"prompt,omitempty"`
	Completion json.RawMessage `json:"completion,omitempty"`
}

// MarshalJSON writes the prices as decimal strings, e.g. "1.500000", so
// that no reader takes them for floats.
func (p RoutingMaxPrice) MarshalJSON() ([]byte, error) {
	var j struct {
		Prompt     string `json:"prompt,omitempty"`
		Completion string `json:"completion,omitempty"`
	}
	if p.Prompt != nil {
		j.Prompt = strings.TrimPrefix(p.Prompt.String(), "$")
	}
	if p.Completion != nil {
		j.Completion = strings.TrimPrefix(p.Completion.String(), "$")
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads decimal amounts, as strings or numbers, never
// through a float. Its errors name fields within the routing object,
// max_price.prompt; whoever reads the object puts its own name in front
// (ParseRouting).
func (p *RoutingMaxPrice) UnmarshalJSON(b []byte) error {
	var j routingMaxPriceJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return maxPriceJSONError(err)
	}
	var err error
	if p.Prompt, err = priceField("max_price.prompt", j.Prompt); err != nil {
		return err
	}
	p.Completion, err = priceField("max_price.completion", j.Completion)
	return err
}

// maxPriceJSONError says what is wrong with a max_price that is not an
// object of prices, in a JSON author's words rather than Go's.
func maxPriceJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return Invalid("max_price", "must be an object such as {\"prompt\": \"1.50\", \"completion\": \"2.00\"}, got a JSON %s", te.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if n, uerr := strconv.Unquote(name); uerr == nil {
			return Invalid("max_price."+n, "unknown field; use prompt or completion")
		}
	}
	return Invalid("max_price", "must be an object such as {\"prompt\": \"1.50\", \"completion\": \"2.00\"}")
}

// priceField reads a price from its JSON, a number or a string holding
// one (as json.Number takes them), whose text it parses; null or absent:
// nil.
func priceField(field string, raw json.RawMessage) (*Micros, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	text := string(raw)
	if raw[0] == '"' && json.Unmarshal(raw, &text) != nil {
		text = ""
	}
	m, err := ParseMicros(text)
	if err != nil || !isJSONNumber(text) {
		return nil, Invalid(field, "want a price per million tokens such as 1.50, with at most 6 decimals")
	}
	return &m, nil
}

func isJSONNumber(s string) bool {
	return s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9') && strings.TrimSpace(s) == s && json.Valid([]byte(s))
}

// ParseRouting reads and checks a routing object, b, found at field: a
// request's "provider", or "routing" for a key's default. Its errors name
// the field within, e.g. provider.max_price.prompt or provider.only[2].
func ParseRouting(field string, b []byte) (*Routing, error) {
	var r Routing
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, routingJSONError(field, err)
	}
	if dec.More() {
		return nil, Invalid(field, "has data after the object")
	}
	if err := r.Validate(field); err != nil {
		return nil, err
	}
	return &r, nil
}

// routingJSONError names the field of a routing object that err, from
// decoding it, is about.
func routingJSONError(field string, err error) error {
	var e *Error
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &e) && e.Field != "":
		named := *e
		named.Field = field + "." + e.Field
		return &named
	case errors.As(err, &te) && te.Field != "":
		return Invalid(field+"."+te.Field, "has the wrong type: got a JSON %s", te.Value)
	case errors.As(err, &te):
		return Invalid(field, "must be a routing object, got a JSON %s", te.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if n, uerr := strconv.Unquote(name); uerr == nil {
			return Invalid(field+"."+n, "unknown field; see docs/gateway.md for the routing fields")
		}
	}
	return Invalid(field, "want a routing object: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// KeyRouting is an API key's default routing for the inference requests it
// sends. Only the key's own account may set or read it.
type KeyRouting struct {
	KeyID     string    `json:"key_id"`
	AccountID string    `json:"account_id"`
	Routing   Routing   `json:"routing"`
	UpdatedAt time.Time `json:"updated_at,omitzero"` // none while the key has no routing (never set, or removed)
}

// KeyRoutingStore keeps the API keys' default routing.
type KeyRoutingStore interface {
	// SetKeyRouting stores kr, replacing what the key had. ENOTFOUND when
	// kr.AccountID has no unrevoked key kr.KeyID.
	SetKeyRouting(ctx context.Context, kr *KeyRouting) error
	// FindKeyRouting returns a key's default routing; ENOTFOUND when it
	// has none.
	FindKeyRouting(ctx context.Context, keyID string) (*KeyRouting, error)
	// RemoveKeyRouting removes an account's key's default routing;
	// ENOTFOUND when it has none.
	RemoveKeyRouting(ctx context.Context, accountID, keyID string) error
}
