//go:build race

package e2e

// raceEnabled builds the binary under test with the race detector when the
// tests run with it, so the real processes are checked too.
const raceEnabled = true
