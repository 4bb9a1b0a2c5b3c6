package audit

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// This file is what `idlegrid audit verify` runs on a user's machine. It
// trusts nothing the server says except what the log key signed.

// InclusionProof places the leaf at Index in the tree of TreeSize leaves.
type InclusionProof struct {
	Index    uint64 `json:"index"`
	TreeSize uint64 `json:"tree_size"`
	Path     []Hash `json:"path"`
}

// EntryProof is one of the user's entries with its proof of inclusion.
type EntryProof struct {
	Entry Entry `json:"entry"`
	InclusionProof
}

// ConsistencyProof shows that the tree of From leaves is a prefix of the
// tree of To leaves.
type ConsistencyProof struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	Path []Hash `json:"path"`
}

// Evidence is what a user has gathered: every signed tree head they have
// seen (kept between runs), the consistency proofs between them (see
// ConsistencyNeeded), and their own entries with inclusion proofs against
// one of those heads.
type Evidence struct {
	Heads       []SignedTreeHead   `json:"heads"`
	Consistency []ConsistencyProof `json:"consistency"`
	Entries     []EntryProof       `json:"entries"`
}

// ProblemKind classifies what Check found wrong.
type ProblemKind string

const (
	ProblemSignature    ProblemKind = "bad_signature" // a head not signed by the log key: ignored
	ProblemFork         ProblemKind = "fork"          // two signed heads of one size with different roots
	ProblemInconsistent ProblemKind = "inconsistent"  // a later head does not extend an earlier one
	ProblemMissingProof ProblemKind = "missing_proof" // a consistency proof needed was not given
	ProblemNoHead       ProblemKind = "no_head"       // an entry's proof is against a head not in Evidence
	ProblemNotIncluded  ProblemKind = "not_included"  // an entry's inclusion proof does not verify
)

// Problem is one thing Check found wrong, in words.
type Problem struct {
	Kind    ProblemKind `json:"kind"`
	Message string      `json:"message"`
}

// Report is the outcome of Check.
type Report struct {
	HeadsVerified   int       `json:"heads_verified"`   // heads whose signature holds
	Sizes           []uint64  `json:"sizes"`            // the distinct sizes of those heads, ascending
	ExtensionsShown int       `json:"extensions_shown"` // consecutive sizes proven consistent
	EntriesIncluded int       `json:"entries_included"` // entries proven in the log
	Problems        []Problem `json:"problems,omitempty"`
}

// OK reports whether Check found nothing wrong.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Err returns nil when r is OK, and otherwise an error listing the problems.
func (r *Report) Err() error {
	if r.OK() {
		return nil
	}
	msgs := make([]string, len(r.Problems))
	for i, p := range r.Problems {
		msgs[i] = p.Message
	}
	return fmt.Errorf("%w: %s", ErrVerification, strings.Join(msgs, "; "))
}

func (r *Report) problem(k ProblemKind, format string, args ...any) {
	r.Problems = append(r.Problems, Problem{Kind: k, Message: fmt.Sprintf(format, args...)})
}

// ConsistencyNeeded lists the consistency proofs Check needs for heads: one
// between each pair of consecutive distinct sizes, in ascending order. A
// proof from the empty tree is always empty, so it is not listed.
func ConsistencyNeeded(heads []SignedTreeHead) []ConsistencyProof {
	sizes := distinctSizes(heads)
	var out []ConsistencyProof
	for i := 1; i < len(sizes); i++ {
		if sizes[i-1] > 0 {
			out = append(out, ConsistencyProof{From: sizes[i-1], To: sizes[i]})
		}
	}
	return out
}

// Check verifies ev against the log's public key:
//
//  1. every head's signature; a head that fails is reported and set aside;
//  2. that heads of the same size have the same root (else the log forked);
//  3. that each head extends the one of the next smaller size, by the
//     consistency proof between them. Consistency is transitive, so this
//     shows every later head extends every earlier one: the history was
//     only ever appended to;
//  4. that each entry is included, by its inclusion proof, in the signed
//     head of its proof's tree size.
//
// Check never panics, on any input.
func Check(logKey ed25519.PublicKey, ev *Evidence) *Report {
	r := &Report{}
	if len(logKey) != ed25519.PublicKeySize {
		r.problem(ProblemSignature, "the log key is not an ed25519 public key")
		return r
	}
	roots := map[uint64]Hash{} // size → root of the signed heads
	for i := range ev.Heads {
		h := &ev.Heads[i]
		if err := h.Verify(logKey); err != nil {
			r.problem(ProblemSignature, "tree head %d (size %d) is not signed by the log key; it was ignored", i, h.Size)
			continue
		}
		r.HeadsVerified++
		if root, ok := roots[h.Size]; ok && root != h.RootHash {
			r.problem(ProblemFork, "two signed tree heads of size %d have different roots, %s and %s: the log was rewritten", h.Size, root, h.RootHash)
			continue
		}
		roots[h.Size] = h.RootHash
	}
	r.Sizes = sortedKeys(roots)
	checkExtensions(r, roots, ev.Consistency)
	for i := range ev.Entries {
		checkEntry(r, roots, i, &ev.Entries[i])
	}
	return r
}

// checkExtensions proves each signed size extends the next smaller one.
func checkExtensions(r *Report, roots map[uint64]Hash, proofs []ConsistencyProof) {
	for i := 1; i < len(r.Sizes); i++ {
		from, to := r.Sizes[i-1], r.Sizes[i]
		var path []Hash
		if from > 0 {
			j := slices.IndexFunc(proofs, func(p ConsistencyProof) bool { return p.From == from && p.To == to })
			if j < 0 {
				r.problem(ProblemMissingProof, "no consistency proof from size %d to %d was given", from, to)
				continue
			}
			path = proofs[j].Path
		}
		if err := VerifyConsistency(from, to, roots[from], roots[to], path); err != nil {
			r.problem(ProblemInconsistent, "the signed head of size %d does not extend the one of size %d: %s", to, from, detail(err))
			continue
		}
		r.ExtensionsShown++
	}
}

func checkEntry(r *Report, roots map[uint64]Hash, i int, p *EntryProof) {
	root, ok := roots[p.TreeSize]
	if !ok {
		r.problem(ProblemNoHead, "entry %d is proven against a tree of size %d, but no signed head of that size was given", i, p.TreeSize)
		return
	}
	leaf, err := p.Entry.LeafHash()
	if err != nil {
		r.problem(ProblemNotIncluded, "entry %d: %v", i, err)
		return
	}
	if err := VerifyInclusion(p.Index, p.TreeSize, leaf, p.Path, root); err != nil {
		r.problem(ProblemNotIncluded, "entry %d (%s at %s) is not included at index %d: %s",
			i, p.Entry.Kind, p.Entry.At.UTC().Format("2006-01-02T15:04:05.000000Z"), p.Index, detail(err))
		return
	}
	r.EntriesIncluded++
}

// detail is err's message without the ErrVerification prefix.
func detail(err error) string {
	msg := err.Error()
	if errors.Is(err, ErrVerification) {
		msg = strings.TrimPrefix(msg, ErrVerification.Error()+": ")
	}
	return msg
}

func distinctSizes(heads []SignedTreeHead) []uint64 {
	seen := map[uint64]Hash{}
	for _, h := range heads {
		seen[h.Size] = h.RootHash
	}
	return sortedKeys(seen)
}

func sortedKeys(m map[uint64]Hash) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
