package sim

import (
	"testing"

	"github.com/idlegrid/idlegrid"
)

// TestRate_roundsHalfUp: a price below a unit is shown to a hundredth of
// a cent, rounded half up as dollars rounds to the cent, and from the
// exact micros, not a float: 150 micros, $0.00015, is $0.0002, as 250 is
// $0.0003 (a float rounds the first down and the second up).
func TestRate_roundsHalfUp(t *testing.T) {
	for _, tt := range []struct {
		m    idlegrid.Micros
		want string
	}{
		{150, "$0.0002"},
		{250, "$0.0003"},
		{149, "$0.0001"},
		{12_350, "$0.0124"},
		{-150, "-$0.0002"},
		{999_950, "$1.00"}, // a unit, rounded: as dollars shows it
		{1_234_567, "$1.23"},
		{0, "$0.0000"},
	} {
		if got := rate(tt.m); got != tt.want {
			t.Errorf("rate(%d) = %q, want %q", tt.m, got, tt.want)
		}
	}
}
