package smi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/gpu/smi"
)

func mustRead(tb testing.TB, name string) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func mustParse(tb testing.TB, name string) []gpu.Device {
	tb.Helper()
	devs, err := smi.Parse(mustRead(tb, name))
	if err != nil {
		tb.Fatalf("Parse(%s): %v", name, err)
	}
	return devs
}

func TestParse(t *testing.T) {
	t.Run("H100x8", func(t *testing.T) {
		devs := mustParse(t, "h100-sxm-8x.xml")
		if len(devs) != 8 {
			t.Fatalf("%d GPUs, want 8", len(devs))
		}
		want := gpu.Device{
			GPU: idlegrid.GPU{UUID: "GPU-5b1a6e2c-0f3d-8e47-a1c9-2d7e4b9f6a10", Model: "H100-80GB", VRAMMB: 81559,
				PCIBusID: "00000000:18:00.0", PCIDeviceID: "233010DE", PCISubsystemID: "16C110DE",
				DriverVersion: "555.42.06", VBIOSVersion: "96.00.74.00.01"},
			Index: 0, Name: "NVIDIA H100 80GB HBM3", Driver: "555.42.06", CUDA: "12.5", ComputeCap: "9.0",
			PowerLimitW: 700, PowerMinW: 200, PowerMaxW: 700, PowerDrawW: 71,
			TempC: 29, UtilPct: 0, MemUsedMB: 1,
		}
		if diff := cmp.Diff(want, devs[0]); diff != "" {
			t.Errorf("GPU 0 (-want +got):\n%s", diff)
		}
		busy := devs[2]
		if busy.UtilPct != 100 || busy.TempC != 58 || busy.PowerDrawW != 612 || busy.MemUsedMB != 71846 {
			t.Errorf("GPU 2 = %+v, want the training job's telemetry", busy)
		}
		if want := []gpu.Process{{PID: 3911802, Name: "/usr/bin/python3", UsedMB: 71830, Kind: gpu.ProcessCompute}}; !cmp.Equal(want, busy.Processes) {
			t.Errorf("GPU 2 processes = %+v, want %+v", busy.Processes, want)
		}
		for i, d := range devs {
			fault := d.Fault()
			if i == 5 {
				for _, w := range []string{"needs a reset", "row remap is pending"} {
					if !strings.Contains(fault, w) {
						t.Errorf("GPU 5 fault = %q, want it to mention %q", fault, w)
					}
				}
			} else if fault != "" {
				t.Errorf("GPU %d fault = %q, want healthy", i, fault)
			}
			if d.Index != i || d.Model != "H100-80GB" {
				t.Errorf("GPU %d: index %d model %q", i, d.Index, d.Model)
			}
		}
		if got := devs[7].PCIBusID; got != "00000000:DB:00.0" {
			t.Errorf("GPU 7 bus ID = %q", got)
		}
	})
	t.Run("RTX4090Desktop", func(t *testing.T) {
		devs := mustParse(t, "rtx4090-desktop.xml")
		if len(devs) != 1 {
			t.Fatalf("%d GPUs, want 1", len(devs))
		}
		d := devs[0]
		if d.Model != "RTX4090" || d.VRAMMB != 24564 || d.ComputeCap != "8.9" || d.UtilPct != 97 || d.TempC != 71 ||
			d.PowerLimitW != 450 || d.PowerMinW != 150 || d.PowerMaxW != 600 || d.PowerDrawW != 402 || d.Fault() != "" {
			t.Errorf("device = %+v", d)
		}
		if len(d.Processes) != 4 {
			t.Fatalf("processes = %+v, want 4", d.Processes)
		}
		var names []string
		for _, p := range d.Processes[:3] {
			names = append(names, filepath.Base(strings.Fields(p.Name)[0]))
		}
		if got, want := strings.Join(names, ","), "Xorg,gnome-shell,chrome"; got != want {
			t.Errorf("processes = %s, want %s", got, want)
		}
		for _, p := range d.Processes[:3] {
			if !p.GraphicsOnly() {
				t.Errorf("%s is %q, want graphics (G)", p.Name, p.Kind)
			}
		}
		if game := d.Processes[3]; game.PID != 48721 || game.UsedMB != 15040 || game.Kind != gpu.ProcessCompute ||
			!strings.HasSuffix(game.Name, "/Cyberpunk 2077/bin/x64/Cyberpunk2077.exe") {
			t.Errorf("game = %+v, want the C+G game counted as compute", game)
		}
	})
	t.Run("T4InContainer", func(t *testing.T) {
		devs := mustParse(t, "t4-container.xml")
		want := []gpu.Device{{
			GPU: idlegrid.GPU{UUID: "GPU-6f1e0a52-3b7c-94d8-e2a1-5c0b9d7e4f36", Model: "T4", VRAMMB: 15109,
				PCIBusID: "00000000:00:04.0", PCIDeviceID: "1EB810DE", PCISubsystemID: "12A210DE",
				DriverVersion: "470.223.02", VBIOSVersion: "90.04.96.00.02"},
			Index: 0, Name: "Tesla T4", Driver: "470.223.02", CUDA: "11.4", ComputeCap: "7.5",
			PowerLimitW: 70, PowerMinW: 60, PowerMaxW: 70, PowerDrawW: 10,
			TempC: 38, MemUsedMB: 58,
			// inside a container, nvidia-smi cannot name host processes
			Processes: []gpu.Process{{PID: 41394, Name: "", UsedMB: 56, Kind: gpu.ProcessCompute}},
		}}
		if diff := cmp.Diff(want, devs); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("NotApplicable", func(t *testing.T) {
		devs, err := smi.Parse([]byte(`<nvidia_smi_log><driver_version>N/A</driver_version><gpu id="0">
			<product_name>NVIDIA Graphics Device</product_name><uuid>GPU-x</uuid>
			<fb_memory_usage><total>[N/A]</total></fb_memory_usage><temperature><gpu_temp>N/A</gpu_temp></temperature>
			<utilization><gpu_util>[Not Supported]</gpu_util></utilization>
			<gpu_power_readings><power_draw>N/A</power_draw><instant_power_draw>55.5 W</instant_power_draw></gpu_power_readings>
			<processes><process_info><pid>N/A</pid></process_info><process_info><pid>7</pid><used_memory>N/A</used_memory></process_info></processes>
			</gpu><gpu><product_name>lost</product_name><uuid>N/A</uuid></gpu></nvidia_smi_log>`))
		if err != nil {
			t.Fatal(err)
		}
		want := []gpu.Device{{
			GPU: idlegrid.GPU{UUID: "GPU-x", Model: "Graphics-Device", PCIBusID: "0"}, Name: "NVIDIA Graphics Device",
			PowerDrawW: 56, Processes: []gpu.Process{{PID: 7}},
		}}
		if diff := cmp.Diff(want, devs); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("NoGPUs", func(t *testing.T) {
		devs, err := smi.Parse([]byte(`<?xml version="1.0" ?><nvidia_smi_log><attached_gpus>0</attached_gpus></nvidia_smi_log>`))
		if err != nil || len(devs) != 0 {
			t.Errorf("Parse = %v, %v; want no GPUs and no error", devs, err)
		}
	})
}

func TestParse_Errors(t *testing.T) {
	for _, in := range []string{
		"",
		"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
		"<html></html>",
		"<nvidia_smi_log><gpu>",
	} {
		if _, err := smi.Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%q): got nil error", in)
		}
	}
}

func FuzzParse(f *testing.F) {
	// The 8×H100 report is left out: at 86 KB it slows the fuzzer to a crawl.
	for _, name := range []string{"rtx4090-desktop.xml", "t4-container.xml"} {
		f.Add(mustRead(f, name))
	}
	f.Add([]byte(`<nvidia_smi_log><gpu><uuid>GPU-1</uuid><fb_memory_usage><total>1e309 MiB</total></fb_memory_usage></gpu></nvidia_smi_log>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		devs, err := smi.Parse(data)
		if err != nil {
			return
		}
		for _, d := range devs {
			if !strings.HasPrefix(d.UUID, "GPU-") || d.Model == "" || len(d.Model) > gpu.MaxModelName {
				t.Fatalf("device %+v: bad UUID or model", d)
			}
			if d.VRAMMB < 0 || d.TempC < 0 || d.UtilPct < 0 || d.PowerDrawW < 0 || d.PowerLimitW < 0 {
				t.Fatalf("device %+v: negative telemetry", d)
			}
			for _, p := range d.Processes {
				if p.PID <= 0 {
					t.Fatalf("process %+v: bad PID", p)
				}
			}
		}
	})
}

// fakeSMI writes an executable that plays nvidia-smi: it prints file (from
// testdata) for -q -x, or runs script.
func fakeSMI(tb testing.TB, script string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "nvidia-smi")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		tb.Fatal(err)
	}
	return path
}

func TestDetector_Detect(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh to play nvidia-smi:", err)
	}
	abs, _ := filepath.Abs("testdata/rtx4090-desktop.xml")
	ctx := context.Background()
	t.Run("Report", func(t *testing.T) {
		d := &smi.Detector{Path: fakeSMI(t, `[ "$*" = "-q -x" ] || exit 3; cat '`+abs+`'`)}
		devs, err := d.Detect(ctx)
		if err != nil || len(devs) != 1 || devs[0].Model != "RTX4090" {
			t.Errorf("Detect = %v, %v; want the RTX 4090", devs, err)
		}
	})
	t.Run("NoDriver", func(t *testing.T) {
		d := &smi.Detector{Path: fakeSMI(t, `echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."; exit 9`)}
		_, err := d.Detect(ctx)
		if err == nil || !strings.Contains(err.Error(), "couldn't communicate with the NVIDIA driver") || !strings.Contains(err.Error(), "exit status 9") {
			t.Errorf("Detect error = %v, want nvidia-smi's own words and its exit status", err)
		}
	})
	t.Run("OneGPULost", func(t *testing.T) {
		d := &smi.Detector{Path: fakeSMI(t, `cat '`+abs+`'; echo "Unable to determine the device handle for GPU0000:02:00.0: GPU is lost." >&2; exit 15`)}
		devs, err := d.Detect(ctx)
		if err != nil || len(devs) != 1 {
			t.Errorf("Detect = %v, %v; want the GPU that answered", devs, err)
		}
	})
	t.Run("Hung", func(t *testing.T) {
		d := &smi.Detector{Path: fakeSMI(t, `exec sleep 60`), Timeout: 50 * time.Millisecond}
		began := time.Now()
		_, err := d.Detect(ctx)
		if err == nil || !strings.Contains(err.Error(), "no answer within 50ms") {
			t.Errorf("Detect error = %v, want a timeout", err)
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Errorf("Detect took %v after its timeout", took)
		}
	})
	t.Run("NotInstalled", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := (&smi.Detector{}).Detect(ctx)
		if err == nil || !strings.Contains(err.Error(), "nvidia-smi not found") {
			t.Errorf("Detect error = %v, want nvidia-smi not found", err)
		}
	})
}

func TestDetector_SetPowerLimit(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh to play nvidia-smi:", err)
	}
	ctx := context.Background()
	uuid := "GPU-3d9a1f64-2c8b-7e05-9b41-6a0c5d2e8f73"
	t.Run("Applied", func(t *testing.T) {
		d := &smi.Detector{Path: fakeSMI(t, `[ "$*" = "-i `+uuid+` -pl 300" ] || exit 3
echo "Power limit for GPU 00000000:01:00.0 was set to 300.00 W from 450.00 W."
echo "All done."`)}
		if w, err := d.SetPowerLimit(ctx, uuid, 300); err != nil || w != 300 {
			t.Errorf("SetPowerLimit = %d, %v; want 300", w, err)
		}
	})
	t.Run("NotRoot", func(t *testing.T) {
		d := &smi.Detector{Path: fakeSMI(t, `echo "Changing power management limit is not supported in current scope for GPU: 00000000:01:00.0."
echo "Treating as warning and moving on."
echo "Insufficient Permissions"; exit 4`)}
		if _, err := d.SetPowerLimit(ctx, uuid, 300); err == nil || !strings.Contains(err.Error(), "Insufficient Permissions") {
			t.Errorf("SetPowerLimit error = %v, want nvidia-smi's complaint", err)
		}
	})
	t.Run("BadUUID", func(t *testing.T) {
		d := &smi.Detector{Path: fakeSMI(t, `exit 0`)}
		if _, err := d.SetPowerLimit(ctx, "-r", 300); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Errorf("SetPowerLimit(\"-r\") error = %v, want invalid", err)
		}
	})
}
