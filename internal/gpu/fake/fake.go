// Package fake is a GPU detector for development and tests: it reports the
// GPUs named in a spec such as "2xRTX4090" or "1xH100-80GB,4xT4", with
// realistic memory sizes and UUIDs that are stable for a given seed.
package fake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu"
)

// Model is a GPU model the fake detector knows.
type Model struct {
	Name   string // canonical, e.g. "H100-80GB"
	VRAMMB int
}

// Models lists the known models, largest first.
var Models = []Model{
	{"H100-80GB", 81920},
	{"A100-80GB", 81920},
	{"A100-40GB", 40960},
	{"L40S", 46068},
	{"RTX3090", 24576},
	{"RTX4090", 24564},
	{"L4", 23034},
	{"A10G", 23028},
	{"T4", 15360},
}

// MaxGPUs caps a spec; an offer may list at most this many GPUs.
const MaxGPUs = 64

// Detector reports a fixed set of GPUs.
type Detector struct {
	gpus []idlegrid.GPU
}

var _ gpu.Detector = (*Detector)(nil)

// Parse builds a detector from spec, a comma-separated list of COUNTxMODEL
// ("2xRTX4090,1xT4"; the count defaults to 1). Model names are matched
// without regard to case. The seed (the node's public key or name) makes
// the UUIDs: the same spec and seed give the same UUIDs on every run.
func Parse(spec, seed string) (*Detector, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, idlegrid.Invalid("fake_gpus", "empty; name GPUs like 2xRTX4090 or 1xH100-80GB,4xT4")
	}
	d := &Detector{}
	for _, part := range strings.Split(spec, ",") {
		n, m, err := parsePart(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		if len(d.gpus)+n > MaxGPUs {
			return nil, idlegrid.Invalid("fake_gpus", "at most %d GPUs in all", MaxGPUs)
		}
		for i := 0; i < n; i++ {
			d.gpus = append(d.gpus, idlegrid.GPU{
				UUID: uuidFor(seed, m.Name, len(d.gpus)), Model: m.Name, VRAMMB: m.VRAMMB,
			})
		}
	}
	return d, nil
}

// parsePart parses one COUNTxMODEL.
func parsePart(part string) (int, Model, error) {
	count, name := "1", part
	if i := strings.IndexAny(part, "xX"); i > 0 && isDigits(part[:i]) {
		count, name = part[:i], part[i+1:]
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > MaxGPUs {
		return 0, Model{}, idlegrid.Invalid("fake_gpus", "%q: count must be between 1 and %d", part, MaxGPUs)
	}
	m, ok := Lookup(name)
	if !ok {
		return 0, Model{}, idlegrid.Invalid("fake_gpus", "%q: unknown model %q; known models: %s", part, name, modelList())
	}
	return n, m, nil
}

// Lookup finds a known model by name, ignoring case.
func Lookup(name string) (Model, bool) {
	for _, m := range Models {
		if strings.EqualFold(m.Name, strings.TrimSpace(name)) {
			return m, true
		}
	}
	return Model{}, false
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

func modelList() string {
	names := make([]string, len(Models))
	for i, m := range Models {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}

// uuidFor derives a UUID shaped like NVIDIA's ("GPU-" + 8-4-4-4-12 hex),
// marked fake so it is never mistaken for a real device.
func uuidFor(seed, model string, index int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("idlegrid-fake-gpu\x00%s\x00%s\x00%d", seed, model, index)))
	h := hex.EncodeToString(sum[:16])
	return "GPU-fake-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Detect returns a copy of the GPUs named in the spec.
func (d *Detector) Detect(ctx context.Context) ([]idlegrid.GPU, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return append([]idlegrid.GPU(nil), d.gpus...), nil
}
