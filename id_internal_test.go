package idlegrid

import (
	"regexp"
	"testing"
	"time"
)

var idRE = regexp.MustCompile(`^job_[0-9a-v]{25}$`)

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 10_000 {
		id := NewID("job")
		if !idRE.MatchString(id) || !IsMadeID(id) {
			t.Fatalf("NewID = %q (IsMadeID %v), want job_ and 25 characters of 0-9a-v", id, IsMadeID(id))
		}
		if seen[id] {
			t.Fatalf("NewID made %q twice", id)
		}
		seen[id] = true
	}
}

// TestIsMadeID: what NewID makes, and only that, is an ID's shape; a node
// name that begins as an ID does is not.
func TestIsMadeID(t *testing.T) {
	for _, s := range []string{"node_b", "node_", "_0000000000000000000000000", "Node_0000000000000000000000000",
		"node_000000000000000000000000w", "node_00000000000000000000000000", "node-0000000000000000000000000",
		"node_0000000000000000000000000_", "n0de_0000000000000000000000000"} {
		if IsMadeID(s) {
			t.Errorf("IsMadeID(%q) = true, want false", s)
		}
	}
	for _, s := range []string{"node_0000000000000000000000000", "dispute_0123456789abcdefghijklmno", NewID("lease")} {
		if !IsMadeID(s) {
			t.Errorf("IsMadeID(%q) = false, want true", s)
		}
	}
}

// TestIDAt_sortsByTime: IDs made later sort after, a millisecond apart or
// years, whatever their random part; those of one millisecond share their
// first 9 characters.
func TestIDAt_sortsByTime(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	steps := []time.Duration{0, time.Millisecond, time.Second, time.Hour, 24 * time.Hour, 40 * 365 * 24 * time.Hour}
	var ids []string
	for _, d := range steps {
		for range 3 {
			ids = append(ids, idAt("lease", t0.Add(d)))
		}
	}
	for i := 1; i < len(ids); i++ {
		a, b := ids[i-1], ids[i]
		if i%3 != 0 {
			if a[:len("lease_")+9] != b[:len("lease_")+9] {
				t.Errorf("IDs of one millisecond %q and %q differ before their random part", a, b)
			}
			continue
		}
		if a >= b {
			t.Errorf("ID %q made before %q sorts after it", a, b)
		}
	}
	if got := idAt("x", time.UnixMilli(0)); got[:len("x_")+9] != "x_000000000" {
		t.Errorf("idAt(epoch) = %q, want x_000000000…", got)
	}
}
