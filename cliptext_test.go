package idlegrid_test

import (
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

func TestClipText(t *testing.T) {
	for _, tt := range []struct {
		s    string
		most int
		want string
	}{
		{"short", 10, "short"},
		{strings.Repeat("x", 100), 40, strings.Repeat("x", 12) + " … [cut: 100 bytes in all]"},
		{strings.Repeat("é", 50), 40, strings.Repeat("é", 6) + " … [cut: 100 bytes in all]"}, // not half a character
	} {
		if got := idlegrid.ClipText(tt.s, tt.most); got != tt.want || len(got) > max(tt.most, len(tt.s)) {
			t.Errorf("ClipText(%d bytes, %d) = %q, want %q", len(tt.s), tt.most, got, tt.want)
		}
	}
}
