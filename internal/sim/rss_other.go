//go:build !linux

package sim

// peakRSS is unknown here; the report shows the Go heap instead.
func peakRSS() uint64 { return 0 }
