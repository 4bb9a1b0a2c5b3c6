package fake

import (
	"fmt"

	"github.com/idlegrid/idlegrid/internal/gpu"
)

// Actual is what a simulated GPU really is, for the hardware challenge
// (internal/challenge): the model whose speed it has and the memory it
// lets a workload allocate. By default a fake GPU is what it claims: its
// own model, and its memory less what the driver keeps.
type Actual struct {
	Model  string // a model of gpu.Models
	VRAMMB int    // memory a workload can allocate
}

// AllocatableShare is the share of a GPU's memory a workload can allocate
// by default; the driver and the context keep the rest.
const AllocatableShare = 0.97

// SetActual makes the GPU with uuid lie: it keeps claiming what it claims,
// but performs like actual.Model and lets a workload allocate only
// actual.VRAMMB (0: what actual.Model has). It fails for an unknown GPU
// or model.
func (d *Detector) SetActual(uuid string, actual Actual) error {
	m, ok := gpu.LookupModel(actual.Model)
	if !ok {
		return fmt.Errorf("fake GPU %s: unknown model %q", uuid, actual.Model)
	}
	if err := d.Update(uuid, func(*gpu.Device) {}); err != nil {
		return err
	}
	actual.Model = m.Name
	if actual.VRAMMB == 0 {
		actual.VRAMMB = int(float64(m.VRAMMB) * AllocatableShare)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.actual[uuid] = actual
	return nil
}

// Actual returns what the GPU with uuid really is; ok is false for a GPU
// the detector does not have.
func (d *Detector) Actual(uuid string) (Actual, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a, ok := d.actual[uuid]; ok {
		return a, true
	}
	for _, dev := range d.devices {
		if dev.UUID == uuid {
			return Actual{Model: dev.Model, VRAMMB: int(float64(dev.VRAMMB) * AllocatableShare)}, true
		}
	}
	return Actual{}, false
}
