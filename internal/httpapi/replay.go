package httpapi

import (
	"sync"
	"time"

	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// replays remembers the signatures of the signed agent requests it has
// taken while their signed time is within nodekey.MaxSkew of the clock, so
// that a request captured on the way (from a node on plain HTTP, say) is
// not taken twice: a replayed session upgrade would take the node's
// session, and its renters' inference, from the node. An agent signs each
// request at a time of its own (client.AgentClient), so its requests
// never repeat.
type replays struct {
	mu    sync.Mutex
	seen  map[string]time.Time // signature → its request's signed time
	sweep time.Time            // when to forget the expired next
}

func newReplays() *replays { return &replays{seen: map[string]time.Time{}} }

// first records sig, signed at signed, and reports whether it is the
// first time it was seen.
func (g *replays) first(sig string, signed, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !now.Before(g.sweep) {
		for s, at := range g.seen {
			if now.Sub(at) > nodekey.MaxSkew {
				delete(g.seen, s)
			}
		}
		g.sweep = now.Add(nodekey.MaxSkew / 4)
	}
	if _, ok := g.seen[sig]; ok {
		return false
	}
	g.seen[sig] = signed
	return true
}
