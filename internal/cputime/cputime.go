// Package cputime reads the CPU time the process has used, for benchmarks
// that report CPU time per operation: on a machine shared with other work
// it varies far less than wall time.
package cputime
