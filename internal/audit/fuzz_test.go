package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// hashesOf cuts data into hashes, dropping a short tail.
func hashesOf(data []byte) []Hash {
	var out []Hash
	for len(data) >= HashSize {
		var h Hash
		copy(h[:], data)
		out = append(out, h)
		data = data[HashSize:]
	}
	return out
}

// FuzzVerifyInclusion feeds the inclusion verifier garbage: it must not
// panic, and the two ways of asking it must agree.
func FuzzVerifyInclusion(f *testing.F) {
	for _, tt := range rfcInclusion {
		var data []byte
		leaf := HashLeaf(mustBytes(f, rfcLeaves[tt.index]))
		root := mustHex(f, rfcRoots[tt.size-1])
		data = append(append(data, leaf[:]...), root[:]...)
		for _, h := range hexes(f, tt.path) {
			data = append(data, h[:]...)
		}
		f.Add(tt.index, tt.size, data)
	}
	f.Add(uint64(1<<64-1), uint64(1<<64-1), make([]byte, 200))
	f.Fuzz(func(t *testing.T, index, size uint64, data []byte) {
		hs := hashesOf(data)
		if len(hs) < 2 {
			return
		}
		leaf, root, path := hs[0], hs[1], hs[2:]
		err := VerifyInclusion(index, size, leaf, path, root)
		got, rerr := RootFromInclusionProof(index, size, leaf, path)
		if (err == nil) != (rerr == nil && got == root) {
			t.Errorf("VerifyInclusion says %v, RootFromInclusionProof says %s, %v", err, got, rerr)
		}
	})
}

// FuzzVerifyConsistency feeds the consistency verifier garbage: it must not
// panic, and whatever it accepts must depend on both roots.
func FuzzVerifyConsistency(f *testing.F) {
	for _, tt := range rfcConsistency {
		r1, r2 := mustHex(f, rfcRoots[tt.from-1]), mustHex(f, rfcRoots[tt.to-1])
		data := append(r1[:], r2[:]...)
		for _, h := range hexes(f, tt.path) {
			data = append(data, h[:]...)
		}
		f.Add(tt.from, tt.to, data)
	}
	f.Add(uint64(1<<63), uint64(1<<64-1), make([]byte, 400))
	f.Fuzz(func(t *testing.T, size1, size2 uint64, data []byte) {
		hs := hashesOf(data)
		if len(hs) < 2 {
			return
		}
		root1, root2, path := hs[0], hs[1], hs[2:]
		if VerifyConsistency(size1, size2, root1, root2, path) != nil {
			return
		}
		other1, other2 := root1, root2
		other1[0] ^= 1
		other2[0] ^= 1
		if VerifyConsistency(size1, size2, other1, root2, path) == nil {
			t.Errorf("%d-%d: verifies with another first root", size1, size2)
		}
		// Everything extends the empty tree, whatever its root.
		if size1 > 0 && VerifyConsistency(size1, size2, root1, other2, path) == nil {
			t.Errorf("%d-%d: verifies with another second root", size1, size2)
		}
	})
}

// FuzzCheck feeds Check arbitrary evidence: it must not panic.
func FuzzCheck(f *testing.F) {
	u := mustHonestView(f)
	good, err := json.Marshal(u.evidence(f, "rnt_a"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"heads":[{"size":3}],"entries":[{"tree_size":3,"index":9,"entry":{"payload":"x"}}]}`))
	pub := u.log.PublicKey()
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev Evidence
		if json.Unmarshal(data, &ev) != nil {
			return
		}
		r := Check(pub, &ev)
		if r.OK() != (r.Err() == nil) {
			t.Errorf("OK %v but Err %v", r.OK(), r.Err())
		}
	})
}

// FuzzCanonicalize checks that canonical JSON is a fixed point.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,2.5e3,"x"]}`, `"\u00e9\ud800"`, `[{"":{}}]`, ` null `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Canonicalize(data)
		if err != nil {
			return
		}
		again, err := Canonicalize(c)
		if err != nil || !bytes.Equal(c, again) {
			t.Errorf("%q canonicalizes to %q, then to %q (%v)", data, c, again, err)
		}
		if !json.Valid(c) {
			t.Errorf("%q canonicalizes to invalid JSON %q", data, c)
		}
	})
}

// canonicalizeByDecoding is the definition Canonicalize must match: decode
// into Go values, numbers kept as written, and encode them again without
// HTML escaping (maps sort their keys; a repeated key keeps its last value).
func canonicalizeByDecoding(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one value")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

var canonicalSeeds = []string{
	`{"b":1,"a":[1,2.5e3,"x"]}`, `"\u00e9\ud800"`, `[{"":{}}]`, ` null `,
	`{"a":1,"\u0061":2,"b":{"z":[],"y":{}}}`, `{"é":1,"e":2,"\u00e9":3}`,
	`"<>&\u2028\u2029 \u007f"`, "\"caf\xc3\xa9 \xff\"", `{"k\"q":"v\\w","k":"\/"}`,
	"{\n  \"x\" : [ true , false , null , -0.0E+1 ] ,\n\t\"w\":\"\"\n}",
	`[[[[{"a":[{"b":{"c":1}}]}]]]]`, `{"dup":{"a":1},"dup":{"b":2}}`, `1`, `"s"`, `{}`, `[]`,
}

// TestCanonicalizeMatchesDecoder holds the byte-level Canonicalize to its
// definition on payloads the market logs and on awkward ones.
func TestCanonicalizeMatchesDecoder(t *testing.T) {
	for _, s := range canonicalSeeds {
		checkCanonical(t, []byte(s))
	}
}

// FuzzCanonicalizeMatchesDecoder does the same on any input.
func FuzzCanonicalizeMatchesDecoder(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkCanonical)
}

func checkCanonical(t *testing.T, data []byte) {
	got, err := Canonicalize(data)
	want, wantErr := canonicalizeByDecoding(data)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, want %v", data, err, wantErr)
	}
	if err == nil && !bytes.Equal(got, want) {
		t.Fatalf("%q: got %q, want %q", data, got, want)
	}
}
