package minheap

import (
	"math/rand/v2"
	"testing"
)

// due is a value due at a time, pushed seq-th.
type due struct{ at, seq int64 }

func (a due) Before(b due) bool { return a.at < b.at || (a.at == b.at && a.seq < b.seq) }

// TestHeap checks that values come out least first, and in the order they
// were pushed among equals, however pushes and pops interleave.
func TestHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Heap[due]
	var seq int64
	var last due
	popped := 0
	for step := range 20_000 {
		if h.Len() == 0 || r.IntN(3) > 0 {
			seq++
			h.Push(due{at: last.at + int64(r.IntN(50)), seq: seq})
			continue
		}
		least := h.Min()
		x := h.Pop()
		if x != least {
			t.Fatalf("step %d: Min said %v, Pop took %v", step, least, x)
		}
		if popped > 0 && x.Before(last) {
			t.Fatalf("step %d: popped %v after %v", step, x, last)
		}
		for _, y := range h {
			if y.Before(x) {
				t.Fatalf("step %d: popped %v while %v waited", step, x, y)
			}
		}
		last, popped = x, popped+1
	}
	if popped < 5000 {
		t.Fatalf("only %d pops", popped)
	}
}

// TestHeap_PopZeroes checks that a popped value's slot no longer holds it,
// so that a heap of pointers lets go of what it gave out.
func TestHeap_PopZeroes(t *testing.T) {
	var h Heap[due]
	h.Push(due{at: 2, seq: 1})
	h.Push(due{at: 1, seq: 2})
	h.Pop()
	if full := h[:cap(h)]; full[1] != (due{}) {
		t.Errorf("the vacated slot still holds %v", full[1])
	}
}
