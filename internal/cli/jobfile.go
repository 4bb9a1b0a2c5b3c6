package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/idlegrid/idlegrid"
)

// maxJobFileBytes caps a job file; a spec is a few hundred bytes.
const maxJobFileBytes = 1 << 20

// jobFile is a job spec as renters write it, in YAML or JSON. It is the
// wire JobSpec plus conveniences: max_price as a decimal ("2.50"), and
// duration and checkpoint_every as Go durations ("90m"). Unknown fields
// are errors.
type jobFile struct {
	Name    string            `json:"name" yaml:"name"`
	Kind    string            `json:"kind" yaml:"kind"`
	Image   string            `json:"image" yaml:"image"`
	Command []string          `json:"command" yaml:"command"`
	Env     map[string]string `json:"env" yaml:"env"`

	GPUs      *int     `json:"gpus" yaml:"gpus"` // absent: 1, as --gpus`
	Nodes     int      `json:"nodes" yaml:"nodes"`
	GPUModels []string `json:"gpu_models" yaml:"gpu_models"`
	MinVRAMMB int      `json:"min_vram_mb" yaml:"min_vram_mb"`
	CPUCores  int      `json:"cpu_cores" yaml:"cpu_cores"`
	RAMMB     int      `json:"ram_mb" yaml:"ram_mb"`

	Tier                     string `json:"tier" yaml:"tier"`
	MaxPrice                 *price `json:"max_price" yaml:"max_price"`
	MaxPriceMicrosPerGPUHour int64  `json:"max_price_micros_per_gpu_hour" yaml:"max_price_micros_per_gpu_hour"`
	Interruptible            *bool  `json:"interruptible" yaml:"interruptible"`

	Region          string `json:"region" yaml:"region"`
	RegionPreferred bool   `json:"region_preferred" yaml:"region_preferred"`
	Residency       string `json:"residency" yaml:"residency"`

	Duration        string     `json:"duration" yaml:"duration"`
	DurationSeconds int64      `json:"duration_seconds" yaml:"duration_seconds"`
	Deadline        *time.Time `json:"deadline" yaml:"deadline"`

	CheckpointEvery        string `json:"checkpoint_every" yaml:"checkpoint_every"`
	CheckpointEverySeconds int64  `json:"checkpoint_every_seconds" yaml:"checkpoint_every_seconds"`

	ReliabilityWeight float64       `json:"reliability_weight" yaml:"reliability_weight"`
	Datasets          []fileDataset `json:"datasets" yaml:"datasets"`
	Verifiable        bool          `json:"verifiable" yaml:"verifiable"`
	AvoidProviders    []string      `json:"avoid_providers" yaml:"avoid_providers"`
}

// fileDataset is a dataset in a job file: {name: imagenet, size_gb: 150}.
type fileDataset struct {
	Name   string `json:"name" yaml:"name"`
	SizeGB int64  `json:"size_gb" yaml:"size_gb"`
}

// price is a decimal amount of money in a job file: "2.50" or 2.50. It is
// parsed from its text, never through a float.
type price struct{ micros idlegrid.Micros }

func (p *price) UnmarshalJSON(b []byte) error {
	s := string(b)
	if unq, err := strconv.Unquote(s); err == nil {
		s = unq
	}
	return p.set(s)
}

func (p *price) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return idlegrid.Invalid("job.max_price", "line %d: must be a decimal amount such as \"2.50\"", n.Line)
	}
	return p.set(n.Value)
}

func (p *price) set(s string) error {
	m, err := idlegrid.ParseMicros(s)
	if err != nil {
		return idlegrid.Invalid("job.max_price", "%v; write a decimal amount per GPU-hour such as \"2.50\"", err)
	}
	p.micros = m
	return nil
}

// parseJobFile reads a job spec from a YAML or JSON file (JSON when the
// first non-space byte is '{'). It returns the spec as written, not yet
// normalised or validated.
func parseJobFile(r io.Reader) (idlegrid.JobSpec, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxJobFileBytes+1))
	if err != nil {
		return idlegrid.JobSpec{}, err
	} else if len(data) > maxJobFileBytes {
		return idlegrid.JobSpec{}, idlegrid.Invalid("job", "job file is over %d bytes", maxJobFileBytes)
	}
	var f jobFile
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		err = decodeJSONStrict(trimmed, &f)
	} else {
		err = decodeYAMLStrict(data, &f)
	}
	if err != nil {
		return idlegrid.JobSpec{}, err
	}
	return f.spec()
}

func decodeJSONStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jobFileError(err)
	}
	if dec.More() {
		return idlegrid.Invalid("job", "job file holds more than one JSON object")
	}
	return nil
}

func decodeYAMLStrict(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); errors.Is(err, io.EOF) {
		return idlegrid.Invalid("job", "job file is empty")
	} else if err != nil {
		return jobFileError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return idlegrid.Invalid("job", "job file holds more than one YAML document")
	}
	return nil
}

// jobFileError turns a decoder's error into one that names the field.
func jobFileError(err error) error {
	var ie *idlegrid.Error
	if errors.As(err, &ie) {
		return ie
	}
	msg := err.Error()
	// encoding/json: `json: unknown field "gpu"`
	if field, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return idlegrid.Invalid("job."+strings.Trim(field, `"`), "unknown field; see 'idlegrid job submit --help' for the fields")
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return idlegrid.Invalid("job."+te.Field, "must be %s, not %s", kindOr(goKinds, te.Type.String(), "a "+te.Type.String()),
			kindOr(jsonKinds, te.Value, "a "+te.Value))
	}
	// yaml.v3: "yaml: unmarshal errors:\n  line 3: field gpu not found in type cli.jobFile"
	msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n")
	var lines []string
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		if i := strings.Index(l, ": field "); i >= 0 && strings.Contains(l, " not found in type ") {
			field := strings.SplitN(l[i+len(": field "):], " ", 2)[0]
			return idlegrid.Invalid("job."+field, "unknown field (%s); see 'idlegrid job submit --help' for the fields", l[:i])
		}
		lines = append(lines, plainYAMLError(l))
	}
	return idlegrid.Invalid("job", "cannot read job file: %s", strings.Join(lines, "; "))
}

// yamlTypeRE matches yaml.v3's "line 2: cannot unmarshal !!str `two` into int".
var yamlTypeRE = regexp.MustCompile("^(line \\d+): cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")

// yamlKinds and goKinds name YAML's and the job file's kinds of value in
// words.
var (
	yamlKinds = map[string]string{"str": "text", "int": "a number", "float": "a number", "bool": "true or false",
		"seq": "a list", "map": "a mapping", "null": "nothing", "timestamp": "a time"}
	goKinds = map[string]string{"int": "a whole number", "int64": "a whole number", "float64": "a number", "string": "text",
		"bool": "true or false", "[]string": "a list", "map[string]string": "a mapping of names to values",
		"cli.jobFile": "a mapping of job fields (image: …, gpus: …)"}
)

// jsonKinds names encoding/json's kinds of value in words.
var jsonKinds = map[string]string{"string": "text", "number": "a number", "bool": "true or false",
	"array": "a list", "object": "a mapping"}

// kindOr is kinds[k], or otherwise.
func kindOr(kinds map[string]string, k, otherwise string) string {
	if w, ok := kinds[k]; ok {
		return w
	}
	return otherwise
}

// plainYAMLError says a yaml.v3 type error in the file's words rather than
// Go's: "line 2: two is text; want a whole number".
func plainYAMLError(l string) string {
	m := yamlTypeRE.FindStringSubmatch(l)
	if m == nil {
		return l
	}
	got, want := yamlKinds[m[2]], goKinds[m[4]]
	if got == "" || want == "" {
		return l
	}
	if m[3] == "" {
		return fmt.Sprintf("%s: found %s; want %s", m[1], got, want)
	}
	return fmt.Sprintf("%s: %q is %s; want %s", m[1], m[3], got, want)
}

// spec turns the file into a JobSpec, resolving the conveniences.
func (f *jobFile) spec() (idlegrid.JobSpec, error) {
	s := idlegrid.JobSpec{
		Name: f.Name, Kind: idlegrid.WorkloadKind(f.Kind), Image: f.Image, Command: f.Command, Env: f.Env,
		GPUs: 1, Nodes: f.Nodes, GPUModels: f.GPUModels, MinVRAMMB: f.MinVRAMMB, CPUCores: f.CPUCores, RAMMB: f.RAMMB,
		Tier:                     idlegrid.Tier(f.Tier),
		MaxPriceMicrosPerGPUHour: idlegrid.Micros(f.MaxPriceMicrosPerGPUHour),
		Region:                   f.Region, RegionPreferred: f.RegionPreferred, Residency: f.Residency,
		Deadline:          f.Deadline,
		ReliabilityWeight: f.ReliabilityWeight, Verifiable: f.Verifiable, AvoidProviders: f.AvoidProviders,
	}
	if f.GPUs != nil {
		s.GPUs = *f.GPUs
	}
	for _, d := range f.Datasets {
		s.Datasets = append(s.Datasets, idlegrid.Dataset{Name: d.Name, SizeGB: d.SizeGB})
	}
	if f.MaxPrice != nil {
		if f.MaxPriceMicrosPerGPUHour != 0 {
			return s, idlegrid.Invalid("job.max_price", "give max_price or max_price_micros_per_gpu_hour, not both")
		}
		s.MaxPriceMicrosPerGPUHour = f.MaxPrice.micros
	}
	var err error
	if s.DurationSeconds, err = durationField("duration", f.Duration, f.DurationSeconds); err != nil {
		return s, err
	}
	if s.CheckpointEverySeconds, err = durationField("checkpoint_every", f.CheckpointEvery, f.CheckpointEverySeconds); err != nil {
		return s, err
	}
	if f.Interruptible != nil {
		s.Interruptible = *f.Interruptible
	}
	return s, nil
}

// durationField resolves a field a job file may give as a Go duration
// (name: "90m") or in whole seconds (name_seconds: 5400), but not both.
func durationField(name, text string, secs int64) (int64, error) {
	if text == "" {
		return secs, nil
	} else if secs != 0 {
		return 0, idlegrid.Invalid("job."+name, "give %s or %s_seconds, not both", name, name)
	}
	v, err := parseDurationSeconds(text)
	if err != nil {
		return 0, idlegrid.Invalid("job."+name, "%v", err)
	}
	return v, nil
}

// parseDurationSeconds parses a Go duration such as "90m" or "1h30m" into
// whole seconds; it must be at least one second, whole, and no longer
// than a job may run (said here as a duration, not the spec's seconds).
func parseDurationSeconds(v string) (int64, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("must be a duration such as 90m or 1h30m, got %q", v)
	} else if d < time.Second {
		return 0, fmt.Errorf("must be at least 1s, got %q", v)
	} else if d > idlegrid.MaxJobSeconds*time.Second {
		return 0, fmt.Errorf("must be at most %dh (30 days), got %q", idlegrid.MaxJobSeconds/3600, v)
	} else if d%time.Second != 0 {
		return 0, fmt.Errorf("must be whole seconds, got %q", v)
	}
	return int64(d / time.Second), nil
}
