// Package challenge is the hardware challenge workload and its judge
// (docs/trust.md): a fixed computation with a known result, an expected
// time band for the claimed GPU model from a spec table, and a memory
// allocation the size of the claimed VRAM.
//
// The computation is the product C = A×B of two N×N matrices whose
// elements, integers 0–15, come from a seed through SplitMix64. Every sum
// of N ≤ MaxSize products of such numbers is an integer below 2^24, so an
// FP32 GEMM on a GPU (any summation order, FMA or not) gives exactly the
// integers the coordinator computes. The answer is the SHA-256 of each row
// of C; the coordinator recomputes a few rows it picks at random after the
// answer arrives, O(N²) each, so a node that skipped work is caught with
// high probability while checking stays cheap.
//
// Run computes the product in Go, on the CPU: it is what the agent runs for
// fake GPUs, whose declared performance stands in for the measured time.
// On a real NVIDIA GPU the agent runs the same product as one cuBLAS SGEMM
// through internal/gpu/cuda (see docs/trust.md, "What runs it — honestly").
package challenge

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Version names the computation; it is part of every row hash.
const Version = "idlegrid-challenge-v1"

// Sizes: N is a multiple of SizeStep between MinSize and MaxSize. MaxSize
// keeps every element of C below 2^24 (N·15·15 < 2^24), exact in FP32.
const (
	MinSize  = 64
	MaxSize  = 65536
	SizeStep = 64
	SeedSize = 16 // bytes
)

// Task is one challenge's computation.
type Task struct {
	Seed [SeedSize]byte
	Size int // N
}

// TaskOf reads the task of a challenge.
func TaskOf(c *idlegrid.Challenge) (Task, error) {
	var t Task
	seed, err := hex.DecodeString(c.Seed)
	if err != nil || len(seed) != SeedSize {
		return t, idlegrid.Invalid("challenge.seed", "must be %d bytes in hex", SeedSize)
	}
	if c.Size < MinSize || c.Size > MaxSize || c.Size%SizeStep != 0 {
		return t, idlegrid.Invalid("challenge.size", "must be a multiple of %d between %d and %d", SizeStep, MinSize, MaxSize)
	}
	copy(t.Seed[:], seed)
	t.Size = c.Size
	return t, nil
}

// splitmix64 is SplitMix64's output function: one multiply-xorshift mix,
// easy to reproduce in a CUDA kernel.
func splitmix64(x uint64) uint64 {
	z := x + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// keys are the seeds of A and B: the seed's two little-endian halves.
func (t Task) keys() (a, b uint64) {
	return binary.LittleEndian.Uint64(t.Seed[:8]), binary.LittleEndian.Uint64(t.Seed[8:])
}

// element is entry (i, j) of the matrix with key k: 0–15.
func element(k uint64, n, i, j int) uint32 {
	return uint32(splitmix64(k+uint64(i)*uint64(n)+uint64(j)) & 15)
}

// A and B are entries (i, j) of the task's matrices.
func (t Task) A(i, j int) uint32 { ka, _ := t.keys(); return element(ka, t.Size, i, j) }
func (t Task) B(i, j int) uint32 { _, kb := t.keys(); return element(kb, t.Size, i, j) }

// Row computes row i of C = A×B from scratch, in O(N²): what the
// coordinator does to check an answer.
func (t Task) Row(i int) []uint32 {
	ka, kb := t.keys()
	n := t.Size
	row := make([]uint32, n)
	for k := 0; k < n; k++ {
		a := element(ka, n, i, k)
		if a == 0 {
			continue
		}
		for j := 0; j < n; j++ {
			row[j] += a * element(kb, n, k, j)
		}
	}
	return row
}

// RowHash is SHA-256(Version ‖ seed ‖ uint32 i ‖ row as uint32 LE).
func (t Task) RowHash(i int, row []uint32) [32]byte {
	h := sha256.New()
	h.Write([]byte(Version))
	h.Write(t.Seed[:])
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(i))
	h.Write(b[:])
	buf := make([]byte, 4*len(row))
	for j, v := range row {
		binary.LittleEndian.PutUint32(buf[4*j:], v)
	}
	h.Write(buf)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Digest is the hex SHA-256 of the concatenated row hashes: the answer's
// result, as the evidence records it.
func Digest(rowHashes []byte) string {
	sum := sha256.Sum256(rowHashes)
	return hex.EncodeToString(sum[:])
}

// Run computes the whole product and returns its row hashes, in row
// order, and how long the product took. It checks ctx between rows.
func Run(ctx context.Context, t Task) (rowHashes []byte, elapsed time.Duration, err error) {
	if t.Size < MinSize || t.Size > MaxSize {
		return nil, 0, fmt.Errorf("challenge size %d out of range", t.Size)
	}
	began := time.Now()
	ka, kb := t.keys()
	n := t.Size
	a, b := make([]uint32, n*n), make([]uint32, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			a[i*n+j], b[i*n+j] = element(ka, n, i, j), element(kb, n, i, j)
		}
	}
	out := make([]byte, 0, 32*n)
	row := make([]uint32, n)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		mulRow(row, a[i*n:(i+1)*n], b)
		h := t.RowHash(i, row)
		out = append(out, h[:]...)
	}
	return out, time.Since(began), nil
}

// mulRow sets row to the product of arow, a row of A, and B (n×n, n the
// length of row). It is the challenge's n³ multiply-adds, over slices
// only its caller holds: the race detector is kept out of it (norace), as
// it would watch every one of them and make each test that answers a
// challenge some fifteen times slower for nothing it could find.
//
//go:norace
func mulRow(row, arow, b []uint32) {
	n := len(row)
	clear(row)
	for k, x := range arow {
		if x == 0 {
			continue
		}
		for j, y := range b[k*n : (k+1)*n] {
			row[j] += x * y
		}
	}
}

// ErrRowHashes is the judge's finding for an answer of the wrong shape.
var ErrRowHashes = errors.New("the answer does not hold one 32-byte hash per row")
