package market

import "testing"

// TestAvoidKey: a wait reason's key for the providers a job avoids is the
// same whatever their order and repeats, and tells lists apart.
func TestAvoidKey(t *testing.T) {
	if got := avoidKey(nil); got != "" {
		t.Errorf("avoidKey(nil) = %q, want empty", got)
	}
	if a, b := avoidKey([]string{"p2", "p1", "p2"}), avoidKey([]string{"p1", "p2"}); a != b {
		t.Errorf("avoidKey of one list in two orders: %q and %q", a, b)
	}
	for _, other := range [][]string{{"p1"}, {"p1", "p3"}, {"p1p2"}} {
		if avoidKey(other) == avoidKey([]string{"p1", "p2"}) {
			t.Errorf("avoidKey(%q) = avoidKey([p1 p2])", other)
		}
	}
}
