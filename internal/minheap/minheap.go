// Package minheap is a binary min-heap of values of one type, ordered by
// their Before method. The market engine and the simulator keep their
// pending events in one. It is typed, unlike container/heap, which boxes
// every value pushed and popped in an interface: an allocation each.
package minheap

// Ordered is a type whose values order themselves: Before reports whether
// a comes out of a heap ahead of b.
type Ordered[T any] interface {
	Before(b T) bool
}

// Heap holds values; the zero Heap is empty and ready.
type Heap[T Ordered[T]] []T

// Len is how many values h holds.
func (h Heap[T]) Len() int { return len(h) }

// Min returns the value Pop would take; h must not be empty.
func (h Heap[T]) Min() T { return h[0] }

// Push adds x.
func (h *Heap[T]) Push(x T) {
	*h = append(*h, x)
	q := *h
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q[i].Before(q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

// Pop removes and returns the least value; h must not be empty. The slot
// it leaves is zeroed, so that the heap keeps nothing it no longer holds.
func (h *Heap[T]) Pop() T {
	q := *h
	top, last := q[0], len(q)-1
	q[0] = q[last]
	var zero T
	q[last] = zero
	q = q[:last]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(q) && q[l].Before(q[least]) {
			least = l
		}
		if r < len(q) && q[r].Before(q[least]) {
			least = r
		}
		if least == i {
			break
		}
		q[i], q[least] = q[least], q[i]
		i = least
	}
	*h = q
	return top
}
