// Package nvml is a GPU detector on NVIDIA's management library (NVML),
// through NVIDIA's Go bindings. The library, libnvidia-ml.so.1, comes with
// the driver and is loaded at run time, so a binary built with it still
// starts on a machine without a driver: Open then fails with ErrNoDriver
// and the caller falls back (see internal/gpu/auto).
//
// The bindings need cgo. A binary built without cgo (the static agent
// image) gets a stand-in whose Open fails with ErrNoCgo.
//
// Besides telemetry, the detector watches for Xid errors (the driver's
// reports of GPU faults) through an NVML event set, and can set power
// limits where the agent runs with the permission to.
package nvml

import "errors"

var (
	// ErrNoDriver means NVML could not be loaded or started: there is no
	// NVIDIA driver on the machine (or in the container), or its kernel
	// module is not loaded.
	ErrNoDriver = errors.New("no NVIDIA driver found (libnvidia-ml.so.1 could not be loaded)")
	// ErrNoCgo means this binary was built without cgo, which NVML needs.
	ErrNoCgo = errors.New("built without cgo, so NVML cannot be used; using nvidia-smi instead")
)
