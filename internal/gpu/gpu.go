// Package gpu is the contract for finding a node's GPUs. Detectors are small
// adapters named for their technology: fake (for development and tests) now,
// NVML and nvidia-smi later.
package gpu

import (
	"context"

	"github.com/idlegrid/idlegrid"
)

// Detector lists the GPUs of the machine it runs on. Every call returns the
// same UUIDs for the same devices, so that a node's offer and its leases'
// GPU claims stay stable across agent restarts.
type Detector interface {
	Detect(ctx context.Context) ([]idlegrid.GPU, error)
}
