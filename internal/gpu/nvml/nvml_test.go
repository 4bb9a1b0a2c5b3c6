//go:build cgo

package nvml_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	nv "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/gpu/nvml"
)

// node is a mocked 8×H100 machine with the telemetry NVML would report.
type node struct {
	*server.Server
	events chan nv.EventData // Xid events the mocked driver reports
	limits map[int]uint32    // GPU index → power limit set, mW
	root   bool              // whether setting power limits is permitted
}

func newNode(tb testing.TB) *node {
	tb.Helper()
	n := &node{Server: dgxh100.New(), events: make(chan nv.EventData, 8), limits: map[int]uint32{}, root: true}
	n.SystemGetProcessNameFunc = func(pid int) (string, nv.Return) {
		switch pid {
		case 4242:
			return "/usr/bin/python3", nv.SUCCESS
		case 2143:
			return "/usr/lib/xorg/Xorg", nv.SUCCESS
		}
		return "", nv.ERROR_NOT_FOUND
	}
	n.EventSetCreateFunc = func() (nv.EventSet, nv.Return) {
		return &mock.EventSet{
			WaitFunc: func(ms uint32) (nv.EventData, nv.Return) {
				select {
				case ev := <-n.events:
					return ev, nv.SUCCESS
				case <-time.After(time.Duration(ms) * time.Millisecond):
					return nv.EventData{}, nv.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nv.Return { return nv.SUCCESS },
		}, nv.SUCCESS
	}
	for i, h := range n.Devices {
		n.wire(i, h.(*server.Device))
	}
	return n
}

func (n *node) wire(i int, d *server.Device) {
	d.MemoryInfo.Used = 512 << 20
	d.GetPciInfoFunc = func() (nv.PciInfo, nv.Return) {
		return nv.PciInfo{Domain: 0, Bus: uint32(0x18 + 0x10*i), PciDeviceId: 0x233010DE, PciSubSystemId: 0x16C110DE}, nv.SUCCESS
	}
	d.GetVbiosVersionFunc = func() (string, nv.Return) { return "96.00.74.00.01", nv.SUCCESS }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nv.Return) {
		if mw, ok := n.limits[i]; ok {
			return mw, nv.SUCCESS
		}
		return 700_000, nv.SUCCESS
	}
	d.GetPowerManagementLimitConstraintsFunc = func() (uint32, uint32, nv.Return) { return 200_000, 700_000, nv.SUCCESS }
	d.GetPowerUsageFunc = func() (uint32, nv.Return) { return 71_220, nv.SUCCESS }
	d.GetTemperatureFunc = func(nv.TemperatureSensors) (uint32, nv.Return) { return uint32(30 + i), nv.SUCCESS }
	d.GetUtilizationRatesFunc = func() (nv.Utilization, nv.Return) { return nv.Utilization{Gpu: uint32(i * 10)}, nv.SUCCESS }
	d.GetComputeRunningProcessesFunc = func() ([]nv.ProcessInfo, nv.Return) {
		if i != 2 {
			return nil, nv.SUCCESS
		}
		return []nv.ProcessInfo{{Pid: 4242, UsedGpuMemory: 70_000 << 20}, {Pid: 5151, UsedGpuMemory: ^uint64(0)}}, nv.SUCCESS
	}
	d.GetGraphicsRunningProcessesFunc = func() ([]nv.ProcessInfo, nv.Return) {
		if i != 2 {
			return nil, nv.ERROR_NOT_SUPPORTED
		}
		// A C+G process is listed twice; a compositor only here.
		return []nv.ProcessInfo{{Pid: 4242, UsedGpuMemory: 70_000 << 20}, {Pid: 2143, UsedGpuMemory: 312 << 20}}, nv.SUCCESS
	}
	d.GetSupportedEventTypesFunc = func() (uint64, nv.Return) {
		return nv.EventTypeXidCriticalError | nv.EventTypeSingleBitEccError, nv.SUCCESS
	}
	d.RegisterEventsFunc = func(uint64, nv.EventSet) nv.Return { return nv.SUCCESS }
	d.SetPowerManagementLimitFunc = func(mw uint32) nv.Return {
		if !n.root {
			return nv.ERROR_NO_PERMISSION
		}
		n.limits[i] = mw
		return nv.SUCCESS
	}
}

func mustNew(tb testing.TB, lib nv.Interface) *nvml.Detector {
	tb.Helper()
	d, err := nvml.New(lib)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

func mustDetect(tb testing.TB, d *nvml.Detector) []gpu.Device {
	tb.Helper()
	devs, err := d.Detect(context.Background())
	if err != nil {
		tb.Fatalf("Detect: %v", err)
	}
	return devs
}

func TestOpen_NoDriver(t *testing.T) {
	d, err := nvml.Open()
	if err == nil {
		d.Close()
		t.Skip("this machine has an NVIDIA driver")
	}
	if !errors.Is(err, nvml.ErrNoDriver) || !strings.Contains(err.Error(), "no NVIDIA driver found") {
		t.Errorf("Open error = %v, want %v", err, nvml.ErrNoDriver)
	}
}

func TestNew_InitErrors(t *testing.T) {
	tests := []struct {
		ret  nv.Return
		want string
	}{
		{nv.ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver found"},
		{nv.ERROR_DRIVER_NOT_LOADED, "kernel module is not loaded"},
		{nv.ERROR_NO_PERMISSION, "no permission"},
		{nv.ERROR_UNKNOWN, "NVML: start"},
	}
	for _, tt := range tests {
		t.Run(tt.ret.String(), func(t *testing.T) {
			lib := &mock.Interface{InitFunc: func() nv.Return { return tt.ret }}
			_, err := nvml.New(lib)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error = %v, want it to say %q", err, tt.want)
			}
			if noDriver := tt.ret == nv.ERROR_LIBRARY_NOT_FOUND || tt.ret == nv.ERROR_DRIVER_NOT_LOADED; errors.Is(err, nvml.ErrNoDriver) != noDriver {
				t.Errorf("errors.Is(%v, ErrNoDriver) = %v, want %v", err, !noDriver, noDriver)
			}
		})
	}
}

func TestDetector_Detect(t *testing.T) {
	synctest.Test(t, testDetect)
}

// testDetect runs in a bubble, where the mocked event wait takes no time.
func testDetect(t *testing.T) {
	n := newNode(t)
	d := mustNew(t, n)
	devs := mustDetect(t, d)
	if len(devs) != 8 {
		t.Fatalf("%d GPUs, want 8", len(devs))
	}
	want := gpu.Device{
		Index: 2, Name: "NVIDIA H100 80GB HBM3", Driver: "550.54.15", CUDA: "12.4", ComputeCap: "9.0",
		PowerLimitW: 700, PowerMinW: 200, PowerMaxW: 700, PowerDrawW: 71,
		TempC: 32, UtilPct: 20, MemUsedMB: 512,
		Processes: []gpu.Process{{PID: 4242, Name: "/usr/bin/python3", UsedMB: 70_000, Kind: gpu.ProcessCompute},
			{PID: 5151, Kind: gpu.ProcessCompute}, {PID: 2143, Name: "/usr/lib/xorg/Xorg", UsedMB: 312, Kind: gpu.ProcessGraphics}},
	}
	want.UUID, want.Model, want.VRAMMB = n.Devices[2].(*server.Device).UUID, "H100-80GB", 81920
	want.PCIBusID, want.PCIDeviceID, want.PCISubsystemID = "00000000:38:00.0", "233010DE", "16C110DE"
	want.DriverVersion, want.VBIOSVersion = "550.54.15", "96.00.74.00.01"
	if diff := cmp.Diff(want, devs[2]); diff != "" {
		t.Errorf("GPU 2 (-want +got):\n%s", diff)
	}
	if d.Driver() != "550.54.15" || d.XidNote() != "" {
		t.Errorf("Driver = %q, XidNote = %q; want 550.54.15 and Xids watched", d.Driver(), d.XidNote())
	}
}

func TestDetector_LostGPU(t *testing.T) {
	synctest.Test(t, testLostGPU)
}

func testLostGPU(t *testing.T) {
	n := newNode(t)
	get := n.DeviceGetHandleByIndexFunc
	lost := false
	n.DeviceGetHandleByIndexFunc = func(i int) (nv.Device, nv.Return) {
		if lost && i == 4 {
			return nil, nv.ERROR_GPU_IS_LOST
		}
		return get(i)
	}
	d := mustNew(t, n)
	lost = true
	devs := mustDetect(t, d)
	if len(devs) != 7 {
		t.Fatalf("%d GPUs, want 7 without the lost one", len(devs))
	}
	for _, dev := range devs {
		if dev.Index == 4 {
			t.Errorf("the lost GPU was reported: %+v", dev)
		}
	}
}

func TestDetector_Xid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t)
		d := mustNew(t, n)
		n.events <- nv.EventData{Device: n.Devices[3], EventType: nv.EventTypeXidCriticalError, EventData: 79}
		n.events <- nv.EventData{Device: n.Devices[3], EventType: nv.EventTypeSingleBitEccError, EventData: 1}
		n.events <- nv.EventData{Device: n.Devices[5], EventType: nv.EventTypeXidCriticalError, EventData: 13}
		synctest.Wait()
		devs := mustDetect(t, d)
		for i, dev := range devs {
			want := ""
			if i == 3 {
				want = "Xid 79"
			}
			if got := dev.Fault(); got != want {
				t.Errorf("GPU %d fault = %q, want %q", i, got, want)
			}
		}
		if got := devs[5].XidErrors; len(got) != 1 || got[0] != 13 {
			t.Errorf("GPU 5 Xids = %v, want [13], recorded though a program's", got)
		}
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

func TestDetector_XidUnsupported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t)
		n.EventSetCreateFunc = func() (nv.EventSet, nv.Return) { return nil, nv.ERROR_NOT_SUPPORTED }
		d := mustNew(t, n)
		if !strings.Contains(d.XidNote(), "not supported") {
			t.Errorf("XidNote = %q, want it to say Xid events are not supported", d.XidNote())
		}
		if devs := mustDetect(t, d); len(devs) != 8 {
			t.Errorf("%d GPUs, want 8 without Xid events", len(devs))
		}
	})
}

func TestDetector_SetPowerLimit(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		watts, want int
	}{
		{450, 450},
		{100, 200}, // below the board's minimum
		{900, 700},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.watts), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newNode(t)
				d := mustNew(t, n)
				uuid := n.Devices[1].(*server.Device).UUID
				got, err := d.SetPowerLimit(ctx, uuid, tt.watts)
				if err != nil || got != tt.want || n.limits[1] != uint32(tt.want*1000) {
					t.Errorf("SetPowerLimit(%d) = %d, %v (driver has %d mW); want %d W", tt.watts, got, err, n.limits[1], tt.want)
				}
				if devs := mustDetect(t, d); devs[1].PowerLimitW != tt.want {
					t.Errorf("limit after = %d W, want %d", devs[1].PowerLimitW, tt.want)
				}
			})
		})
	}
	t.Run("NotRoot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			n := newNode(t)
			n.root = false
			d := mustNew(t, n)
			_, err := d.SetPowerLimit(ctx, n.Devices[0].(*server.Device).UUID, 300)
			if err == nil || !strings.Contains(err.Error(), "needs root") {
				t.Errorf("SetPowerLimit error = %v, want it to say root is needed", err)
			}
		})
	})
	t.Run("UnknownGPU", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := mustNew(t, newNode(t))
			if _, err := d.SetPowerLimit(ctx, "GPU-nope", 300); err == nil {
				t.Error("SetPowerLimit of an unknown GPU: got nil error")
			}
		})
	})
}
