// Package fake is a GPU detector for development and tests: it reports the
// GPUs named in a spec such as "2xRTX4090" or "1xH100-80GB,4xT4", with
// realistic memory sizes, UUIDs that are stable for a given seed, and the
// telemetry of an idle GPU. Tests turn its knobs (SetUtil, SetTemp,
// SetProcesses, AddXid, Remove) to play an owner coming back, a desktop
// drawing on its GPU (Display), a GPU running hot or failing; it records
// the power limits it is asked to apply.
package fake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu"
)

// Model is a GPU model the fake detector knows.
type Model = gpu.Model

// Models lists the known models, largest first.
var Models = gpu.Models

// MaxGPUs caps a spec; an offer may list at most this many GPUs.
const MaxGPUs = 64

// What the fake driver says about itself.
const (
	Driver = "550.54.15"
	CUDA   = "12.4"
	// VBIOS and PCISubsystemID are the fake boards' fingerprint; the PCI
	// device ID is "fake-" and the model's name.
	VBIOS          = "fake-vbios-1"
	PCISubsystemID = "fake-board"
	// IdleTempC and IdleUtilPct are the telemetry of an idle GPU.
	IdleTempC   = 34
	IdleUtilPct = 0
)

// Detector reports a set of simulated GPUs. It is safe for concurrent use.
type Detector struct {
	mu       sync.Mutex
	devices  []gpu.Device
	removed  map[string]bool
	powerErr error
	limits   []PowerLimit
	actual   map[string]Actual // what a GPU really is, where it lies (actual.go)
}

// PowerLimit records one SetPowerLimit call.
type PowerLimit struct {
	UUID  string
	Watts int
}

var (
	_ gpu.Detector        = (*Detector)(nil)
	_ gpu.PowerController = (*Detector)(nil)
)

// Parse builds a detector from spec, a comma-separated list of COUNTxMODEL
// ("2xRTX4090,1xT4"; the count defaults to 1). Model names are matched
// without regard to case. The seed (the node's public key or name) makes
// the UUIDs: the same spec and seed give the same UUIDs on every run.
func Parse(spec, seed string) (*Detector, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, idlegrid.Invalid("fake_gpus", "empty; name GPUs like 2xRTX4090 or 1xH100-80GB,4xT4")
	}
	d := &Detector{removed: map[string]bool{}, actual: map[string]Actual{}}
	for _, part := range strings.Split(spec, ",") {
		n, m, err := parsePart(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		if len(d.devices)+n > MaxGPUs {
			return nil, idlegrid.Invalid("fake_gpus", "at most %d GPUs in all", MaxGPUs)
		}
		for i := 0; i < n; i++ {
			d.devices = append(d.devices, idleDevice(m, len(d.devices), uuidFor(seed, m.Name, len(d.devices))))
		}
	}
	return d, nil
}

// idleDevice is the telemetry of an idle GPU of model m at index i.
func idleDevice(m Model, i int, uuid string) gpu.Device {
	return gpu.Device{
		GPU: idlegrid.GPU{UUID: uuid, Model: m.Name, VRAMMB: m.VRAMMB,
			PCIBusID: fmt.Sprintf("00000000:%02X:00.0", 0x10+i), PCIDeviceID: "fake-" + m.Name,
			PCISubsystemID: PCISubsystemID, DriverVersion: Driver, VBIOSVersion: VBIOS},
		Index: i, Name: m.Product, Driver: Driver, CUDA: CUDA, ComputeCap: m.ComputeCap,
		PowerLimitW: m.PowerLimitW, PowerMinW: m.PowerLimitW / 3, PowerMaxW: m.PowerLimitW,
		PowerDrawW: max(m.PowerLimitW/12, 8),
		TempC:      IdleTempC, UtilPct: IdleUtilPct, MemUsedMB: 1,
	}
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
func Lookup(name string) (Model, bool) { return gpu.LookupModel(name) }

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

// Detect returns a copy of the GPUs that have not been removed.
func (d *Detector) Detect(ctx context.Context) ([]gpu.Device, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]gpu.Device, 0, len(d.devices))
	for _, dev := range d.devices {
		if !d.removed[dev.UUID] {
			out = append(out, dev.Clone())
		}
	}
	return out, nil
}

// Update changes the GPU with uuid: f gets its telemetry to edit. It fails
// for a UUID the detector does not have.
func (d *Detector) Update(uuid string, f func(*gpu.Device)) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.devices {
		if d.devices[i].UUID == uuid {
			f(&d.devices[i])
			return nil
		}
	}
	return fmt.Errorf("fake GPU %s: no such GPU", uuid)
}

// SetUtil sets a GPU's utilisation in percent.
func (d *Detector) SetUtil(uuid string, pct int) error {
	return d.Update(uuid, func(g *gpu.Device) { g.UtilPct = pct })
}

// SetTemp sets a GPU's temperature in °C.
func (d *Detector) SetTemp(uuid string, c int) error {
	return d.Update(uuid, func(g *gpu.Device) { g.TempC = c })
}

// Display is a desktop's display server and compositor, graphics
// processes holding usedMB of GPU memory between them, for SetProcesses:
// the users a GPU that drives a monitor always has.
func Display(usedMB int) []gpu.Process {
	compositor := usedMB / 5
	return []gpu.Process{
		{PID: 2143, Name: "/usr/lib/xorg/Xorg", UsedMB: usedMB - compositor, Kind: gpu.ProcessGraphics},
		{PID: 2587, Name: "/usr/bin/gnome-shell", UsedMB: compositor, Kind: gpu.ProcessGraphics},
	}
}

// SetProcesses replaces the processes on a GPU; none makes it idle again.
// Each process's Kind says how the driver lists it (see Display).
func (d *Detector) SetProcesses(uuid string, ps ...gpu.Process) error {
	return d.Update(uuid, func(g *gpu.Device) {
		g.Processes = append([]gpu.Process(nil), ps...)
		g.MemUsedMB = 1
		for _, p := range ps {
			g.MemUsedMB += p.UsedMB
		}
	})
}

// AddXid records an Xid error on a GPU, as the driver would report it.
func (d *Detector) AddXid(uuid string, xid uint64) error {
	return d.Update(uuid, func(g *gpu.Device) { g.XidErrors = append(g.XidErrors, xid) })
}

// Remove makes a GPU vanish from Detect, as one that fell off the bus;
// Restore brings it back.
func (d *Detector) Remove(uuid string) { d.setRemoved(uuid, true) }

// Restore undoes Remove.
func (d *Detector) Restore(uuid string) { d.setRemoved(uuid, false) }

func (d *Detector) setRemoved(uuid string, removed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.removed[uuid] = removed
}

// FailPowerLimits makes SetPowerLimit fail with err, as a driver does for
// an agent without root; nil lets it succeed again.
func (d *Detector) FailPowerLimits(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.powerErr = err
}

// SetPowerLimit applies a limit within the GPU's range to its telemetry and
// records it, unless FailPowerLimits made it fail.
func (d *Detector) SetPowerLimit(ctx context.Context, uuid string, watts int) (int, error) {
	d.mu.Lock()
	err := d.powerErr
	d.mu.Unlock()
	if err != nil {
		return 0, err
	}
	applied := 0
	err = d.Update(uuid, func(g *gpu.Device) {
		applied = min(max(watts, g.PowerMinW), g.PowerMaxW)
		g.PowerLimitW, g.PowerDrawW = applied, min(g.PowerDrawW, applied)
	})
	if err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.limits = append(d.limits, PowerLimit{UUID: uuid, Watts: applied})
	return applied, nil
}

// PowerLimits lists the power limits applied so far, in order.
func (d *Detector) PowerLimits() []PowerLimit {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]PowerLimit(nil), d.limits...)
}
