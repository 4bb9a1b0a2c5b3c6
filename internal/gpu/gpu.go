// Package gpu is the contract for finding a node's GPUs and reading their
// telemetry. Detectors are small adapters named for their technology:
//
//	nvml   NVIDIA's management library, loaded at run time (needs cgo)
//	smi    the nvidia-smi tool's XML report, the fallback
//	fake   simulated GPUs, for development and tests
//
// internal/gpu/auto picks the best one that works on the machine.
package gpu

import (
	"context"
	"fmt"
	"strings"

	"github.com/idlegrid/idlegrid"
)

// Detector lists the GPUs of the machine it runs on, with their telemetry.
// Every call returns the same UUIDs for the same devices, so that a node's
// offer and its leases' GPU claims stay stable across agent restarts. A GPU
// that has fallen off the bus is simply missing from the list; an error
// means the detector could not look at all.
type Detector interface {
	Detect(ctx context.Context) ([]Device, error)
}

// PowerController is implemented by detectors that can cap a GPU's power
// draw. It usually needs root (or CAP_SYS_ADMIN); without it, it fails and
// the GPU keeps its limit.
type PowerController interface {
	// SetPowerLimit asks the GPU with uuid to draw at most watts. The driver
	// allows only limits within the board's range, so the limit applied may
	// differ from watts; it is returned.
	SetPowerLimit(ctx context.Context, uuid string, watts int) (int, error)
}

// Device is one GPU as a detector sees it: what it is (the embedded GPU,
// which goes into the node's offer) and how it is doing. Numbers the driver
// does not report (N/A) are zero.
type Device struct {
	idlegrid.GPU        // canonical model, UUID, VRAM and the fingerprint's PCI IDs, driver and VBIOS
	Index        int    // the driver's index, as nvidia-smi numbers GPUs
	Name         string // the product name the driver reports, e.g. "NVIDIA H100 80GB HBM3"
	Driver       string // driver version, e.g. "550.54.15"
	CUDA         string // the newest CUDA version the driver supports, e.g. "12.4"
	ComputeCap   string // CUDA compute capability, e.g. "9.0"; "" when unknown

	PowerLimitW int // the enforced power limit
	PowerMinW   int // the range the power limit may be set in
	PowerMaxW   int
	PowerDrawW  int
	TempC       int
	UtilPct     int // GPU (SM) utilisation over the driver's last sample period
	MemUsedMB   int

	// Processes are the compute and graphics processes using the GPU, by
	// host PID.
	Processes []Process
	// XidErrors are the Xid error codes the driver reported for this GPU
	// since the detector started, oldest first (see Fault).
	XidErrors []uint64
	// Faults are other reasons the driver gives to distrust the GPU, e.g.
	// "the GPU needs a reset".
	Faults []string
}

// Process is a process using a GPU.
type Process struct {
	PID    int
	Name   string // as the driver reports it: often the executable's path
	UsedMB int    // GPU memory it holds; 0 when unknown
	Kind   ProcessKind
}

// ProcessKind is how a process uses a GPU, as the driver lists it: NVML
// has one list of compute processes and one of graphics processes, and
// nvidia-smi marks each C, G or C+G.
type ProcessKind string

const (
	// ProcessUnknown: the detector could not tell. Count it as compute.
	ProcessUnknown ProcessKind = ""
	// ProcessCompute holds a compute (CUDA) context, whether or not it
	// also draws: a training job, a miner, a game listed as C+G.
	ProcessCompute ProcessKind = "compute"
	// ProcessGraphics holds only a graphics context: a display server, a
	// compositor, a browser's GPU process, a game that only draws.
	ProcessGraphics ProcessKind = "graphics"
)

// GraphicsOnly reports whether p only draws: the driver lists it as a
// graphics process and not as a compute one.
func (p Process) GraphicsOnly() bool { return p.Kind == ProcessGraphics }

// applicationXids are Xid errors that a program, not the hardware, causes
// (a bad memory access, an illegal instruction, a killed context). They
// say nothing about the GPU's health; the same list is ignored by NVIDIA's
// Kubernetes device plugin.
var applicationXids = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true, 109: true}

// Fault says why the GPU should not be offered, or "" when it is healthy:
// an Xid error that is not a program's, or a fault the driver reports.
func (d *Device) Fault() string {
	var xids []string
	for _, x := range d.XidErrors {
		if !applicationXids[x] {
			xids = append(xids, fmt.Sprint(x))
		}
	}
	var out []string
	if len(xids) > 0 {
		out = append(out, "Xid "+strings.Join(xids, ", "))
	}
	out = append(out, d.Faults...)
	return strings.Join(out, "; ")
}

// Clone returns a deep copy of d.
func (d Device) Clone() Device {
	d.Processes = append([]Process(nil), d.Processes...)
	d.XidErrors = append([]uint64(nil), d.XidErrors...)
	d.Faults = append([]string(nil), d.Faults...)
	return d
}
