package audit

// This file builds proofs by RFC 9162's definitions, over any way of hashing
// a range of leaves. verify.go checks them and shares none of this code.

// rangeHash returns MTH(D[lo:hi]).
type rangeHash func(lo, hi uint64) (Hash, error)

// inclusionPath is PATH(m, D[lo:hi]) of RFC 9162 §2.1.3.1, with m counted
// from the start of the whole tree: the siblings of leaf m on its way up to
// the root of D[lo:hi], nearest first.
func inclusionPath(h rangeHash, m, lo, hi uint64) ([]Hash, error) {
	if hi-lo <= 1 {
		return []Hash{}, nil
	}
	k := split(hi - lo)
	sub, sibLo, sibHi := [2]uint64{lo, lo + k}, lo+k, hi // m in the left half
	if m >= lo+k {
		sub, sibLo, sibHi = [2]uint64{lo + k, hi}, lo, lo+k
	}
	path, err := inclusionPath(h, m, sub[0], sub[1])
	if err != nil {
		return nil, err
	}
	sib, err := h(sibLo, sibHi)
	if err != nil {
		return nil, err
	}
	return append(path, sib), nil
}

// subproof is SUBPROOF(m, D[lo:hi], b) of RFC 9162 §2.1.4.1, with m counted
// from the start of the whole tree, for lo < m <= hi. The consistency proof
// between sizes m and n is subproof(h, m, 0, n, true).
func subproof(h rangeHash, m, lo, hi uint64, b bool) ([]Hash, error) {
	if m == hi {
		if b {
			return []Hash{}, nil
		}
		root, err := h(lo, hi)
		return []Hash{root}, err
	}
	k := split(hi - lo)
	var (
		proof        []Hash
		sibLo, sibHi uint64
		err          error
	)
	if m <= lo+k {
		proof, err = subproof(h, m, lo, lo+k, b)
		sibLo, sibHi = lo+k, hi
	} else {
		proof, err = subproof(h, m, lo+k, hi, false)
		sibLo, sibHi = lo, lo+k
	}
	if err != nil {
		return nil, err
	}
	sib, err := h(sibLo, sibHi)
	if err != nil {
		return nil, err
	}
	return append(proof, sib), nil
}
