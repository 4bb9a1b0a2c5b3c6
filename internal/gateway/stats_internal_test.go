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

// The statistics' price per million tokens is the window's charges times
// a million over its tokens, a product beyond int64 for a dear model: at
// $10,000 per million tokens (the most an offer may ask), 2,048 requests
// of 500,000 tokens are charged $5,000 each, $10,240,000 in all, and
// 1.024e13 micros times a million is past 9.2e18. It must still say
// $10,000 per million, not a wrapped negative price.
func TestSummarise_priceOfDearModel(t *testing.T) {
	var r ring
	for range statsWindow {
		r.samples = append(r.samples, sample{latency: time.Second, tokens: 500_000, charge: 5_000_000_000})
	}
	if got := summarise("m", &r).MicrosPerMTokens; got != 10_000_000_000 {
		t.Fatalf("price per million tokens = %s, want $10000.000000", got)
	}
}
