package market

import "testing"

func TestCounted(t *testing.T) {
	for _, tt := range []struct {
		counts map[string]int
		want   string
	}{
		{map[string]int{"US": 4, "CH": 1, "EU": 4}, "EU (4), US (4), CH (1)"},
		{map[string]int{"": 2, "SG": 1}, "none given (2), SG (1)"},
		{map[string]int{"a": 7, "b": 6, "c": 5, "d": 4, "e": 3, "f": 2, "g": 1}, "a (7), b (6), c (5), d (4), e (3), 2 others (3)"},
		{map[string]int{"a": 2, "b": 2, "c": 2, "d": 2, "e": 2, "f": 1}, "a (2), b (2), c (2), d (2), e (2), 1 other (1)"},
	} {
		if got := counted(tt.counts); got != tt.want {
			t.Errorf("counted(%v) = %q, want %q", tt.counts, got, tt.want)
		}
	}
}
