//go:build gpu && cgo

package cuda

// The device check, for a machine with an NVIDIA GPU, the driver and
// cuBLAS (docs/trust.md, CONTRIBUTING.md):
//
//	go test -tags gpu -run GPU -v ./internal/gpu/cuda
//
// On each GPU NVML sees it runs a small challenge and checks every row
// against the CPU, then a challenge of the size the coordinator would
// issue to a CUDA runner (about a second at the claimed model's peak, at
// most maxServerSize) and judges it as the coordinator does: 8 rows
// recomputed, the time in the claimed model's band, the memory.

import (
	"bytes"
	"context"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/challenge"
	"github.com/idlegrid/idlegrid/internal/gpu/nvml"
)

// maxServerSize is internal/server's cap on a CUDA runner's challenge.
const maxServerSize = 16384

func TestGPU_Challenge(t *testing.T) {
	ctx := context.Background()
	det, err := nvml.Open()
	if err != nil {
		t.Fatalf("NVML: %v", err)
	}
	defer det.Close()
	devs, err := det.Detect(ctx)
	if err != nil || len(devs) == 0 {
		t.Fatalf("NVML found no GPU: %v", err)
	}
	r, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cudaDevs, err := r.Devices()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CUDA devices %v, cuBLAS %s", cudaDevs, r.BLAS())
	for _, d := range devs {
		t.Run(d.UUID, func(t *testing.T) {
			if !containsFold(cudaDevs, d.UUID) {
				t.Fatalf("NVML's %s (%s) is not among CUDA's %v: the UUIDs do not match", d.UUID, d.Name, cudaDevs)
			}
			small := challenge.Task{Size: 256, Seed: seed()}
			res, err := r.Run(ctx, d.UUID, small)
			if err != nil {
				t.Fatal(err)
			}
			want, _, err := challenge.Run(ctx, small)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(res.RowHashes, want) {
				t.Fatalf("N=256: the GPU's rows differ from the CPU's")
			}
			t.Logf("%s (%s, %d MB): N=256 every row right in %v", d.Model, res.Device, d.VRAMMB, res.Elapsed)

			spec, ok := challenge.LookupSpec(d.Model)
			c := &idlegrid.Challenge{ID: "chl_gpu_test", GPUUUID: d.UUID, Model: d.Model, VRAMMB: d.VRAMMB,
				Size: challenge.SizeFor(spec, ok, d.VRAMMB, maxServerSize)}
			s := seed()
			c.Seed = hex.EncodeToString(s[:])
			if ok {
				lo, hi := spec.Band(c.Size)
				c.MinNanos, c.MaxNanos = int64(lo), int64(hi)
			}
			big, err := challenge.TaskOf(c)
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			res, err = r.Run(ctx, d.UUID, big)
			if err != nil {
				t.Fatal(err)
			}
			ans := &idlegrid.ChallengeAnswer{RowHashes: res.RowHashes, Digest: challenge.Digest(res.RowHashes),
				ElapsedNanos: int64(res.Elapsed), VRAMMB: res.VRAMMB}
			rows := rand.Perm(big.Size)[:challenge.SpotRows]
			v := challenge.Judge(c, ans, rows)
			tflops := 2 * float64(big.Size) * float64(big.Size) * float64(big.Size) / res.Elapsed.Seconds() / 1e12
			t.Logf("N=%d: SGEMM %v (%.1f TFLOP/s; spec %.1f), band %v–%v, memory %d MB of %d claimed (free at start %d of %d), whole run %v",
				big.Size, res.Elapsed, tflops, spec.FP32TFLOPS, time.Duration(c.MinNanos), time.Duration(c.MaxNanos),
				res.VRAMMB, d.VRAMMB, res.FreeMBAtRun, res.TotalMB, time.Since(began).Round(time.Millisecond))
			for _, f := range v.Findings {
				t.Log("  " + f)
			}
			if !v.Passed {
				t.Errorf("the coordinator would fail this honest GPU: %s", strings.Join(v.Failures, "; "))
			}
		})
	}
}

func seed() (s [challenge.SeedSize]byte) {
	for i := range s {
		s[i] = byte(rand.IntN(256))
	}
	return s
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
