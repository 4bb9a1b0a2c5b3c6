package gateway

import (
	"testing"
	"time"
)

// A whole answer's first byte comes with its last, so its time to first
// byte is its latency: the statistics take time to first token from
// streams only, and give 0 when the window holds none.
func TestSummarise_ttftFromStreams(t *testing.T) {
	var r ring
	for range 3 {
		r.samples = append(r.samples, sample{latency: 900 * time.Millisecond, ttft: 900 * time.Millisecond})
	}
	if st := summarise("m", &r); st.TTFTP50MS != 0 || st.TTFTP95MS != 0 || st.LatencyP50MS != 900 {
		t.Fatalf("whole answers only: %+v, want no time to first token and a latency of 900 ms", st)
	}
	r.samples = append(r.samples, sample{latency: 400 * time.Millisecond, ttft: 20 * time.Millisecond, streamed: true})
	r.samples = append(r.samples, sample{latency: 500 * time.Millisecond, ttft: 30 * time.Millisecond, streamed: true})
	st := summarise("m", &r)
	if st.TTFTP50MS != 20 || st.TTFTP95MS != 30 {
		t.Fatalf("ttft p50, p95 = %v, %v ms, want 20, 30 from the two streams", st.TTFTP50MS, st.TTFTP95MS)
	}
}
