package challenge_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/challenge"
	"github.com/idlegrid/idlegrid/internal/gpu"
)

const testSeed = "00112233445566778899aabbccddeeff"

func mustTask(tb testing.TB, size int) challenge.Task {
	tb.Helper()
	t, err := challenge.TaskOf(&idlegrid.Challenge{Seed: testSeed, Size: size})
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func mustRun(tb testing.TB, t challenge.Task) []byte {
	tb.Helper()
	hashes, _, err := challenge.Run(context.Background(), t)
	if err != nil {
		tb.Fatal(err)
	}
	return hashes
}

func TestRun(t *testing.T) {
	task := mustTask(t, 64)
	hashes := mustRun(t, task)
	if len(hashes) != 32*64 {
		t.Fatalf("len(row hashes) = %d, want %d", len(hashes), 32*64)
	}
	t.Run("RowsMatchTheCheck", func(t *testing.T) {
		for i := 0; i < task.Size; i++ {
			want := task.RowHash(i, task.Row(i))
			if got := hashes[32*i : 32*i+32]; hex.EncodeToString(got) != hex.EncodeToString(want[:]) {
				t.Fatalf("row %d: Run and Row disagree", i)
			}
		}
	})
	t.Run("KnownAnswer", func(t *testing.T) {
		// Pinned, and computed independently (a Python transcription of the
		// package doc): a change here breaks every agent and GPU kernel.
		const want = "18140c492be09ddef9a9b0c89a5a41b33841dbc100744576664c2fe9a010da4f"
		if got := challenge.Digest(hashes); got != want {
			t.Fatalf("digest = %s, want %s", got, want)
		}
	})
	t.Run("ExactInFP32", func(t *testing.T) {
		// A GPU sums in float32, in any order: it must get the same integers.
		big := mustTask(t, 4096)
		row := big.Row(7)
		for j := 0; j < 4; j++ {
			var f float32
			for k := big.Size - 1; k >= 0; k-- { // another order than Row's
				f += float32(big.A(7, k)) * float32(big.B(k, j))
			}
			if uint32(f) != row[j] {
				t.Fatalf("C[7][%d]: float32 sum %v, integer %d", j, f, row[j])
			}
		}
	})
	t.Run("OtherSeed", func(t *testing.T) {
		other, err := challenge.TaskOf(&idlegrid.Challenge{Seed: strings.Repeat("ab", 16), Size: 64})
		if err != nil {
			t.Fatal(err)
		}
		if challenge.Digest(mustRun(t, other)) == challenge.Digest(hashes) {
			t.Fatal("two seeds gave the same result")
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := challenge.Run(ctx, task); err == nil {
			t.Fatal("Run ignored a cancelled context")
		}
	})
}

func TestTaskOf(t *testing.T) {
	for name, c := range map[string]idlegrid.Challenge{
		"ShortSeed": {Seed: "0011", Size: 64},
		"NotHex":    {Seed: strings.Repeat("zz", 16), Size: 64},
		"TooSmall":  {Seed: testSeed, Size: 32},
		"NotAStep":  {Seed: testSeed, Size: 100},
		"TooBig":    {Seed: testSeed, Size: challenge.MaxSize + challenge.SizeStep},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := challenge.TaskOf(&c); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
				t.Fatalf("TaskOf = %v, want EINVALID", err)
			}
		})
	}
}

func TestLookupSpec(t *testing.T) {
	h, ok := challenge.LookupSpec("h100-80gb")
	if !ok || h.FP32TFLOPS != 66.91 || h.VRAMMB != 76294 || h.Source != "NVIDIA H100 SXM5 80GB" {
		t.Fatalf("LookupSpec(h100-80gb) = %+v, %v", h, ok)
	}
	// Every model the fake detector simulates has a spec, but the L40S,
	// which the dataset lacks.
	for _, m := range gpu.Models {
		if _, ok := challenge.LookupSpec(m.Name); !ok && m.Name != "L40S" {
			t.Errorf("no spec for %s", m.Name)
		}
	}
}

func TestSizeFor(t *testing.T) {
	h100, _ := challenge.LookupSpec("H100-80GB")
	t4, _ := challenge.LookupSpec("T4")
	tests := []struct {
		name    string
		spec    challenge.Spec
		ok      bool
		vramMB  int
		maxSize int
		want    int
	}{
		{"H100ByTime", h100, true, 81920, challenge.MaxSize, 32192}, // cbrt(66.91e12/2) = 32220
		{"T4ByTime", t4, true, 15360, challenge.MaxSize, 15936},     // cbrt(8.141e12/2) = 15968
		{"ByMemory", h100, true, 1024, challenge.MaxSize, 4672},     // sqrt(1 GiB/48) = 4729
		{"Capped", h100, true, 81920, 512, 512},
		{"NoSpec", challenge.Spec{}, false, 46068, 2048, 2048},
		{"AtLeastMin", t4, true, 1, 10, challenge.MinSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := challenge.SizeFor(tt.spec, tt.ok, tt.vramMB, tt.maxSize); got != tt.want {
				t.Fatalf("SizeFor = %d, want %d", got, tt.want)
			}
		})
	}
}
