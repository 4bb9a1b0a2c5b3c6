package cli

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/idlegrid/idlegrid/internal/gpu"
)

// mustDocker returns a client of the machine's Docker engine, or skips
// the test where there is none.
func mustDocker(tb testing.TB) *client.Client {
	tb.Helper()
	cli, err := dockerClient(os.Getenv)
	if err != nil {
		tb.Skipf("no Docker client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		tb.Skipf("no Docker engine reachable at %s (%v): this test needs one; start dockerd or set DOCKER_HOST", cli.DaemonHost(), err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// mustSelfImage builds a self image of the test binary (which runs Main
// there, see TestMain) and removes it after the test.
func mustSelfImage(tb testing.TB, cli *client.Client, repo string, args ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ref, err := selfImage(ctx, cli, repo, args...)
	if err != nil {
		tb.Fatalf("selfImage: %v", err)
	}
	tb.Cleanup(func() {
		cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	return ref
}

func TestSelfFiles(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	files, env, err := selfFiles(exe)
	if err != nil {
		t.Fatal(err)
	}
	if files[0].path != selfPath || files[0].mode != 0o755 || len(files[0].data) == 0 {
		t.Errorf("first file is %s (mode %o, %d bytes), want the binary at %s", files[0].path, files[0].mode, len(files[0].data), selfPath)
	}
	f, err := elf.NewFile(bytes.NewReader(files[0].data))
	if err != nil {
		t.Fatal(err)
	}
	interp := interpreter(f)
	paths := make([]string, len(files))
	for i, fl := range files {
		paths[i] = fl.path
	}
	if interp == "" {
		if len(files) != 1 || env != "" {
			t.Errorf("a static binary's image holds %q with %q, want the binary alone", paths, env)
		}
		return
	}
	// A dynamic binary brings its loader and libc.
	if !slices.Contains(paths, interp) {
		t.Errorf("image files %q lack the loader %s", paths, interp)
	}
	if !slices.ContainsFunc(paths, func(p string) bool { return filepath.Base(p) == "libc.so.6" }) {
		t.Errorf("image files %q lack libc.so.6", paths)
	}
	if !strings.HasPrefix(env, "LD_LIBRARY_PATH=/") {
		t.Errorf("env = %q, want LD_LIBRARY_PATH", env)
	}
}

func TestSelfFiles_NotELF(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idlegrid")
	os.WriteFile(path, []byte("#!/bin/sh\necho hi\n"), 0o755)
	if _, _, err := selfFiles(path); err == nil || !strings.Contains(err.Error(), "not a Linux executable") {
		t.Errorf("got %v, want an error saying it is not a Linux executable", err)
	}
}

// TestGPUProbe_Container runs the GPU probe in a container of the test
// binary's self image without any GPU, as 'idlegrid agent --check' does
// with the node's: it must answer, in JSON, that it sees none.
func TestGPUProbe_Container(t *testing.T) {
	cli := mustDocker(t)
	ref := mustSelfImage(t, cli, "idlegrid-test/gpu-probe", "agent", "gpu-probe")
	if again, err := selfImage(context.Background(), cli, "idlegrid-test/gpu-probe", "agent", "gpu-probe"); err != nil || again != ref {
		t.Errorf("second selfImage = %q, %v; want %q again, found not built", again, err, ref)
	}
	p, err := runGPUProbe(context.Background(), cli, ref, nil)
	if err != nil {
		t.Fatalf("runGPUProbe: %v", err)
	}
	if p.Devices != 0 || len(p.UUIDs) != 0 || p.Via != "/dev" || p.Note == "" {
		t.Errorf("probe = %+v, want no device, looked at /dev, and why the driver's tools saw none", p)
	}
}

func TestProbeGPUs(t *testing.T) {
	root := t.TempDir()
	oldRoot, oldDetect := probeRoot, probeDetect
	t.Cleanup(func() { probeRoot, probeDetect = oldRoot, oldDetect })
	probeRoot = root
	noDriver := func(context.Context) ([]gpu.Device, string, error) {
		return nil, "", errors.New("NVML: libnvidia-ml.so.1 not found")
	}
	probeDetect = noDriver
	for _, n := range []string{"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"} {
		mustWrite(t, filepath.Join(root, "dev", n), "")
	}
	t.Run("DeviceNodes", func(t *testing.T) {
		p := probeGPUs(context.Background())
		if p.Devices != 2 || p.Via != "/dev" || len(p.UUIDs) != 0 || !strings.Contains(p.Note, "libnvidia-ml") {
			t.Errorf("probe = %+v, want 2 devices seen in /dev and the driver's note", p)
		}
	})
	t.Run("Procfs", func(t *testing.T) {
		for bus, uuid := range map[string]string{"0000:18:00.0": "GPU-5a9c1b4e-0000-1111-2222-333344445555", "0000:3b:00.0": "GPU-77aa1b4e-0000-1111-2222-333344445555"} {
			mustWrite(t, filepath.Join(root, "proc/driver/nvidia/gpus", bus, "information"),
				"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 123\nGPU UUID: \t\t "+uuid+"\nVideo BIOS: \t\t 96.00.74.00.0d\n")
		}
		p := probeGPUs(context.Background())
		if p.Via != "/proc/driver/nvidia" || !slices.Equal(p.UUIDs, []string{"GPU-5a9c1b4e-0000-1111-2222-333344445555", "GPU-77aa1b4e-0000-1111-2222-333344445555"}) {
			t.Errorf("probe = %+v, want both UUIDs from /proc/driver/nvidia", p)
		}
	})
	t.Run("Driver", func(t *testing.T) {
		t.Cleanup(func() { probeDetect = noDriver })
		probeDetect = func(context.Context) ([]gpu.Device, string, error) {
			d := gpu.Device{}
			d.UUID = "GPU-1"
			return []gpu.Device{d}, "NVML, driver 550.54.15", nil
		}
		if p := probeGPUs(context.Background()); p.Via != "NVML" || !slices.Equal(p.UUIDs, []string{"GPU-1"}) || p.Devices != 2 {
			t.Errorf("probe = %+v, want GPU-1 through NVML and 2 device nodes", p)
		}
	})
}

func mustWrite(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}
