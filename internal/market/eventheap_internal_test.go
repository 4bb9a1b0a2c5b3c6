package market

import (
	"math/rand/v2"
	"testing"
)

// TestEventHeap checks that events come out soonest first, and in the
// order they were pushed among those due at once, however pushes and pops
// interleave.
func TestEventHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h eventHeap
	seq := uint64(0)
	var last event
	popped := 0
	for step := range 20_000 {
		if len(h) == 0 || r.IntN(3) > 0 {
			seq++
			h.push(event{at: last.at + int64(r.IntN(50)), seq: seq})
			continue
		}
		ev := h.pop()
		if popped > 0 && (ev.at < last.at || (ev.at == last.at && ev.seq < last.seq)) {
			t.Fatalf("step %d: popped (%d, %d) after (%d, %d)", step, ev.at, ev.seq, last.at, last.seq)
		}
		for _, x := range h {
			if x.at < ev.at || (x.at == ev.at && x.seq < ev.seq) {
				t.Fatalf("step %d: popped (%d, %d) while (%d, %d) waited", step, ev.at, ev.seq, x.at, x.seq)
			}
		}
		last, popped = ev, popped+1
	}
	if popped < 5000 {
		t.Fatalf("only %d pops", popped)
	}
}
