//go:build cgo

package nvml

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	nv "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu"
)

// xidWait is how long one wait for Xid events blocks; it bounds how long
// Close waits for the watcher to notice.
const xidWait = 1000 // ms

// maxXids caps the Xid errors remembered per GPU.
const maxXids = 32

// Detector reads GPUs through NVML. Make one with Open and Close it.
type Detector struct {
	lib          nv.Interface
	driver, cuda string

	mu   sync.Mutex
	xids map[string][]uint64 // GPU UUID → Xid errors seen, oldest first
	// XidNote says why Xid errors are not watched, or "".
	xidNote string

	stop      chan struct{}
	done      chan struct{} // closed when the Xid watcher has ended
	closeOnce sync.Once
}

var (
	_ gpu.Detector        = (*Detector)(nil)
	_ gpu.PowerController = (*Detector)(nil)
)

// Open loads NVML and starts a detector on it. Without a driver it fails
// with an error that wraps ErrNoDriver.
func Open() (*Detector, error) { return New(nv.New()) }

// New starts a detector on lib (tests pass a mock): it initializes lib,
// reads the driver's versions and starts watching for Xid errors. Close
// stops the watcher and shuts lib down.
func New(lib nv.Interface) (*Detector, error) {
	switch ret := lib.Init(); ret {
	case nv.SUCCESS:
	case nv.ERROR_LIBRARY_NOT_FOUND:
		return nil, ErrNoDriver
	case nv.ERROR_DRIVER_NOT_LOADED:
		return nil, fmt.Errorf("%w: the NVIDIA kernel module is not loaded", ErrNoDriver)
	case nv.ERROR_NO_PERMISSION:
		return nil, fmt.Errorf("NVML: no permission to open the GPU devices (/dev/nvidia*): %v", ret)
	default:
		return nil, fmt.Errorf("NVML: start: %v", ret)
	}
	d := &Detector{lib: lib, xids: map[string][]uint64{}, stop: make(chan struct{}), done: make(chan struct{})}
	d.driver, _ = lib.SystemGetDriverVersion()
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == nv.SUCCESS && v > 0 {
		d.cuda = fmt.Sprintf("%d.%d", v/1000, v%1000/10) // 12040 → "12.4"
	}
	d.watchXids()
	return d, nil
}

// Driver is the driver's version, e.g. "550.54.15".
func (d *Detector) Driver() string { return d.driver }

// XidNote says why Xid errors are not being watched, or "" when they are.
func (d *Detector) XidNote() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.xidNote
}

// Close stops watching for Xid errors and shuts NVML down.
func (d *Detector) Close() error {
	var err error
	d.closeOnce.Do(func() {
		close(d.stop)
		<-d.done
		if ret := d.lib.Shutdown(); ret != nv.SUCCESS {
			err = fmt.Errorf("NVML: shut down: %v", ret)
		}
	})
	return err
}

// Detect reads every GPU NVML can reach. A GPU whose handle or UUID cannot
// be read (one that fell off the bus reports ERROR_GPU_IS_LOST) is left out.
func (d *Detector) Detect(ctx context.Context) ([]gpu.Device, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n, ret := d.lib.DeviceGetCount()
	if ret != nv.SUCCESS {
		return nil, fmt.Errorf("NVML: count GPUs: %v", ret)
	}
	devs := make([]gpu.Device, 0, n)
	for i := 0; i < n; i++ {
		h, ret := d.lib.DeviceGetHandleByIndex(i)
		if ret != nv.SUCCESS {
			continue
		}
		if dev, ok := d.device(i, h); ok {
			devs = append(devs, dev)
		}
	}
	return devs, nil
}

// device reads one GPU. Values NVML does not report stay zero.
func (d *Detector) device(i int, h nv.Device) (gpu.Device, bool) {
	uuid, ret := h.GetUUID()
	if ret != nv.SUCCESS || !strings.HasPrefix(uuid, "GPU-") {
		return gpu.Device{}, false
	}
	name, _ := h.GetName()
	dev := gpu.Device{Index: i, Name: name, Driver: d.driver, CUDA: d.cuda}
	dev.UUID, dev.DriverVersion = uuid, gpu.Version(d.driver)
	if mem, ret := h.GetMemoryInfo(); ret == nv.SUCCESS {
		dev.VRAMMB, dev.MemUsedMB = int(mem.Total>>20), int(mem.Used>>20)
	}
	dev.Model = gpu.ModelName(name, dev.VRAMMB)
	if major, minor, ret := h.GetCudaComputeCapability(); ret == nv.SUCCESS {
		dev.ComputeCap = fmt.Sprintf("%d.%d", major, minor)
	}
	if pci, ret := h.GetPciInfo(); ret == nv.SUCCESS {
		dev.PCIBusID = busID(pci)
		dev.PCIDeviceID, dev.PCISubsystemID = gpu.PCIIDOf(pci.PciDeviceId), gpu.PCIIDOf(pci.PciSubSystemId)
	}
	if v, ret := h.GetVbiosVersion(); ret == nv.SUCCESS {
		dev.VBIOSVersion = gpu.Version(v)
	}
	if mw, ret := h.GetEnforcedPowerLimit(); ret == nv.SUCCESS {
		dev.PowerLimitW = watts(mw)
	}
	if lo, hi, ret := h.GetPowerManagementLimitConstraints(); ret == nv.SUCCESS {
		dev.PowerMinW, dev.PowerMaxW = watts(lo), watts(hi)
	}
	if mw, ret := h.GetPowerUsage(); ret == nv.SUCCESS {
		dev.PowerDrawW = watts(mw)
	}
	if c, ret := h.GetTemperature(nv.TEMPERATURE_GPU); ret == nv.SUCCESS {
		dev.TempC = int(c)
	}
	if u, ret := h.GetUtilizationRates(); ret == nv.SUCCESS {
		dev.UtilPct = int(u.Gpu)
	}
	dev.Processes = d.processes(h)
	d.mu.Lock()
	dev.XidErrors = append([]uint64(nil), d.xids[uuid]...)
	d.mu.Unlock()
	return dev, true
}

// processes lists the compute and graphics processes on a GPU, once each,
// with their kind: a process in both lists (a game that also computes)
// is listed first as compute, and stays compute.
func (d *Detector) processes(h nv.Device) []gpu.Process {
	var out []gpu.Process
	seen := map[uint32]bool{}
	lists := []struct {
		kind gpu.ProcessKind
		list func() ([]nv.ProcessInfo, nv.Return)
	}{{gpu.ProcessCompute, h.GetComputeRunningProcesses}, {gpu.ProcessGraphics, h.GetGraphicsRunningProcesses}}
	for _, l := range lists {
		ps, ret := l.list()
		if ret != nv.SUCCESS {
			continue
		}
		for _, p := range ps {
			if p.Pid == 0 || seen[p.Pid] {
				continue
			}
			seen[p.Pid] = true
			name, _ := d.lib.SystemGetProcessName(int(p.Pid)) // fails in a container that cannot see the host's processes
			used := 0
			if p.UsedGpuMemory != ^uint64(0) && p.UsedGpuMemory>>20 < 1<<30 { // all ones: NVML_VALUE_NOT_AVAILABLE
				used = int(p.UsedGpuMemory >> 20)
			}
			out = append(out, gpu.Process{PID: int(p.Pid), Name: name, UsedMB: used, Kind: l.kind})
		}
	}
	return out
}

// busID formats a PCI address as nvidia-smi does, e.g. "00000000:18:00.0".
func busID(p nv.PciInfo) string {
	var b strings.Builder
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	if b.Len() > 0 {
		return b.String()
	}
	return fmt.Sprintf("%08X:%02X:%02X.0", p.Domain, p.Bus, p.Device)
}

func watts(milliwatts uint32) int { return int((milliwatts + 500) / 1000) }

// SetPowerLimit sets a GPU's power limit, clamped to the range the board
// allows. It needs root; without it NVML answers ERROR_NO_PERMISSION.
func (d *Detector) SetPowerLimit(ctx context.Context, uuid string, w int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	h, ret := d.lib.DeviceGetHandleByUUID(uuid)
	if ret != nv.SUCCESS {
		return 0, idlegrid.Errorf(idlegrid.ENOTFOUND, "GPU %s: %v", uuid, ret)
	}
	mw := uint32(max(w, 1)) * 1000
	if lo, hi, ret := h.GetPowerManagementLimitConstraints(); ret == nv.SUCCESS {
		mw = min(max(mw, lo), hi)
	}
	switch ret := h.SetPowerManagementLimit(mw); ret {
	case nv.SUCCESS:
		return watts(mw), nil
	case nv.ERROR_NO_PERMISSION:
		return 0, fmt.Errorf("GPU %s: setting a power limit needs root: %v", uuid, ret)
	default:
		return 0, fmt.Errorf("GPU %s: set power limit to %d W: %v", uuid, watts(mw), ret)
	}
}

// watchXids registers every GPU that supports it for Xid events and starts
// the goroutine that records them; Close stops it. Where events are not
// supported the detector works without them, and XidNote says why.
func (d *Detector) watchXids() {
	set, err := d.registerXids()
	if err != nil {
		d.xidNote = err.Error()
		close(d.done)
		return
	}
	go func() {
		defer close(d.done)
		defer set.Free()
		for {
			select {
			case <-d.stop:
				return
			default:
			}
			ev, ret := set.Wait(xidWait)
			switch {
			case ret == nv.ERROR_TIMEOUT:
			case ret != nv.SUCCESS:
				// A broken wait would spin; give up on Xids rather.
				d.mu.Lock()
				d.xidNote = fmt.Sprintf("waiting for Xid events failed: %v", ret)
				d.mu.Unlock()
				return
			case ev.EventType&nv.EventTypeXidCriticalError != 0 && ev.Device != nil:
				d.recordXid(ev)
			}
		}
	}()
}

func (d *Detector) registerXids() (nv.EventSet, error) {
	set, ret := d.lib.EventSetCreate()
	if ret != nv.SUCCESS {
		return nil, fmt.Errorf("Xid events are not supported: %v", ret)
	}
	n, _ := d.lib.DeviceGetCount()
	registered := 0
	for i := 0; i < n; i++ {
		h, ret := d.lib.DeviceGetHandleByIndex(i)
		if ret != nv.SUCCESS {
			continue
		}
		if types, ret := h.GetSupportedEventTypes(); ret != nv.SUCCESS || types&nv.EventTypeXidCriticalError == 0 {
			continue
		}
		if h.RegisterEvents(nv.EventTypeXidCriticalError, set) == nv.SUCCESS {
			registered++
		}
	}
	if registered == 0 {
		set.Free()
		return nil, errors.New("no GPU supports Xid events")
	}
	return set, nil
}

func (d *Detector) recordXid(ev nv.EventData) {
	uuid, ret := ev.Device.GetUUID()
	if ret != nv.SUCCESS {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	xs := append(d.xids[uuid], ev.EventData)
	if len(xs) > maxXids {
		xs = xs[len(xs)-maxXids:]
	}
	d.xids[uuid] = xs
}
