package audit

import (
	"encoding/hex"
	"encoding/json"
	"testing"
)

// The values in this file's tests are the published RFC 6962 test vectors
// (as in the Certificate Transparency and Trillian test suites): inputs and
// SHA-256 results anyone can recompute with `xxd -r -p | sha256sum`.

func TestHashLeaf(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  Hash
		want string
	}{
		// echo -n | sha256sum
		{"empty tree", EmptyRoot(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		// echo -n 00 | xxd -r -p | sha256sum: not the empty tree's hash
		{"empty leaf", HashLeaf(nil), "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"},
		// echo -n 004C313233343536 | xxd -r -p | sha256sum
		{"leaf", HashLeaf([]byte("L123456")), "395aa064aa4c29f7010acfe3f25db9485bbd4b91897b6ad7ad547639252b4d56"},
		// echo -n 014E3132334E343536 | xxd -r -p | sha256sum
		{"node", nodeHash([]byte("N123"), []byte("N456")), "aa217fe888e47007fa15edab33c2b492a722cb106c64667fc2b044444de66bbb"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.got.String(); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestHashChildren(t *testing.T) {
	a, b := HashLeaf([]byte("Hello")), HashLeaf([]byte("World"))
	if a == b {
		t.Fatal("different leaves hash the same")
	}
	ab := HashChildren(a, b)
	if ab == HashChildren(b, a) {
		t.Error("a node's hash does not depend on the order of its children")
	}
	if ab == HashLeaf(append(a[:], b[:]...)) {
		t.Error("a node hashes like a leaf of its children's hashes: no domain separation")
	}
}

func TestHash_Text(t *testing.T) {
	h := HashLeaf([]byte("x"))
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"` + hex.EncodeToString(h[:]) + `"`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	var got Hash
	if err := json.Unmarshal(b, &got); err != nil || got != h {
		t.Errorf("round trip: got %s, %v; want %s", got, err, h)
	}
	for _, bad := range []string{`""`, `"abc"`, `"` + h.String() + `00"`, `"` + h.String()[:62] + `zz"`} {
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("%s: got no error", bad)
		}
	}
}

// mustHex decodes a hex hash of a test vector.
func mustHex(tb testing.TB, s string) Hash {
	tb.Helper()
	h, err := ParseHash(s)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}
