package audit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// The verifiers are tested against the published vectors and against the
// reference definitions in tree_test.go, never against the Tree alone.

func TestVerifyInclusion_Vectors(t *testing.T) {
	for _, tt := range rfcInclusion {
		t.Run(fmt.Sprintf("%d/%d", tt.index, tt.size), func(t *testing.T) {
			leaf := HashLeaf(mustBytes(t, rfcLeaves[tt.index]))
			root := mustHex(t, rfcRoots[tt.size-1])
			path := hexes(t, tt.path)
			if err := VerifyInclusion(tt.index, tt.size, leaf, path, root); err != nil {
				t.Fatalf("the published proof does not verify: %v", err)
			}
			for _, p := range corruptInclusion(tt.index, tt.size, leaf, path, root) {
				if err := VerifyInclusion(p.index, p.size, p.leaf, p.path, p.root); err == nil {
					t.Errorf("%s: verified", p.desc)
				} else if !errors.Is(err, ErrVerification) {
					t.Errorf("%s: got %v, want an ErrVerification", p.desc, err)
				}
			}
		})
	}
}

type inclusionProbe struct {
	desc        string
	index, size uint64
	leaf        Hash
	path        []Hash
	root        Hash
}

// corruptInclusion lists ways to get a good proof wrong.
func corruptInclusion(index, size uint64, leaf Hash, path []Hash, root Hash) []inclusionProbe {
	other := HashLeaf([]byte("other"))
	ps := []inclusionProbe{
		{"index-1", index - 1, size, leaf, path, root},
		{"index+1", index + 1, size, leaf, path, root},
		{"index^2", index ^ 2, size, leaf, path, root},
		{"size*2", index, size * 2, leaf, path, root},
		{"size/2", index, size / 2, leaf, path, root},
		{"wrong leaf", index, size, other, path, root},
		{"empty root", index, size, leaf, path, EmptyRoot()},
		{"wrong root", index, size, leaf, path, other},
		{"trailing hash", index, size, leaf, append(slices.Clone(path), Hash{}), root},
		{"trailing root", index, size, leaf, append(slices.Clone(path), root), root},
		{"leading hash", index, size, leaf, append([]Hash{{}}, path...), root},
		{"leading root", index, size, leaf, append([]Hash{root}, path...), root},
	}
	if len(path) > 0 {
		ps = append(ps, inclusionProbe{"last hash dropped", index, size, leaf, path[:len(path)-1], root})
	}
	if len(path) > 1 {
		ps = append(ps, inclusionProbe{"hash inserted", index, size, leaf, slices.Insert(slices.Clone(path), 1, other), root})
		ps = append(ps, inclusionProbe{"hashes swapped", index, size, leaf, swapped(path), root})
	}
	return ps
}

func swapped(path []Hash) []Hash {
	p := slices.Clone(path)
	p[0], p[1] = p[1], p[0]
	return p
}

func TestVerifyConsistency_Vectors(t *testing.T) {
	for _, tt := range rfcConsistency {
		t.Run(fmt.Sprintf("%d-%d", tt.from, tt.to), func(t *testing.T) {
			r1, r2 := mustHex(t, rfcRoots[tt.from-1]), mustHex(t, rfcRoots[tt.to-1])
			path := hexes(t, tt.path)
			if err := VerifyConsistency(tt.from, tt.to, r1, r2, path); err != nil {
				t.Fatalf("the published proof does not verify: %v", err)
			}
			if len(path) == 0 {
				return
			}
			for _, p := range corruptConsistency(tt.from, tt.to, r1, r2, path) {
				if err := VerifyConsistency(p.size1, p.size2, p.root1, p.root2, p.path); err == nil {
					t.Errorf("%s: verified", p.desc)
				}
			}
		})
	}
}

type consistencyProbe struct {
	desc         string
	size1, size2 uint64
	root1, root2 Hash
	path         []Hash
}

func corruptConsistency(size1, size2 uint64, root1, root2 Hash, path []Hash) []consistencyProbe {
	other := HashLeaf([]byte("other"))
	ps := []consistencyProbe{
		{"size1-1", size1 - 1, size2, root1, root2, path},
		{"size1+1", size1 + 1, size2, root1, root2, path},
		{"size1^2", size1 ^ 2, size2, root1, root2, path},
		{"size2*2", size1, size2 * 2, root1, root2, path},
		{"size2/2", size1, size2 / 2, root1, root2, path},
		{"wrong root1", size1, size2, other, root2, path},
		{"wrong root2", size1, size2, root1, other, path},
		{"swapped roots", size1, size2, root2, root1, path},
		{"empty proof", size1, size2, root1, root2, nil},
		{"trailing hash", size1, size2, root1, root2, append(slices.Clone(path), Hash{})},
		{"trailing root1", size1, size2, root1, root2, append(slices.Clone(path), root1)},
		{"trailing root2", size1, size2, root1, root2, append(slices.Clone(path), root2)},
		{"leading hash", size1, size2, root1, root2, append([]Hash{{}}, path...)},
		{"leading root1", size1, size2, root1, root2, append([]Hash{root1}, path...)},
		{"leading root2", size1, size2, root1, root2, append([]Hash{root2}, path...)},
		{"leading path[0]", size1, size2, root1, root2, append([]Hash{path[0]}, path...)},
		{"last hash dropped", size1, size2, root1, root2, path[:len(path)-1]},
	}
	if len(path) > 1 {
		ps = append(ps, consistencyProbe{"hashes swapped", size1, size2, root1, root2, swapped(path)})
	}
	return ps
}

func TestVerifyConsistency_Edges(t *testing.T) {
	a, b := HashLeaf([]byte("a")), HashLeaf([]byte("b"))
	for _, tt := range []struct {
		desc         string
		size1, size2 uint64
		root1, root2 Hash
		path         []Hash
		ok           bool
	}{
		{"empty to empty", 0, 0, EmptyRoot(), EmptyRoot(), nil, true},
		{"empty to any", 0, 5, EmptyRoot(), b, nil, true},
		{"empty with a root", 0, 5, a, b, nil, false},
		{"empty with a proof", 0, 5, EmptyRoot(), b, []Hash{a}, false},
		{"same size same root", 3, 3, a, a, nil, true},
		{"same size other root", 3, 3, a, b, nil, false},
		{"same size with a proof", 3, 3, a, a, []Hash{a}, false},
		{"shrinks", 4, 3, a, b, []Hash{a}, false},
		{"shrinks to empty", 1, 0, a, EmptyRoot(), nil, false},
		{"grows without proof", 1, 2, a, b, nil, false},
		{"huge sizes, garbage proof", 1<<63 + 1, 1<<64 - 1, a, b, []Hash{a, b}, false},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			err := VerifyConsistency(tt.size1, tt.size2, tt.root1, tt.root2, tt.path)
			if got := err == nil; got != tt.ok {
				t.Errorf("verified: got %v, want %v (%v)", got, tt.ok, err)
			}
		})
	}
}

func TestVerifyInclusion_Edges(t *testing.T) {
	a := HashLeaf([]byte("a"))
	for _, tt := range []struct {
		desc        string
		index, size uint64
		leaf, root  Hash
		path        []Hash
		ok          bool
	}{
		{"one leaf", 0, 1, a, a, nil, true},
		{"one leaf, other root", 0, 1, a, EmptyRoot(), nil, false},
		{"one leaf, a proof", 0, 1, a, a, []Hash{a}, false},
		{"empty tree", 0, 0, a, EmptyRoot(), nil, false},
		{"index past size", 2, 1, a, a, nil, false},
		{"huge size, short proof", 5, 1<<64 - 1, a, a, []Hash{a}, false},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			err := VerifyInclusion(tt.index, tt.size, tt.leaf, tt.path, tt.root)
			if got := err == nil; got != tt.ok {
				t.Errorf("verified: got %v, want %v (%v)", got, tt.ok, err)
			}
		})
	}
}

// TestVerifyInclusion_EveryLeaf checks every leaf of random trees of every
// size up to 130, and that changing any byte of any proof, its root or its
// leaf makes it fail, for trees up to 40.
func TestVerifyInclusion_EveryLeaf(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	leaves := randomLeaves(r, 130)
	for n := 1; n <= len(leaves); n++ {
		d := leaves[:n]
		root := refRoot(d)
		for m := range n {
			path := refPath(m, d)
			if err := VerifyInclusion(uint64(m), uint64(n), d[m], path, root); err != nil {
				t.Fatalf("leaf %d of %d: %v", m, n, err)
			}
			if n > 40 {
				continue
			}
			for _, p := range corruptInclusion(uint64(m), uint64(n), d[m], path, root) {
				if VerifyInclusion(p.index, p.size, p.leaf, p.path, p.root) == nil {
					t.Fatalf("leaf %d of %d, %s: verified", m, n, p.desc)
				}
			}
			forEachFlip(path, root, d[m], func(what string, path []Hash, root, leaf Hash) {
				if VerifyInclusion(uint64(m), uint64(n), leaf, path, root) == nil {
					t.Fatalf("leaf %d of %d, %s: verified", m, n, what)
				}
			})
		}
	}
}

// TestVerifyConsistency_EveryPair checks every pair of sizes up to 64, and
// that changing any byte of a proof or of either root makes it fail, up to 24.
func TestVerifyConsistency_EveryPair(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	leaves := randomLeaves(r, 64)
	for n := 1; n <= len(leaves); n++ {
		root2 := refRoot(leaves[:n])
		for m := 1; m <= n; m++ {
			root1 := refRoot(leaves[:m])
			path := refSubproof(m, leaves[:n], true)
			if err := VerifyConsistency(uint64(m), uint64(n), root1, root2, path); err != nil {
				t.Fatalf("%d-%d: %v", m, n, err)
			}
			if n > 24 || m == n {
				continue
			}
			for _, p := range corruptConsistency(uint64(m), uint64(n), root1, root2, path) {
				if VerifyConsistency(p.size1, p.size2, p.root1, p.root2, p.path) == nil {
					t.Fatalf("%d-%d, %s: verified", m, n, p.desc)
				}
			}
			forEachFlip(path, root1, root2, func(what string, path []Hash, root1, root2 Hash) {
				if VerifyConsistency(uint64(m), uint64(n), root1, root2, path) == nil {
					t.Fatalf("%d-%d, %s: verified", m, n, what)
				}
			})
		}
	}
}

// forEachFlip calls f once for every byte of path, a and b, with that byte
// changed.
func forEachFlip(path []Hash, a, b Hash, f func(what string, path []Hash, a, b Hash)) {
	for i := range path {
		for j := range HashSize {
			p := slices.Clone(path)
			p[i][j] ^= 0x40
			f(fmt.Sprintf("proof[%d] byte %d", i, j), p, a, b)
		}
	}
	for j := range HashSize {
		x, y := a, b
		x[j] ^= 1
		y[j] ^= 1
		f(fmt.Sprintf("first hash byte %d", j), path, x, b)
		f(fmt.Sprintf("second hash byte %d", j), path, a, y)
	}
}
