package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/idlegrid/idlegrid/internal/gpu"
	gpuauto "github.com/idlegrid/idlegrid/internal/gpu/auto"
	"github.com/idlegrid/idlegrid/internal/runtime/docker"
)

// gpuProbe is what 'idlegrid agent gpu-probe' sees of the GPUs where it
// runs. 'idlegrid agent --check' runs it in a container with a device
// request for the node's GPUs, as a workload's would be, to prove that
// the NVIDIA Container Toolkit hands them over.
type gpuProbe struct {
	Via     string   `json:"via"`             // how it looked: NVML, nvidia-smi, /proc/driver/nvidia or /dev
	UUIDs   []string `json:"uuids,omitempty"` // the GPUs it could name
	Devices int      `json:"devices"`         // /dev/nvidiaN device nodes
	Note    string   `json:"note,omitempty"`  // why it could not name them
}

var gpuProbeHelp = help{
	usage: "idlegrid agent gpu-probe",
	about: `Print as JSON the GPUs this process sees, and how it looked: NVML,
nvidia-smi, the driver's /proc entries or the device nodes. 'idlegrid agent
--check' runs it in a container given the node's GPUs, as a workload's
would be, to check that they reach containers. It takes no flags.`,
	examples: "idlegrid agent gpu-probe",
}

// probeRoot is "/" but for tests.
var probeRoot = "/"

// probeDetect lists the GPUs the driver's tools see; tests replace it.
var probeDetect = func(ctx context.Context) ([]gpu.Device, string, error) {
	det, via, err := gpuauto.Detector(ctx)
	if err != nil {
		return nil, "", err
	}
	if c, ok := det.(io.Closer); ok {
		defer c.Close()
	}
	devs, err := det.Detect(ctx)
	return devs, via, err
}

var nvidiaDeviceRE = regexp.MustCompile(`^nvidia[0-9]+$`)

// probeGPUs looks for GPUs the way a workload could: through NVML or
// nvidia-smi when the image has what they need (a binary built with cgo
// brings glibc), else through the driver's /proc entries, which the
// toolkit mounts for the devices it hands over, and the device nodes.
func probeGPUs(ctx context.Context) gpuProbe {
	p := gpuProbe{}
	if ents, err := os.ReadDir(filepath.Join(probeRoot, "dev")); err == nil {
		for _, e := range ents {
			if nvidiaDeviceRE.MatchString(e.Name()) {
				p.Devices++
			}
		}
	}
	devs, via, err := probeDetect(ctx)
	if err == nil && len(devs) > 0 {
		p.Via = strings.FieldsFunc(via, func(r rune) bool { return r == ',' || r == ' ' })[0] // "NVML, driver …"
		for _, d := range devs {
			p.UUIDs = append(p.UUIDs, d.UUID)
		}
		return p
	}
	if err != nil {
		p.Note = err.Error()
	}
	if uuids := procfsGPUs(filepath.Join(probeRoot, "proc/driver/nvidia/gpus")); len(uuids) > 0 {
		p.Via, p.UUIDs = "/proc/driver/nvidia", uuids
		return p
	}
	p.Via = "/dev"
	return p
}

// procfsGPUs reads the UUIDs from the driver's per-GPU information files,
// whose lines read "GPU UUID: 	 GPU-…".
func procfsGPUs(dir string) []string {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "information"))
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "GPU UUID" {
				out = append(out, strings.TrimSpace(v))
			}
		}
	}
	return out
}

// runGPUProbe runs the probe in the image ref, in a sandbox like a
// workload's with no network (runProbe), with a device request for uuids
// (none when empty), and returns what it saw.
func runGPUProbe(ctx context.Context, cli *client.Client, ref string, uuids []string) (gpuProbe, error) {
	host := &container.HostConfig{NetworkMode: "none"}
	if len(uuids) > 0 {
		host.DeviceRequests = []container.DeviceRequest{{Driver: "nvidia", DeviceIDs: uuids, Capabilities: [][]string{{"gpu", "compute", "utility"}}}}
	}
	var p gpuProbe
	err := runProbe(ctx, cli, &container.Config{Image: ref}, host, &p)
	return p, err
}

// runProbe runs a probe container of cfg and host in a sandbox like a
// workload's (read-only root, no capabilities, no new privileges, not
// root), waits for it to exit, and decodes its output, JSON, into out. It
// removes its container.
func runProbe(ctx context.Context, cli *client.Client, cfg *container.Config, host *container.HostConfig, out any) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	host.ReadonlyRootfs, host.CapDrop, host.SecurityOpt = true, []string{"ALL"}, []string{"no-new-privileges:true"}
	cfg.User = "65534:65534"
	cfg.Labels = map[string]string{docker.LabelManagedBy: docker.ManagedBy, docker.LabelRole: "probe"}
	created, err := cli.ContainerCreate(ctx, cfg, host, nil, nil, "")
	if err != nil {
		return fmt.Errorf("create the probe container: %w", err)
	}
	defer func() {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		cli.ContainerRemove(rmCtx, created.ID, container.RemoveOptions{Force: true})
	}()
	waitC, errC := cli.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return fmt.Errorf("start the probe container: %w", err)
	}
	select {
	case res := <-waitC:
		if res.StatusCode != 0 {
			return fmt.Errorf("the probe exited with code %d: %s", res.StatusCode, probeOutput(ctx, cli, created.ID, true))
		}
	case err := <-errC:
		return fmt.Errorf("wait for the probe: %w", err)
	}
	said := probeOutput(ctx, cli, created.ID, false)
	if err := json.Unmarshal([]byte(said), out); err != nil {
		return fmt.Errorf("the probe said %q: %w", said, err)
	}
	return nil
}

// probeOutput is the probe container's stdout, or its stderr.
func probeOutput(ctx context.Context, cli *client.Client, id string, stderr bool) string {
	rc, err := cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return "(no output: " + err.Error() + ")"
	}
	defer rc.Close()
	var out, errOut bytes.Buffer
	stdcopy.StdCopy(&out, &errOut, rc)
	if stderr {
		return strings.TrimSpace(errOut.String())
	}
	return strings.TrimSpace(out.String())
}
