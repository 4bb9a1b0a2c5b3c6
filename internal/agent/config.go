package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu"
	gpuauto "github.com/idlegrid/idlegrid/internal/gpu/auto"
	gpufake "github.com/idlegrid/idlegrid/internal/gpu/fake"
	"github.com/idlegrid/idlegrid/internal/gpu/smi"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// EnvJoinToken names the environment variable that can carry the join
// token, so that it need not be written into the config file.
const EnvJoinToken = "IDLEGRID_JOIN_TOKEN"

// Config is the agent's configuration file (YAML; 'idlegrid agent init'
// writes one with every key explained, from starter.yaml.tmpl).
// Zero resources mean "detect from the OS".
type Config struct {
	Server    string            `yaml:"server"`     // e.g. http://127.0.0.1:7070
	JoinToken string            `yaml:"join_token"` // needed only until the node has joined
	DataDir   string            `yaml:"data_dir"`   // holds node.key and node.json
	Name      string            `yaml:"name"`       // empty: the host name
	Region    string            `yaml:"region"`     // e.g. eu-west
	Residency string            `yaml:"residency"`  // e.g. EU
	Labels    map[string]string `yaml:"labels"`
	CPUCores  int               `yaml:"cpu_cores"`
	RAMMB     int               `yaml:"ram_mb"`
	DiskGB    int               `yaml:"disk_gb"`
	Schedule  ScheduleConfig    `yaml:"schedule"`
	Ask       AskConfig         `yaml:"ask"`

	// The node's local policy (see policy.go).

	// Mode is when GPUs are offered: schedule (the default) follows the
	// schedule's windows; when-idle also offers each GPU only while its
	// owner is not using it.
	Mode Mode       `yaml:"mode"`
	Idle IdleConfig `yaml:"idle"` // what "not using it" means in when-idle mode
	// ThermalCapC, when set, is the GPU temperature above which the node
	// takes no new work on that GPU and gives its running work notice.
	ThermalCapC int `yaml:"thermal_cap_c"`
	// PowerCapW, when set, is applied to every GPU as its power limit,
	// where the agent has the permission (root) to and the driver reports
	// the GPU's limit. The limit each GPU had is kept in
	// DATA_DIR/power.json and set back when the agent stops.
	PowerCapW int `yaml:"power_cap_w"`
	// AllowedImages, when set, are the only images the node runs: exact
	// references or prefixes ("ghcr.io/acme/", "pytorch/pytorch") or globs
	// ("ghcr.io/acme/*:v1*"). Short Docker Hub names are expanded first.
	AllowedImages []string `yaml:"allowed_images"`
	// Sandbox is what the node's containers may do beyond the least the
	// docker runtime gives them.
	Sandbox SandboxConfig `yaml:"sandbox"`
	// TelemetryInterval is how often the GPUs are looked at again; zero
	// means DefaultTelemetryInterval.
	TelemetryInterval time.Duration `yaml:"telemetry_interval"`
	// ReceiptInterval is how often the agent signs a usage receipt for each
	// running lease, in whole seconds; zero means DefaultReceiptInterval.
	// The renter is charged from the receipts (docs/billing.md).
	ReceiptInterval time.Duration `yaml:"receipt_interval"`

	// Runtime is what runs the leases' workloads: RuntimeDocker
	// (containers, through the Docker engine) or RuntimeFake (simulated,
	// for development). Empty means fake when FakeGPUs is set, else docker
	// (see RuntimeName).
	Runtime string `yaml:"runtime"`

	// FakeGPUs names simulated GPUs, e.g. "2xRTX4090", for development;
	// empty detects the real ones (NVML, else nvidia-smi).
	FakeGPUs string `yaml:"fake_gpus"`
	// FakeSpeed runs the fake runtime's workloads this many times faster
	// than real time; zero means 1.
	FakeSpeed float64 `yaml:"fake_speed"`

	// Models are served for inference through the gateway (models.go);
	// ModelHealthInterval is how often their servers are checked, zero
	// means DefaultModelHealthInterval; ModelLoadInterval how often their
	// queue depths are read from the servers' metrics (modelload.go), zero
	// means DefaultModelLoadInterval. ModelDrainWait is how long a
	// stopping agent lets the inference requests in flight run on before
	// it cuts them (modeldrain.go), zero means DefaultModelDrainWait.
	Models              []ModelConfig `yaml:"models"`
	ModelHealthInterval time.Duration `yaml:"model_health_interval"`
	ModelLoadInterval   time.Duration `yaml:"model_load_interval"`
	ModelDrainWait      time.Duration `yaml:"model_drain_wait"`
}

// SandboxConfig widens or narrows what every workload of the node may do
// (docker runtime). The zero value is the default: the runtime's own
// bridge network (idlegrid-workloads), where workloads cannot reach each
// other, no Linux capability, and pulls from public registries only.
type SandboxConfig struct {
	// NoNetwork runs workloads with no network at all: they reach neither
	// the internet nor the owner's network (a job that downloads its data
	// or model cannot run here).
	NoNetwork bool `yaml:"no_network"`
	// Capabilities are Linux capabilities (e.g. SYS_PTRACE) every workload
	// gets back; every other one stays dropped.
	Capabilities []string `yaml:"capabilities"`
	// LocalRegistries are registries (host[:port]) on the owner's own
	// machine or network that renters' images may be pulled from. Any
	// other registry must be public, so that a renter cannot have the
	// node's engine probe the owner's network by naming an image there.
	LocalRegistries []string `yaml:"local_registries"`
	// MaxDiskGB caps what a workload may keep on disk in its volumes
	// (/scratch, /checkpoint and its image's); over it, it is killed as
	// its own failure. Default 100.
	MaxDiskGB int `yaml:"max_disk_gb"`
}

func (s SandboxConfig) validate() error {
	var f idlegrid.Faults
	for i, c := range s.Capabilities {
		name := strings.TrimPrefix(strings.ToUpper(c), "CAP_")
		if name == "" || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") != "" {
			f.Add(fmt.Sprintf("sandbox.capabilities[%d]", i), "%q is not a Linux capability name, e.g. SYS_PTRACE", c)
		} else if name == "ALL" {
			f.Add(fmt.Sprintf("sandbox.capabilities[%d]", i), "ALL would give workloads every capability, root's power over the machine; list the few they need, e.g. SYS_PTRACE")
		}
	}
	if s.MaxDiskGB < 0 || s.MaxDiskGB > 1<<20 {
		f.Add("sandbox.max_disk_gb", "must be between 1 and %d (0: the default, 100), got %d", 1<<20, s.MaxDiskGB)
	}
	for i, r := range s.LocalRegistries {
		if reg, err := idlegrid.ParseRegistry(r); err != nil || reg != r || strings.ToLower(r) != r { // images name them in lower case
			f.Add(fmt.Sprintf("sandbox.local_registries[%d]", i), "%q is not a registry as images name it, in lower case, e.g. 192.168.1.10:5000 or registry.lan", r)
		}
	}
	return f.Err()
}

// ScheduleConfig is when the node is offered. Mode defaults to always.
type ScheduleConfig struct {
	Mode     idlegrid.ScheduleMode   `yaml:"mode"`      // always or windows
	TimeZone string                  `yaml:"time_zone"` // IANA name; empty is UTC
	Weekly   []idlegrid.WeeklyWindow `yaml:"weekly"`    // {days: [sat, sun], start: "00:00", end: "00:00"}
	OneOff   []idlegrid.OneOffWindow `yaml:"one_off"`   // {start: 2025-06-01T18:00:00Z, end: ...}
}

// AskConfig is the node's ask, with prices as decimal amounts per GPU-hour.
type AskConfig struct {
	Floor         map[idlegrid.Tier]string `yaml:"floor"` // tier: "2.10"
	AllowedKinds  []idlegrid.WorkloadKind  `yaml:"allowed_kinds"`
	MaxJobSeconds int64                    `yaml:"max_job_seconds"`
}

// LoadConfig reads, parses and validates the config file at path.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses and validates a YAML config. Unknown keys are errors
// that name the key and its line.
func ParseConfig(data []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, idlegrid.Invalid("config", "%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return nil, idlegrid.Invalid("config", "empty; 'idlegrid agent init' writes a commented config for this machine")
	}
	paths := map[int]string{}
	if err := checkKeys(doc.Content[0], configType, "", paths); err != nil {
		return nil, err
	}
	c := &Config{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, translateYAMLError(err, paths)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// ApplyEnv takes the join token from getenv(EnvJoinToken) when it is set
// there; the environment wins over the file.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if t := strings.TrimSpace(getenv(EnvJoinToken)); t != "" {
		c.JoinToken = t
	}
}

// The runtimes a config may name.
const (
	RuntimeDocker = "docker"
	RuntimeFake   = "fake"
)

// RuntimeName is the runtime the config chooses: Runtime when set, else
// fake for a node with fake GPUs and docker for one with real GPUs. Real
// GPUs never fall back to the fake runtime on their own: a node that sold
// them would take renters' money for simulated work.
func (c *Config) RuntimeName() string {
	switch {
	case c.Runtime != "":
		return c.Runtime
	case c.FakeGPUs != "":
		return RuntimeFake
	}
	return RuntimeDocker
}

// KeyPath is where the node's identity key lives.
func (c *Config) KeyPath() string { return filepath.Join(c.DataDir, "node.key") }

// Validate checks the config, naming the field at fault. It checks the
// offer the config describes as the server would, with one placeholder GPU
// and the host's name when Name is empty.
func (c *Config) Validate() error {
	var f idlegrid.Faults
	switch {
	case strings.TrimSpace(c.Server) == "":
		f.Add("server", "required, e.g. http://127.0.0.1:7070")
	case strings.ContainsAny(c.Server, " \t\n"):
		f.Add("server", "must be an address such as http://127.0.0.1:7070, got %q", c.Server)
	case strings.Contains(c.Server, "://") && !hasHTTPScheme(c.Server):
		f.Add("server", "must be an http:// or https:// address such as https://market.example.com, got %q", c.Server)
	case strings.HasSuffix(strings.TrimRight(c.Server, "/"), "/v1"):
		f.Add("server", "give the server's address without /v1, e.g. %s", strings.TrimSuffix(strings.TrimRight(c.Server, "/"), "/v1"))
	}
	f.Check(strings.TrimSpace(c.DataDir) != "", "data_dir", "required: where the node keeps its key and state, e.g. /var/lib/idlegrid")
	f.Check(c.CPUCores >= 0, "cpu_cores", "must not be negative (0 detects)")
	f.Check(c.RAMMB >= 0, "ram_mb", "must not be negative (0 detects)")
	f.Check(c.DiskGB >= 0, "disk_gb", "must not be negative (0 detects)")
	f.Check(c.FakeSpeed >= 0 && c.FakeSpeed <= 1e6, "fake_speed", "must be between 0 and 1000000 (0 means real time)")
	f.Check(c.Runtime == "" || c.Runtime == RuntimeDocker || c.Runtime == RuntimeFake, "runtime", "must be docker or fake, got %q", c.Runtime)
	if r := c.ReceiptInterval; r != 0 && (r < time.Second || r > time.Hour || r%time.Second != 0) {
		f.Add("receipt_interval", "must be whole seconds between 1s and 1h (0 means %v), got %v", DefaultReceiptInterval, r)
	}
	f.Also(c.validatePolicy())
	f.Also(c.validateModels())
	f.Also(c.Sandbox.validate())
	gpus := []idlegrid.GPU{{UUID: "GPU-placeholder", Model: "placeholder", VRAMMB: 1}}
	if c.FakeGPUs != "" {
		if _, err := gpufake.Parse(c.FakeGPUs, ""); err != nil {
			f.Also(err)
		}
	}
	_, err := c.Offer(gpus, Host{Name: "placeholder"})
	f.Also(err)
	return f.Err()
}

// hasHTTPScheme reports whether server, an address with a scheme, names
// HTTP or HTTPS, the only ones the agent speaks.
func hasHTTPScheme(server string) bool {
	scheme, _, _ := strings.Cut(strings.TrimSpace(server), "://")
	scheme = strings.ToLower(scheme)
	return scheme == "http" || scheme == "https"
}

// Offer builds what the node publishes from the config, the detected GPUs
// and the host's resources (used where the config leaves them zero), and
// validates it. Errors name the config field at fault.
func (c *Config) Offer(gpus []idlegrid.GPU, host Host) (idlegrid.Offer, error) {
	ask, err := c.Ask.ask()
	if err != nil {
		return idlegrid.Offer{}, err
	}
	o := idlegrid.Offer{
		Name: or(c.Name, host.Name), GPUs: gpus,
		CPUCores: orInt(c.CPUCores, host.CPUCores), RAMMB: orInt(c.RAMMB, host.RAMMB), DiskGB: orInt(c.DiskGB, host.DiskGB),
		Region: c.Region, Residency: c.Residency, Labels: c.Labels,
		Schedule: c.Schedule.schedule(), Ask: ask,
	}
	if err := o.Validate(); err != nil {
		return idlegrid.Offer{}, configField(err)
	}
	return o, nil
}

// Detector returns the GPU detector the config names: the fake one when
// fake_gpus is set, with UUIDs seeded by the node's public key so that they
// are stable for the node and unique across nodes; else the first real one
// that works (see OpenDetector).
func (c *Config) Detector(key ed25519.PrivateKey) (gpu.Detector, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*smi.DefaultTimeout)
	defer cancel()
	d, _, err := c.OpenDetector(ctx, key)
	return d, err
}

// OpenDetector is Detector with a context, and a line saying which
// detector it chose, e.g. "NVML, driver 550.54.15" or "fake: 2xRTX4090".
// A real detector may hold resources: close it when it implements
// io.Closer.
func (c *Config) OpenDetector(ctx context.Context, key ed25519.PrivateKey) (gpu.Detector, string, error) {
	if c.FakeGPUs != "" {
		d, err := gpufake.Parse(c.FakeGPUs, nodekey.PublicString(key.Public().(ed25519.PublicKey)))
		if err != nil {
			return nil, "", err
		}
		return d, "fake: " + c.FakeGPUs, nil
	}
	return gpuauto.Detector(ctx)
}

func (s ScheduleConfig) schedule() idlegrid.Schedule {
	mode := s.Mode
	if mode == "" {
		mode = idlegrid.ScheduleAlways
	}
	return idlegrid.Schedule{Mode: mode, TimeZone: s.TimeZone, Weekly: s.Weekly, OneOff: s.OneOff}
}

func (a AskConfig) ask() (idlegrid.Ask, error) {
	floor := map[idlegrid.Tier]idlegrid.Micros{}
	for _, t := range sortedTiers(a.Floor) {
		if !t.Valid() {
			return idlegrid.Ask{}, idlegrid.Invalid("ask.floor", "unknown tier %q; use gold, silver or bronze", t)
		}
		m, err := idlegrid.ParseMicros(a.Floor[t])
		if err != nil {
			return idlegrid.Ask{}, idlegrid.Invalid("ask.floor."+string(t), "want a price per GPU-hour such as \"2.10\": %v", err)
		}
		floor[t] = m
	}
	return idlegrid.Ask{FloorMicrosPerGPUHour: floor, AllowedKinds: a.AllowedKinds, MaxJobSeconds: a.MaxJobSeconds}, nil
}

func sortedTiers(m map[idlegrid.Tier]string) []idlegrid.Tier {
	ts := make([]idlegrid.Tier, 0, len(m))
	for t := range m {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts
}

// offerFields maps the offer's field names, as Offer.Validate names them,
// to the config's.
var offerFields = []struct{ offer, config string }{
	{"offer.ask.floor_micros_per_gpu_hour", "ask.floor"},
	{"offer.gpus", "fake_gpus"},
	{"offer.", ""},
}

// configField renames the fields of an offer validation error, each of its
// problems, to the config keys a person would edit.
func configField(err error) error {
	var e *idlegrid.Error
	if !errors.As(err, &e) {
		return err
	}
	ps := e.All()
	for i, p := range ps {
		out := *p
		for _, f := range offerFields {
			if strings.HasPrefix(out.Field, f.offer) {
				out.Field = f.config + strings.TrimPrefix(out.Field, f.offer)
				break
			}
		}
		ps[i] = &out
	}
	return idlegrid.Problems(ps)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orInt(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}
