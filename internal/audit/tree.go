package audit

import (
	"context"
	"fmt"
	"math/bits"
	"sync"

	"github.com/idlegrid/idlegrid"
)

// LeafStore keeps the leaf hashes of a log in the order they were appended.
// It never changes or removes a leaf. The coordinator's store appends whole
// entries in the same transaction as the posting or transition each records,
// and StoreLeaves reads their leaf hashes (store.go); MemoryStore is for
// tests and development.
type LeafStore interface {
	// AppendLeaves adds hashes at the end of the log, in order, and returns
	// the index of the first.
	AppendLeaves(ctx context.Context, hashes []Hash) (first uint64, err error)
	// LeafHashes returns the leaf hashes at indices [start, end).
	LeafHashes(ctx context.Context, start, end uint64) ([]Hash, error)
	// Size returns the number of leaves.
	Size(ctx context.Context) (uint64, error)
}

// cacheLevel is the height of the smallest subtree whose root a Tree keeps:
// perfect subtrees of 16 leaves and up. Smaller ones are hashed from their
// leaves, at most 16 of them, when needed.
const cacheLevel = 4

// catchUpLeaves is how many leaf hashes a Tree reads from its store at once
// while it catches up; a multiple of 1<<cacheLevel.
const catchUpLeaves = 4096

// Tree computes tree heads and proofs over the leaves of a LeafStore.
//
// It keeps in memory the root of every perfect, aligned subtree of at least
// 16 leaves (2·n/16 hashes, about 4 bytes per leaf), built as leaves arrive.
// With them a root, an inclusion proof or a consistency proof costs
// O(log n) hashes and at most a few reads of 16 leaves or fewer, whatever
// the tree size n. The first call after the store has grown (by this Tree or
// by another process appending to the same store) first folds the new leaves
// in, reading them in batches: O(new leaves), and O(n) once after opening
// a store that already holds n leaves.
//
// A Tree is safe for concurrent use.
type Tree struct {
	store LeafStore

	mu sync.Mutex
	// levels[j][i] is the root of the perfect subtree of 2^(cacheLevel+j)
	// leaves that starts at leaf i·2^(cacheLevel+j).
	levels [][]Hash
	size   uint64 // the store's size when last seen
}

// NewTree returns a Tree over store.
func NewTree(store LeafStore) *Tree { return &Tree{store: store} }

// Append adds leaf hashes to the store and returns the index of the first.
func (t *Tree) Append(ctx context.Context, hashes ...Hash) (uint64, error) {
	return t.store.AppendLeaves(ctx, hashes)
}

// Size returns the number of leaves in the log.
func (t *Tree) Size(ctx context.Context) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.catchUp(ctx)
}

// Head returns the current size of the log and its root hash, from one
// consistent view of the store.
func (t *Tree) Head(ctx context.Context) (size uint64, root Hash, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if size, err = t.catchUp(ctx); err != nil {
		return 0, Hash{}, err
	}
	root, err = t.hashRange(ctx, 0, size)
	return size, root, err
}

// Root returns the root hash of the tree of the first size leaves: the
// root the log had when it had size entries.
func (t *Tree) Root(ctx context.Context, size uint64) (Hash, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.haveSize(ctx, "size", size); err != nil {
		return Hash{}, err
	}
	return t.hashRange(ctx, 0, size)
}

// InclusionProof returns the audit path of RFC 9162 §2.1.3.1 for the leaf at
// index in the tree of the first size leaves.
func (t *Tree) InclusionProof(ctx context.Context, index, size uint64) ([]Hash, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.haveSize(ctx, "tree_size", size); err != nil {
		return nil, err
	} else if index >= size {
		return nil, idlegrid.Invalid("index", "leaf %d is not in a tree of %d leaves", index, size)
	}
	return inclusionPath(t.rangeHasher(ctx), index, 0, size)
}

// ConsistencyProof returns the consistency proof of RFC 9162 §2.1.4.1
// between the tree of the first from leaves and the tree of the first to
// leaves. It is empty when from is 0 or from equals to.
func (t *Tree) ConsistencyProof(ctx context.Context, from, to uint64) ([]Hash, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.haveSize(ctx, "to", to); err != nil {
		return nil, err
	} else if from > to {
		return nil, idlegrid.Invalid("from", "%d is larger than to (%d): a log only grows", from, to)
	} else if from == 0 || from == to {
		return []Hash{}, nil
	}
	return subproof(t.rangeHasher(ctx), from, 0, to, true)
}

// haveSize checks that the log has at least size leaves. t.mu is held.
func (t *Tree) haveSize(ctx context.Context, field string, size uint64) error {
	n, err := t.catchUp(ctx)
	if err != nil {
		return err
	} else if size > n {
		return idlegrid.Invalid(field, "the log has %d entries, not %d", n, size)
	}
	return nil
}

// catchUp folds the leaves the store gained since it was last seen into
// t.levels and returns the store's size. t.mu is held.
func (t *Tree) catchUp(ctx context.Context) (uint64, error) {
	n, err := t.store.Size(ctx)
	if err != nil {
		return 0, err
	} else if n < t.size {
		return 0, fmt.Errorf("audit: the leaf store shrank from %d to %d leaves; an append-only log never does", t.size, n)
	}
	const group = 1 << cacheLevel
	done := uint64(0)
	if len(t.levels) > 0 {
		done = uint64(len(t.levels[0])) * group
	}
	whole := n - n%group // leaves in complete groups
	for done < whole {
		end := min(done+catchUpLeaves, whole)
		leaves, err := t.leaves(ctx, done, end)
		if err != nil {
			return 0, err
		}
		for off := 0; off < len(leaves); off += group {
			t.push(0, rootOf(leaves[off:off+group]))
		}
		done = end
	}
	t.size = n
	return n, nil
}

// push appends a subtree root at level j of t.levels and the root of every
// subtree above it that it completes.
func (t *Tree) push(j int, h Hash) {
	if j == len(t.levels) {
		t.levels = append(t.levels, nil)
	}
	t.levels[j] = append(t.levels[j], h)
	if k := len(t.levels[j]); k%2 == 0 {
		t.push(j+1, HashChildren(t.levels[j][k-2], t.levels[j][k-1]))
	}
}

func (t *Tree) rangeHasher(ctx context.Context) rangeHash {
	return func(lo, hi uint64) (Hash, error) { return t.hashRange(ctx, lo, hi) }
}

// hashRange returns MTH(D[lo:hi]), for hi no more than the size t has
// caught up to. Ranges that RFC 9162's recursion visits cost O(log n); any
// other range is still hashed correctly, only more slowly. t.mu is held.
func (t *Tree) hashRange(ctx context.Context, lo, hi uint64) (Hash, error) {
	n := hi - lo
	switch {
	case n == 0:
		return EmptyRoot(), nil
	case n <= 1<<cacheLevel:
		leaves, err := t.leaves(ctx, lo, hi)
		if err != nil {
			return Hash{}, err
		}
		return rootOf(leaves), nil
	case n&(n-1) == 0 && lo%n == 0: // perfect and aligned: kept
		level := bits.TrailingZeros64(n)
		return t.levels[level-cacheLevel][lo>>level], nil
	}
	k := split(n)
	left, err := t.hashRange(ctx, lo, lo+k)
	if err != nil {
		return Hash{}, err
	}
	right, err := t.hashRange(ctx, lo+k, hi)
	if err != nil {
		return Hash{}, err
	}
	return HashChildren(left, right), nil
}

func (t *Tree) leaves(ctx context.Context, lo, hi uint64) ([]Hash, error) {
	leaves, err := t.store.LeafHashes(ctx, lo, hi)
	if err != nil {
		return nil, err
	} else if uint64(len(leaves)) != hi-lo {
		return nil, fmt.Errorf("audit: the leaf store returned %d leaf hashes for [%d, %d)", len(leaves), lo, hi)
	}
	return leaves, nil
}

// rootOf is MTH over leaf hashes held in memory (RFC 9162 §2.1.1).
func rootOf(leaves []Hash) Hash {
	switch len(leaves) {
	case 0:
		return EmptyRoot()
	case 1:
		return leaves[0]
	}
	k := split(uint64(len(leaves)))
	return HashChildren(rootOf(leaves[:k]), rootOf(leaves[k:]))
}

// split is the largest power of two smaller than n, for n of 2 or more: where
// RFC 9162 splits a list of n leaves.
func split(n uint64) uint64 { return 1 << (bits.Len64(n-1) - 1) }

// MemoryStore is a LeafStore in memory, for tests and development. Its zero
// value is an empty log.
type MemoryStore struct {
	mu     sync.Mutex
	leaves []Hash
}

var _ LeafStore = (*MemoryStore)(nil)

// AppendLeaves adds hashes at the end of the log.
func (m *MemoryStore) AppendLeaves(_ context.Context, hashes []Hash) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	first := uint64(len(m.leaves))
	m.leaves = append(m.leaves, hashes...)
	return first, nil
}

// LeafHashes returns a copy of the leaf hashes at [start, end).
func (m *MemoryStore) LeafHashes(_ context.Context, start, end uint64) ([]Hash, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if start > end || end > uint64(len(m.leaves)) {
		return nil, fmt.Errorf("audit: leaves [%d, %d) are not in a log of %d", start, end, len(m.leaves))
	}
	return append([]Hash(nil), m.leaves[start:end]...), nil
}

// Size returns the number of leaves.
func (m *MemoryStore) Size(context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return uint64(len(m.leaves)), nil
}
