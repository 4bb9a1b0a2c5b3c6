// Package smi is a GPU detector that runs nvidia-smi and reads its XML
// report (nvidia-smi -q -x). It is the fallback where NVML cannot be used:
// a static build without cgo, such as the FROM scratch agent image, into
// which the NVIDIA container runtime mounts nvidia-smi.
//
// The report changes between driver releases (power readings moved from
// <power_readings> to <gpu_power_readings> in the 535 drivers; compute
// capability is not in it at all), so the parser reads only what it needs,
// accepts every known spelling, and treats "N/A" and its kin as unknown.
package smi

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu"
)

// DefaultTimeout bounds one run of nvidia-smi. A driver that is wedged
// (a GPU fallen off the bus) can make it hang for minutes.
const DefaultTimeout = 15 * time.Second

// maxOutput caps the report read: 8 H100s take about 90 KB.
const maxOutput = 16 << 20

// Detector runs nvidia-smi. Its zero value finds nvidia-smi on PATH.
type Detector struct {
	// Path is the nvidia-smi executable; empty finds "nvidia-smi" on PATH.
	Path string
	// Timeout bounds one run; zero means DefaultTimeout.
	Timeout time.Duration
}

var (
	_ gpu.Detector        = (*Detector)(nil)
	_ gpu.PowerController = (*Detector)(nil)
)

// Open finds nvidia-smi and checks that it can report on the GPUs, so that
// a detector it returns works.
func Open(ctx context.Context) (*Detector, error) {
	d := &Detector{}
	if _, err := d.Detect(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// Detect runs nvidia-smi -q -x and parses its report. When nvidia-smi fails
// for one GPU (a GPU that is lost) but reports the others, the others are
// returned.
func (d *Detector) Detect(ctx context.Context) ([]gpu.Device, error) {
	out, runErr := d.run(ctx, "-q", "-x")
	devs, err := Parse(out)
	switch {
	case runErr == nil && err != nil:
		return nil, fmt.Errorf("nvidia-smi -q -x: %w", err)
	case runErr != nil && (err != nil || len(devs) == 0):
		return nil, runErr
	}
	return devs, nil
}

var setToRE = regexp.MustCompile(`was set to ([0-9.]+) W`)

// SetPowerLimit runs nvidia-smi -i UUID -pl WATTS, which needs root.
func (d *Detector) SetPowerLimit(ctx context.Context, uuid string, watts int) (int, error) {
	if !strings.HasPrefix(uuid, "GPU-") || strings.ContainsAny(uuid, " \t\n") {
		return 0, idlegrid.Invalid("uuid", "not a GPU UUID: %q", uuid)
	}
	out, err := d.run(ctx, "-i", uuid, "-pl", strconv.Itoa(watts))
	if err != nil {
		return 0, err
	}
	if m := setToRE.FindSubmatch(out); m != nil {
		if w, err := strconv.ParseFloat(string(m[1]), 64); err == nil {
			return int(math.Round(w)), nil
		}
	}
	return watts, nil
}

// run runs nvidia-smi with args and returns its output. Its error says what
// nvidia-smi said, which is where it explains a missing driver.
func (d *Detector) run(ctx context.Context, args ...string) ([]byte, error) {
	path := d.Path
	if path == "" {
		p, err := exec.LookPath("nvidia-smi")
		if err != nil {
			return nil, errors.New("nvidia-smi not found on PATH; it comes with the NVIDIA driver")
		}
		path = p
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.WaitDelay = time.Second // do not wait on pipes held by a killed child's children
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = maxOutput, 4096
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	switch {
	case err == nil:
		return stdout.Bytes(), nil
	case ctx.Err() == context.DeadlineExceeded:
		return stdout.Bytes(), fmt.Errorf("nvidia-smi %s: no answer within %v; the driver may be hung", strings.Join(args, " "), timeout)
	case ctx.Err() != nil:
		return stdout.Bytes(), ctx.Err()
	}
	return stdout.Bytes(), fmt.Errorf("nvidia-smi %s: %v: %s", strings.Join(args, " "), err, said(stdout.Bytes(), stderr.Bytes()))
}

// said is what nvidia-smi said about a failure, on one line. It prints its
// complaints to stdout as often as to stderr.
func said(stdout, stderr []byte) string {
	msg := strings.TrimSpace(string(stderr))
	if s := strings.TrimSpace(string(stdout)); !strings.HasPrefix(s, "<") && s != "" {
		msg = strings.TrimSpace(s + " " + msg)
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	if msg == "" {
		return "no message"
	}
	return msg
}

// limitedBuffer keeps the first max bytes written to it and drops the rest.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// report is the part of nvidia-smi's XML report the detector reads.
type report struct {
	XMLName xml.Name    `xml:"nvidia_smi_log"`
	Driver  string      `xml:"driver_version"`
	CUDA    string      `xml:"cuda_version"`
	GPUs    []reportGPU `xml:"gpu"`
}

type reportGPU struct {
	BusID        string       `xml:"id,attr"`
	Product      string       `xml:"product_name"`
	Architecture string       `xml:"product_architecture"` // since the 510 drivers
	UUID         string       `xml:"uuid"`
	PCIBusID     string       `xml:"pci>pci_bus_id"`
	PCIDeviceID  string       `xml:"pci>pci_device_id"`
	PCISubsystem string       `xml:"pci>pci_sub_system_id"`
	VBIOS        string       `xml:"vbios_version"`
	MemTotal     string       `xml:"fb_memory_usage>total"`
	MemUsed      string       `xml:"fb_memory_usage>used"`
	Util         string       `xml:"utilization>gpu_util"`
	Temp         string       `xml:"temperature>gpu_temp"`
	Power        reportPower  `xml:"gpu_power_readings"` // 535 drivers and later
	OldPower     reportPower  `xml:"power_readings"`     // before
	Reset        reportReset  `xml:"gpu_reset_status"`
	RemapPending string       `xml:"remapped_rows>remapped_row_pending"`
	RemapFailure string       `xml:"remapped_rows>remapped_row_failure"`
	RetirePend   string       `xml:"retired_pages>pending_retirement"`
	Processes    []reportProc `xml:"processes>process_info"`
}

type reportPower struct {
	Draw          string `xml:"power_draw"`
	InstantDraw   string `xml:"instant_power_draw"` // newest drivers, which deprecate power_draw
	CurrentLimit  string `xml:"current_power_limit"`
	EnforcedLimit string `xml:"enforced_power_limit"`
	Limit         string `xml:"power_limit"`
	MinLimit      string `xml:"min_power_limit"`
	MaxLimit      string `xml:"max_power_limit"`
}

type reportReset struct {
	Required         string `xml:"reset_required"`
	DrainRecommended string `xml:"drain_and_reset_recommended"`
}

type reportProc struct {
	PID  string `xml:"pid"`
	Name string `xml:"process_name"`
	Used string `xml:"used_memory"`
	Type string `xml:"type"` // C, G or C+G
}

// Parse reads an nvidia-smi -q -x report. GPUs without a UUID (which
// nvidia-smi prints for a GPU it cannot talk to) are left out.
func Parse(data []byte) ([]gpu.Device, error) {
	var r report
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	dec.Entity = xml.HTMLEntity
	if err := dec.Decode(&r); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty report")
		}
		return nil, fmt.Errorf("not an nvidia-smi XML report: %w", err)
	}
	devs := make([]gpu.Device, 0, len(r.GPUs))
	for i, g := range r.GPUs {
		if d, ok := g.device(i, &r); ok {
			devs = append(devs, d)
		}
	}
	return devs, nil
}

func (g *reportGPU) device(index int, r *report) (gpu.Device, bool) {
	uuid := strings.TrimSpace(g.UUID)
	if !strings.HasPrefix(uuid, "GPU-") || len(uuid) > 100 {
		return gpu.Device{}, false
	}
	vram := number(g.MemTotal)
	model := gpu.ModelName(g.Product, vram)
	d := gpu.Device{
		GPU: idlegrid.GPU{UUID: uuid, Model: model, VRAMMB: vram,
			PCIBusID: clean(first(g.PCIBusID, g.BusID)), PCIDeviceID: gpu.PCIID(g.PCIDeviceID),
			PCISubsystemID: gpu.PCIID(g.PCISubsystem), DriverVersion: gpu.Version(clean(r.Driver)), VBIOSVersion: gpu.Version(clean(g.VBIOS))},
		Index: index, Name: clean(g.Product), Driver: clean(r.Driver), CUDA: clean(r.CUDA),
		ComputeCap: gpu.ComputeCapOf(model, g.Architecture),
		MemUsedMB:  number(g.MemUsed), UtilPct: number(g.Util), TempC: number(g.Temp),
		PowerDrawW:  number(first(g.Power.InstantDraw, g.Power.Draw, g.OldPower.Draw)),
		PowerLimitW: number(first(g.Power.CurrentLimit, g.OldPower.EnforcedLimit, g.OldPower.Limit)),
		PowerMinW:   number(first(g.Power.MinLimit, g.OldPower.MinLimit)),
		PowerMaxW:   number(first(g.Power.MaxLimit, g.OldPower.MaxLimit)),
		Faults:      g.faults(),
	}
	for _, p := range g.Processes {
		pid, err := strconv.Atoi(strings.TrimSpace(p.PID))
		if err != nil || pid <= 0 {
			continue
		}
		d.Processes = append(d.Processes, gpu.Process{PID: pid, Name: clean(p.Name), UsedMB: number(p.Used), Kind: processKind(p.Type)})
	}
	return d, true
}

// processKind reads nvidia-smi's process type: G only draws, C and C+G
// compute; an older report without the type leaves it unknown.
func processKind(t string) gpu.ProcessKind {
	switch strings.ToUpper(strings.TrimSpace(t)) {
	case "G":
		return gpu.ProcessGraphics
	case "C", "C+G":
		return gpu.ProcessCompute
	}
	return gpu.ProcessUnknown
}

// faults lists what the report says is wrong with the GPU. nvidia-smi has
// no Xid history; these are the driver's own verdicts.
func (g *reportGPU) faults() []string {
	var out []string
	switch {
	case yes(g.Reset.Required):
		out = append(out, "the driver says the GPU needs a reset")
	case yes(g.Reset.DrainRecommended):
		out = append(out, "the driver recommends draining and resetting the GPU")
	}
	if yes(g.RemapFailure) {
		out = append(out, "memory row remapping failed")
	} else if yes(g.RemapPending) {
		out = append(out, "a memory row remap is pending until the GPU is reset")
	}
	if yes(g.RetirePend) {
		out = append(out, "a memory page retirement is pending until the GPU is reset")
	}
	return out
}

func yes(s string) bool { return strings.EqualFold(strings.TrimSpace(s), "Yes") }

// number reads the leading number of a value such as "81559 MiB", "27.22 W",
// "45 C" or "2 %", rounded; "N/A", "[Not Supported]" and the like are 0.
func number(s string) int {
	f, _, _ := strings.Cut(strings.TrimSpace(s), " ")
	v, err := strconv.ParseFloat(f, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1e9 {
		return 0
	}
	return int(math.Round(v))
}

// clean trims a text value and blanks the ways nvidia-smi says "unknown".
func clean(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	switch strings.ToLower(strings.Trim(s, "[]")) {
	case "n/a", "not supported", "unknown error", "insufficient permissions":
		return ""
	}
	if len(s) > 256 {
		s = strings.ToValidUTF8(s[:256], "")
	}
	return s
}

// first returns the first value that is not empty or N/A.
func first(vals ...string) string {
	for _, v := range vals {
		if clean(v) != "" {
			return v
		}
	}
	return ""
}
