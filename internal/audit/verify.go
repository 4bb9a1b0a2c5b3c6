package audit

import (
	"errors"
	"fmt"
)

// The verifiers follow RFC 9162 §2.1.3.2 and §2.1.4.2 step by step. They
// need only what a client holds, a tree head, a proof and a leaf hash, and
// share no code with the Tree that made the proof. They never panic, on any
// input.

// ErrVerification is wrapped by every error of a proof that does not verify.
var ErrVerification = errors.New("audit: proof does not verify")

func failf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrVerification}, args...)...)
}

// VerifyInclusion checks that leafHash is the leaf at index in the tree of
// size leaves whose root is root, by the audit path proof.
func VerifyInclusion(index, size uint64, leafHash Hash, proof []Hash, root Hash) error {
	got, err := RootFromInclusionProof(index, size, leafHash, proof)
	if err != nil {
		return err
	} else if got != root {
		return failf("leaf %d of %d: the proof leads to root %s, not %s", index, size, got, root)
	}
	return nil
}

// RootFromInclusionProof returns the root that the audit path proof leads to
// from leafHash at index, in a tree of size leaves: RFC 9162 §2.1.3.2 up to
// its last comparison.
func RootFromInclusionProof(index, size uint64, leafHash Hash, proof []Hash) (Hash, error) {
	if index >= size { // step 1
		return Hash{}, failf("leaf %d is not in a tree of %d leaves", index, size)
	}
	fn, sn := index, size-1   // step 2
	r := leafHash             // step 3
	for _, p := range proof { // step 4
		if sn == 0 { // 4a
			return Hash{}, failf("leaf %d of %d: the proof has %d hashes, too many", index, size, len(proof))
		}
		if fn&1 == 1 || fn == sn { // 4b
			r = HashChildren(p, r)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			r = HashChildren(r, p)
		}
		fn >>= 1 // 4c
		sn >>= 1
	}
	if sn != 0 { // step 5
		return Hash{}, failf("leaf %d of %d: the proof has %d hashes, too few", index, size, len(proof))
	}
	return r, nil
}

// VerifyConsistency checks that the tree of size1 leaves with root root1 is
// a prefix of the tree of size2 leaves with root root2: that the log only
// grew between them.
//
// Beyond RFC 9162 §2.1.4.2, which covers 0 < size1 < size2: equal sizes are
// consistent when the roots are equal and the proof is empty; the empty
// tree is a prefix of every tree, with an empty proof, when root1 is the
// empty root; a log never shrinks.
func VerifyConsistency(size1, size2 uint64, root1, root2 Hash, proof []Hash) error {
	switch {
	case size1 > size2:
		return failf("a tree of %d leaves cannot follow one of %d: a log never shrinks", size2, size1)
	case size1 == size2:
		if len(proof) != 0 {
			return failf("two heads of %d leaves need an empty proof, got %d hashes", size1, len(proof))
		} else if root1 != root2 {
			return failf("two heads of %d leaves have different roots %s and %s: the log forked", size1, root1, root2)
		}
		return nil
	case size1 == 0:
		if len(proof) != 0 {
			return failf("the empty tree needs an empty proof, got %d hashes", len(proof))
		} else if root1 != EmptyRoot() {
			return failf("a head of 0 leaves must have the empty root, got %s", root1)
		}
		return nil
	}
	return verifyConsistency(size1, size2, root1, root2, proof)
}

// verifyConsistency is RFC 9162 §2.1.4.2 for 0 < first < second.
func verifyConsistency(first, second uint64, firstHash, secondHash Hash, proof []Hash) error {
	if len(proof) == 0 { // step 1
		return failf("%d to %d: the proof is empty", first, second)
	}
	if first&(first-1) == 0 { // step 2: first is an exact power of 2
		proof = append([]Hash{firstHash}, proof...)
	}
	fn, sn := first-1, second-1 // step 3
	for fn&1 == 1 {             // step 4
		fn >>= 1
		sn >>= 1
	}
	fr, sr := proof[0], proof[0]  // step 5
	for _, c := range proof[1:] { // step 6
		if sn == 0 { // 6a
			return failf("%d to %d: the proof has too many hashes", first, second)
		}
		if fn&1 == 1 || fn == sn { // 6b
			fr = HashChildren(c, fr)
			sr = HashChildren(c, sr)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			sr = HashChildren(sr, c)
		}
		fn >>= 1 // 6c
		sn >>= 1
	}
	switch { // step 7
	case sn != 0:
		return failf("%d to %d: the proof has too few hashes", first, second)
	case fr != firstHash:
		return failf("%d to %d: the proof leads to first root %s, not %s", first, second, fr, firstHash)
	case sr != secondHash:
		return failf("%d to %d: the proof leads to second root %s, not %s", first, second, sr, secondHash)
	}
	return nil
}
