package gateway

import (
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// A heartbeat's queue report counts for as long as it is valid, only for
// a model the catalog lists on that node, and a later answer's report
// replaces it.
func TestGateway_NoteQueues(t *testing.T) {
	clock := &stepClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	g := &Gateway{}
	g.health.init(clock, 3, time.Minute)
	g.catalog.keys = map[string]bool{"n1/llama": true}

	g.NoteQueues("n1", []idlegrid.ModelQueue{{Model: "llama", Queued: 5}, {Model: "made-up", Queued: 9}}, 20*time.Second)
	if n, ok := g.health.of("n1/llama").reported(clock.Now()); !ok || n != 5 {
		t.Fatalf("n1/llama reported %d (fresh %v), want 5", n, ok)
	}
	if _, ok := g.health.m.Load("n1/made-up"); ok {
		t.Error("a model the catalog does not list got an entry in the health book")
	}
	clock.advance(15 * time.Second) // past the answers' 10s, within the heartbeat's 20s
	if n, ok := g.health.of("n1/llama").reported(clock.Now()); !ok || n != 5 {
		t.Fatalf("after 15s n1/llama reported %d (fresh %v), want 5 still", n, ok)
	}
	g.health.noteQueue(g.health.of("n1/llama"), "2")
	clock.advance(11 * time.Second)
	if _, ok := g.health.of("n1/llama").reported(clock.Now()); ok {
		t.Error("an answer's report of 2 still counts 11s later; want it stale after 10s")
	}
}
