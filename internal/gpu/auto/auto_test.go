package auto

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/gpu/fake"
	"github.com/idlegrid/idlegrid/internal/gpu/nvml"
)

// noDriverHere skips when this machine has an NVIDIA driver: these tests
// are about machines without one.
func noDriverHere(t *testing.T) {
	t.Helper()
	if d, err := nvml.Open(); err == nil {
		d.Close()
		t.Skip("this machine has an NVIDIA driver")
	}
}

// fakeSMIOnPath puts an nvidia-smi on PATH that prints a recorded report.
func fakeSMIOnPath(t *testing.T) {
	t.Helper()
	report, err := filepath.Abs("../smi/testdata/rtx4090-desktop.xml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte("#!/bin/sh\ncat '"+report+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func TestDetector_ThisMachine(t *testing.T) {
	noDriverHere(t)
	t.Run("Nothing", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		d, _, err := Detector(context.Background())
		if d != nil || idlegrid.ErrorCode(err) != idlegrid.EUNAVAILABLE {
			t.Fatalf("Detector = %v, %v; want none and an unavailable error", d, err)
		}
		for _, want := range []string{"NVML: ", "nvidia-smi: nvidia-smi not found", "install the NVIDIA driver", "fake_gpus"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if !strings.Contains(err.Error(), "no NVIDIA driver found") && !strings.Contains(err.Error(), "built without cgo") {
			t.Errorf("error %q does not say why NVML failed", err)
		}
	})
	t.Run("FallsBackToSMI", func(t *testing.T) {
		fakeSMIOnPath(t)
		d, note, err := Detector(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(note, "nvidia-smi (NVML: ") {
			t.Errorf("note = %q, want nvidia-smi with the reason NVML was passed over", note)
		}
		devs, err := d.Detect(context.Background())
		if err != nil || len(devs) != 1 || devs[0].Model != "RTX4090" {
			t.Errorf("Detect = %v, %v; want the recorded RTX 4090", devs, err)
		}
	})
}

func TestDetector_Order(t *testing.T) {
	defer func(n, s func(context.Context) (gpu.Detector, string, error)) { openNVML, openSMI = n, s }(openNVML, openSMI)
	f, _ := fake.Parse("1xT4", "s")
	smiCalls := 0
	openSMI = func(context.Context) (gpu.Detector, string, error) { smiCalls++; return f, "nvidia-smi", nil }
	openNVML = func(context.Context) (gpu.Detector, string, error) { return f, "NVML, driver 550.54.15", nil }
	if _, note, err := Detector(context.Background()); err != nil || note != "NVML, driver 550.54.15" || smiCalls != 0 {
		t.Errorf("with NVML working: note %q, err %v, nvidia-smi tried %d times; want NVML alone", note, err, smiCalls)
	}
	openNVML = func(context.Context) (gpu.Detector, string, error) {
		return nil, "", errors.New("NVML: start: ERROR_UNKNOWN")
	}
	if _, note, err := Detector(context.Background()); err != nil || note != "nvidia-smi (NVML: NVML: start: ERROR_UNKNOWN)" {
		t.Errorf("with NVML failing: note %q, err %v", note, err)
	}
}
