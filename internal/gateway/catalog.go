package gateway

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
)

// provider is one model on one node: what routing chooses among.
type provider struct {
	key         string // nodeID "/" model: the breaker's and the statistics' key
	NodeID      string
	NodeName    string // the owner's name for the node
	ProviderID  string // the provider's account
	Region      string
	Residency   string
	Reliability float64 // the node's record, in (0,1]
	Model       idlegrid.ModelOffer
}

// catalog is the models of the nodes the market offers (online, neither
// quarantined nor draining: idlegrid.NodeFilter.Offered), read from the
// store at most every ttl. A refresh happens in the request that finds the catalog stale; the
// others keep using the old one meanwhile.
type catalog struct {
	store idlegrid.Store
	clock idlegrid.Clock
	ttl   time.Duration

	mu         sync.Mutex
	byModel    map[string][]*provider
	keys       map[string]bool      // every provider's key
	served     map[string]time.Time // when each model was last listed, for recentlyServed
	since      map[string]time.Time // when each of those began to be listed, without a gap of recentlyServed: its created
	fetched    time.Time            // zero: never
	refreshing bool
}

// recentlyServed is how long after the catalog last listed a model a
// request for it, with no provider left, is told to retry (503 with
// Retry-After, which OpenAI's SDKs honour) rather than that nobody serves
// it (404): its only node's agent handing over to the next, a node
// declared lost while its agent reconnects, a window closing for the
// night. It outlasts a hand-over's drain (the agent's HandOverWait,
// 3 minutes) and the next agent's start.
const recentlyServed = 15 * time.Minute

// betweenProvidersRetry is the Retry-After of a request for a model
// served within recentlyServed but by no provider now: a guess, as
// nothing says when one comes back, long enough that an SDK's retries
// (two, by default) span a quick restart.
const betweenProvidersRetry = 5 * time.Second

func (c *catalog) init(s idlegrid.Store, clock idlegrid.Clock, ttl time.Duration) {
	c.store, c.clock, c.ttl = s, clock, ttl
}

// providers returns the providers of model, refreshing the catalog when it
// is stale.
func (c *catalog) providers(ctx context.Context, model string) ([]*provider, error) {
	if err := c.fresh(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byModel[model], nil
}

// models returns every model's providers.
func (c *catalog) models(ctx context.Context) (map[string][]*provider, error) {
	if err := c.fresh(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byModel, nil
}

func (c *catalog) fresh(ctx context.Context) error {
	now := c.clock.Now()
	c.mu.Lock()
	have := !c.fetched.IsZero()
	if have && (now.Sub(c.fetched) < c.ttl || c.refreshing) {
		c.mu.Unlock()
		return nil
	}
	c.refreshing = true
	c.mu.Unlock()
	byModel, err := c.load(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshing = false
	if err != nil {
		if !have {
			return err
		}
		return nil // keep the last catalog; a later request tries again
	}
	c.byModel, c.fetched = byModel, now
	c.keys = make(map[string]bool, len(c.keys))
	for _, ps := range byModel {
		for _, p := range ps {
			c.keys[p.key] = true
		}
	}
	c.noteServed(now)
	return nil
}

// noteServed records that the catalog's models are served as of now,
// and forgets those not served for longer than recentlyServed.
func (c *catalog) noteServed(now time.Time) {
	if c.served == nil {
		c.served, c.since = map[string]time.Time{}, map[string]time.Time{}
	}
	for m := range c.byModel {
		if _, ok := c.served[m]; !ok {
			c.since[m] = now
		}
		c.served[m] = now
	}
	for m, at := range c.served {
		if now.Sub(at) > recentlyServed {
			delete(c.served, m)
			delete(c.since, m)
		}
	}
}

// listedSince is when the catalog began to list model, as GET /v1/models
// gives it (created): the zero time when it does not.
func (c *catalog) listedSince(model string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.since[model]
}

// lastServed reports how long ago the catalog last listed model, and
// whether that was within recentlyServed.
func (c *catalog) lastServed(model string) (time.Duration, bool) {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.served[model]
	ago := now.Sub(at)
	return ago, ok && ago <= recentlyServed
}

// providerKey is the key of the provider of model on node nodeID.
func providerKey(nodeID, model string) string { return nodeID + "/" + model }

// lists reports whether the catalog as last read lists the provider key,
// without reading it again.
func (c *catalog) lists(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keys[key]
}

// load reads the offered nodes that serve models, and lists their models'
// providers by model.
func (c *catalog) load(ctx context.Context) (map[string][]*provider, error) {
	nodes, err := c.store.ListNodes(ctx, idlegrid.NodeFilter{Offered: true, ServesModels: true})
	if err != nil {
		return nil, err
	}
	out := map[string][]*provider{}
	for _, n := range nodes {
		for _, m := range n.Models {
			out[m.Name] = append(out[m.Name], &provider{
				key: providerKey(n.ID, m.Name), NodeID: n.ID, NodeName: n.Name, ProviderID: n.ProviderID,
				Region: n.Region, Residency: n.Residency, Reliability: n.Reliability, Model: m,
			})
		}
	}
	for _, ps := range out {
		sort.Slice(ps, func(i, j int) bool { return ps[i].key < ps[j].key })
	}
	return out, nil
}

// invalidate makes the next request read the catalog again.
func (c *catalog) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fetched.IsZero() {
		c.fetched = time.Unix(1, 0) // stale, but not "never fetched"
	}
}
