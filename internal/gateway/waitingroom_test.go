package gateway

import "testing"

// A freed slot wakes the model's waiters at once, and only theirs; with
// nobody waiting it wakes nothing and keeps no queue.
func TestWaitingRoom_freed(t *testing.T) {
	var w waitingRoom
	w.freed("m") // nobody waits: nothing to do
	if d := w.depth(); len(d) != 0 {
		t.Fatalf("depth with nobody waiting = %v, want none", d)
	}
	a, ok := w.enter("m", 2)
	if !ok {
		t.Fatal("enter: refused below the limit")
	}
	other, _ := w.enter("other", 2)
	if _, ok := w.enter("m", 1); ok {
		t.Fatal("enter: let in a second waiter over a limit of 1")
	}
	w.freed("m")
	select {
	case <-a:
	default:
		t.Fatal("a slot freed for m did not wake m's waiter")
	}
	select {
	case <-other:
		t.Fatal("a slot freed for m woke the waiter of another model")
	default:
	}
	next := w.next("m")
	select {
	case <-next:
		t.Fatal("the channel a woken waiter waits on next is already closed")
	default:
	}
	w.leave("m")
	w.leave("other")
	if d := w.depth(); len(d) != 0 || w.waiters.Load() != 0 {
		t.Fatalf("after every waiter left: depth %v, %d waiters; want none", d, w.waiters.Load())
	}
}
