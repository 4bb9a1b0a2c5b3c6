// Package auto picks the GPU detector that works on this machine: NVML
// when the binary has cgo and the driver's library loads, else nvidia-smi,
// else an error that tells the owner what to install.
package auto

import (
	"context"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/gpu/nvml"
	"github.com/idlegrid/idlegrid/internal/gpu/smi"
)

// Install is what Detector's error tells the owner to do.
const Install = "install the NVIDIA driver (it brings libnvidia-ml.so.1 and nvidia-smi); " +
	"in a container, run with the NVIDIA Container Toolkit (docker run --gpus all); " +
	"or set fake_gpus in the agent config to try idlegrid without GPUs"

// The detectors tried, in order; tests replace them.
var (
	openNVML = func(ctx context.Context) (gpu.Detector, string, error) {
		d, err := nvml.Open()
		if err != nil {
			return nil, "", err
		}
		return d, "NVML, driver " + d.Driver(), nil
	}
	openSMI = func(ctx context.Context) (gpu.Detector, string, error) {
		d, err := smi.Open(ctx)
		if err != nil {
			return nil, "", err
		}
		return d, "nvidia-smi", nil
	}
)

// Detector returns the first detector that works, NVML then nvidia-smi,
// with a line saying which it is and, for nvidia-smi, why NVML was passed
// over, e.g. "nvidia-smi (NVML: built without cgo, …)". When neither
// works, the error (EUNAVAILABLE) says what each said and what to install.
//
// The detector may hold resources (NVML does): when it implements
// io.Closer, close it when done.
func Detector(ctx context.Context) (gpu.Detector, string, error) {
	d, note, nvmlErr := openNVML(ctx)
	if nvmlErr == nil {
		return d, note, nil
	}
	d, note, smiErr := openSMI(ctx)
	if smiErr == nil {
		return d, note + " (NVML: " + nvmlErr.Error() + ")", nil
	}
	if ctx.Err() != nil {
		return nil, "", ctx.Err()
	}
	return nil, "", &idlegrid.Error{
		Code:    idlegrid.EUNAVAILABLE,
		Message: "cannot see any NVIDIA GPU: NVML: " + nvmlErr.Error() + "; nvidia-smi: " + smiErr.Error() + ". To fix: " + Install,
	}
}
