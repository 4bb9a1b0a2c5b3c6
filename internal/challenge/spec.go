package challenge

import (
	_ "embed"
	"encoding/csv"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Spec is what a GPU model should do, from the spec table (specs.csv,
// derived from Epoch AI's Machine Learning Hardware data; see its header).
type Spec struct {
	Model           string  // idlegrid's canonical model name
	Source          string  // the dataset's name for it
	VRAMMB          int     // memory in MiB; 0 when the dataset gives none
	FP32TFLOPS      float64 // peak dense FP32
	FP16TFLOPS      float64 // peak FP16 (not tensor cores); 0 when unknown
	MemBandwidthGBs float64
}

//go:embed specs.csv
var specsCSV string

var specs = mustParseSpecs(specsCSV)

func mustParseSpecs(text string) map[string]Spec {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "#") && strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	rows, err := csv.NewReader(strings.NewReader(strings.Join(lines, "\n"))).ReadAll()
	if err != nil || len(rows) < 2 {
		panic(fmt.Sprintf("challenge: specs.csv: %v", err))
	}
	out := map[string]Spec{}
	for _, r := range rows[1:] {
		num := func(i int) float64 {
			v, err := strconv.ParseFloat(r[i], 64)
			if err != nil {
				panic(fmt.Sprintf("challenge: specs.csv: %s: column %d: %v", r[0], i, err))
			}
			return v
		}
		out[strings.ToUpper(r[0])] = Spec{Model: r[0], Source: r[1], VRAMMB: int(num(2)),
			FP32TFLOPS: num(3), FP16TFLOPS: num(4), MemBandwidthGBs: num(5)}
	}
	return out
}

// LookupSpec finds a model's spec by canonical name, ignoring case.
func LookupSpec(model string) (Spec, bool) {
	s, ok := specs[strings.ToUpper(strings.TrimSpace(model))]
	return s, ok
}

// The time band, as shares of Expected: a real GEMM reaches 50–90% of
// peak, so up to twice the peak time passes; under half of it means a
// faster GPU than claimed. A T4 claiming to be an A100 takes 2.4 times the
// A100's time and fails; one claiming an H100, 8.2 times.
const (
	BandLow  = 0.5
	BandHigh = 2.0
)

// Expected is how long the product of size n takes at the model's peak
// FP32 rate: 2n³ floating-point operations.
func (s Spec) Expected(n int) time.Duration {
	if s.FP32TFLOPS <= 0 {
		return 0
	}
	flops := 2 * math.Pow(float64(n), 3)
	return time.Duration(flops / (s.FP32TFLOPS * 1e12) * float64(time.Second))
}

// Band is the time band for the product of size n on this model.
func (s Spec) Band(n int) (min, max time.Duration) {
	e := float64(s.Expected(n))
	return time.Duration(e * BandLow), time.Duration(e * BandHigh)
}

// TargetTime is how long a challenge should keep a real GPU busy, so that
// the time measured is the GPU's and not the launch's.
const TargetTime = time.Second

// SizeFor chooses N for a GPU that claims vramMB of memory and the model
// of spec (ok false: no spec): the size that takes about TargetTime at the
// model's peak, small enough that A, B and C use at most a quarter of the
// memory, at most maxSize, a multiple of SizeStep and at least MinSize.
func SizeFor(spec Spec, ok bool, vramMB, maxSize int) int {
	n := float64(MaxSize)
	if ok && spec.FP32TFLOPS > 0 {
		n = math.Cbrt(TargetTime.Seconds() * spec.FP32TFLOPS * 1e12 / 2)
	}
	if vramMB > 0 {
		n = math.Min(n, math.Sqrt(float64(vramMB)*(1<<20)/4/12))
	}
	n = math.Min(n, float64(min(maxSize, MaxSize)))
	size := int(n) / SizeStep * SizeStep
	return max(size, MinSize)
}
