package sim

import "testing"

// An estimate is judged both ways: a start long before it is on time, but
// neither near it nor without error.
func TestEstimateAccuracy(t *testing.T) {
	late := []int32{-7200, -901, -900, 0, 300, 900, 901, 3600}
	if got := onTime(late); got != 5.0/8 {
		t.Errorf("onTime = %v, want 5/8: every start before the estimate, and one 5 minutes after", got)
	}
	if got := near(late); got != 4.0/8 {
		t.Errorf("near = %v, want 4/8: -900, 0, 300 and 900", got)
	}
	if got, want := meanError(late), int32((7200+901+900+0+300+900+901+3600)/8); got != want {
		t.Errorf("meanError = %d, want %d", got, want)
	}
	if near(nil) != 0 || meanError(nil) != 0 {
		t.Error("near and meanError of no starts are not 0")
	}
}
