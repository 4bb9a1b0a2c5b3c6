package audit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// rfcLeaves are the leaf inputs of the RFC 6962 test vectors.
var rfcLeaves = []string{
	"", "00", "10", "2021", "3031", "40414243",
	"5051525354555657", "606162636465666768696a6b6c6d6e6f",
}

// rfcRoots[i] is the published root of the tree of the first i+1 rfcLeaves.
var rfcRoots = []string{
	"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
	"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
	"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
	"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
	"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
	"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
	"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
	"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}

// rfcInclusion are the published audit paths (leaf indices from 0).
var rfcInclusion = []struct {
	index, size uint64
	path        []string
}{
	{0, 1, nil},
	{0, 8, []string{
		"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
		"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
		"6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
	}},
	{5, 8, []string{
		"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
		"ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
	}},
	{2, 3, []string{
		"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
	}},
	{1, 5, []string{
		"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
		"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
		"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
	}},
}

// rfcConsistency are the published consistency proofs.
var rfcConsistency = []struct {
	from, to uint64
	path     []string
}{
	{1, 1, nil},
	{1, 8, []string{
		"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
		"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
		"6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
	}},
	{6, 8, []string{
		"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
		"ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
	}},
	{2, 5, []string{
		"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
		"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
	}},
	{6, 7, []string{
		"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
		"b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
		"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
	}},
}

// mustRFCTree is a Tree over the RFC 6962 test leaves.
func mustRFCTree(tb testing.TB) *Tree {
	tb.Helper()
	hashes := make([]Hash, len(rfcLeaves))
	for i, s := range rfcLeaves {
		hashes[i] = HashLeaf(mustBytes(tb, s))
	}
	return mustTree(tb, hashes)
}

func mustTree(tb testing.TB, hashes []Hash) *Tree {
	tb.Helper()
	tree := NewTree(&MemoryStore{})
	if len(hashes) == 0 {
		return tree
	}
	if first, err := tree.Append(context.Background(), hashes...); err != nil || first != 0 {
		tb.Fatalf("Append: %d, %v", first, err)
	}
	return tree
}

func mustBytes(tb testing.TB, s string) []byte {
	tb.Helper()
	b := make([]byte, len(s)/2)
	for i := range b {
		if _, err := fmt.Sscanf(s[2*i:2*i+2], "%02x", &b[i]); err != nil {
			tb.Fatal(err)
		}
	}
	return b
}

func hexes(tb testing.TB, ss []string) []Hash {
	tb.Helper()
	out := []Hash{}
	for _, s := range ss {
		out = append(out, mustHex(tb, s))
	}
	return out
}

func TestTree_Root(t *testing.T) {
	ctx := context.Background()
	tree := mustRFCTree(t)
	for i, want := range rfcRoots {
		got, err := tree.Root(ctx, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want {
			t.Errorf("size %d: got %s, want %s", i+1, got, want)
		}
	}
	if got, _ := tree.Root(ctx, 0); got != EmptyRoot() {
		t.Errorf("size 0: got %s, want the empty root", got)
	}
	if _, err := tree.Root(ctx, 9); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("size 9 of 8: got %v, want EINVALID", err)
	}
}

func TestTree_InclusionProof(t *testing.T) {
	ctx := context.Background()
	tree := mustRFCTree(t)
	for _, tt := range rfcInclusion {
		t.Run(fmt.Sprintf("%d/%d", tt.index, tt.size), func(t *testing.T) {
			got, err := tree.InclusionProof(ctx, tt.index, tt.size)
			if err != nil {
				t.Fatal(err)
			}
			if want := hexes(t, tt.path); !slices.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
	t.Run("index past size", func(t *testing.T) {
		if _, err := tree.InclusionProof(ctx, 4, 4); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Errorf("got %v, want EINVALID", err)
		}
	})
	t.Run("size past log", func(t *testing.T) {
		if _, err := tree.InclusionProof(ctx, 0, 9); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Errorf("got %v, want EINVALID", err)
		}
	})
}

func TestTree_ConsistencyProof(t *testing.T) {
	ctx := context.Background()
	tree := mustRFCTree(t)
	for _, tt := range rfcConsistency {
		t.Run(fmt.Sprintf("%d-%d", tt.from, tt.to), func(t *testing.T) {
			got, err := tree.ConsistencyProof(ctx, tt.from, tt.to)
			if err != nil {
				t.Fatal(err)
			}
			if want := hexes(t, tt.path); !slices.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
	t.Run("shrinking", func(t *testing.T) {
		if _, err := tree.ConsistencyProof(ctx, 5, 4); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Errorf("got %v, want EINVALID", err)
		}
	})
}

// The reference below follows RFC 9162 §2.1 literally, over leaves in
// memory, with no cache: the Tree must agree with it everywhere.

func refRoot(d []Hash) Hash {
	if len(d) == 0 {
		return EmptyRoot()
	} else if len(d) == 1 {
		return d[0]
	}
	k := refSplit(len(d))
	return HashChildren(refRoot(d[:k]), refRoot(d[k:]))
}

func refSplit(n int) int {
	k := 1
	for k*2 < n {
		k *= 2
	}
	return k
}

func refPath(m int, d []Hash) []Hash {
	if len(d) <= 1 {
		return []Hash{}
	}
	k := refSplit(len(d))
	if m < k {
		return append(refPath(m, d[:k]), refRoot(d[k:]))
	}
	return append(refPath(m-k, d[k:]), refRoot(d[:k]))
}

func refSubproof(m int, d []Hash, b bool) []Hash {
	if m == len(d) {
		if b {
			return []Hash{}
		}
		return []Hash{refRoot(d)}
	}
	k := refSplit(len(d))
	if m <= k {
		return append(refSubproof(m, d[:k], b), refRoot(d[k:]))
	}
	return append(refSubproof(m-k, d[k:], false), refRoot(d[:k]))
}

func randomLeaves(r *rand.Rand, n int) []Hash {
	out := make([]Hash, n)
	for i := range out {
		var b [8]byte
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		out[i] = HashLeaf(b[:])
	}
	return out
}

func TestTree_MatchesDefinition(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	leaves := randomLeaves(r, 70) // crosses the cached levels of 16, 32 and 64
	tree := NewTree(&MemoryStore{})
	for n := 1; n <= len(leaves); n++ {
		// Append one at a time, so the tree catches up after each.
		if _, err := tree.Append(ctx, leaves[n-1]); err != nil {
			t.Fatal(err)
		}
		d := leaves[:n]
		root, err := tree.Root(ctx, uint64(n))
		if err != nil {
			t.Fatal(err)
		} else if want := refRoot(d); root != want {
			t.Fatalf("root of %d: got %s, want %s", n, root, want)
		}
		for m := range n {
			got, err := tree.InclusionProof(ctx, uint64(m), uint64(n))
			if err != nil {
				t.Fatal(err)
			} else if want := refPath(m, d); !slices.Equal(got, want) {
				t.Fatalf("path of %d in %d: got %v, want %v", m, n, got, want)
			}
		}
		for m := 1; m < n; m++ {
			got, err := tree.ConsistencyProof(ctx, uint64(m), uint64(n))
			if err != nil {
				t.Fatal(err)
			} else if want := refSubproof(m, d, true); !slices.Equal(got, want) {
				t.Fatalf("consistency %d-%d: got %v, want %v", m, n, got, want)
			}
		}
	}
}

// TestTree_CatchUp opens a tree over a store that already holds more leaves
// than one catch-up batch, and over one another writer appends to.
func TestTree_CatchUp(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	leaves := randomLeaves(r, catchUpLeaves+1000+7)
	store := &MemoryStore{}
	if _, err := store.AppendLeaves(ctx, leaves[:catchUpLeaves+1000]); err != nil {
		t.Fatal(err)
	}
	tree := NewTree(store)
	size, root, err := tree.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := refRoot(leaves[:catchUpLeaves+1000]); size != catchUpLeaves+1000 || root != want {
		t.Fatalf("got %d %s, want %d %s", size, root, catchUpLeaves+1000, want)
	}

	// Another writer appends behind the tree's back.
	if _, err := store.AppendLeaves(ctx, leaves[catchUpLeaves+1000:]); err != nil {
		t.Fatal(err)
	}
	size, root, err = tree.Head(ctx)
	if want := refRoot(leaves); err != nil || size != uint64(len(leaves)) || root != want {
		t.Fatalf("after another writer: got %d %s %v, want %d %s", size, root, err, len(leaves), want)
	}
	for _, m := range []int{0, 17, 4095, 4096, len(leaves) - 1} {
		got, err := tree.InclusionProof(ctx, uint64(m), size)
		if err != nil || !slices.Equal(got, refPath(m, leaves)) {
			t.Errorf("path of %d: got %v, %v; want the definition's", m, got, err)
		}
	}
	got, err := tree.ConsistencyProof(ctx, 3000, size)
	if err != nil || !slices.Equal(got, refSubproof(3000, leaves, true)) {
		t.Errorf("consistency 3000-%d: got %v, %v; want the definition's", size, got, err)
	}
}

// shrinkingStore forgets its last leaf when asked, as no honest store does.
type shrinkingStore struct{ MemoryStore }

func (s *shrinkingStore) drop() { s.leaves = s.leaves[:len(s.leaves)-1] }

func TestTree_StoreShrank(t *testing.T) {
	ctx := context.Background()
	store := &shrinkingStore{}
	tree := NewTree(store)
	if _, err := tree.Append(ctx, randomLeaves(rand.New(rand.NewPCG(5, 6)), 20)...); err != nil {
		t.Fatal(err)
	}
	if _, err := tree.Size(ctx); err != nil {
		t.Fatal(err)
	}
	store.drop()
	if _, _, err := tree.Head(ctx); err == nil {
		t.Error("got no error from a store that shrank")
	}
}

func BenchmarkTree_InclusionProof(b *testing.B) {
	ctx := context.Background()
	const n = 1 << 20
	tree := mustTree(b, randomLeaves(rand.New(rand.NewPCG(7, 8)), n))
	if _, err := tree.Size(ctx); err != nil { // catch up outside the timing
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := tree.InclusionProof(ctx, uint64(i*7919)%n, n-3); err != nil {
			b.Fatal(err)
		}
	}
}
