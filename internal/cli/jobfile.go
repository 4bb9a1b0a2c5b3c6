package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
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
// wire JobSpec plus conveniences: max_price as a decimal ("2.50"),
// duration and checkpoint_every as Go durations ("90m"), and deadline as
// --deadline takes it, a time or a span from now ("6h"). Unknown fields
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

	Duration        string        `json:"duration" yaml:"duration"`
	DurationSeconds int64         `json:"duration_seconds" yaml:"duration_seconds"`
	Deadline        *fileDeadline `json:"deadline" yaml:"deadline"`

	CheckpointEvery        string `json:"checkpoint_every" yaml:"checkpoint_every"`
	CheckpointEverySeconds int64  `json:"checkpoint_every_seconds" yaml:"checkpoint_every_seconds"`

	ReliabilityWeight float64       `json:"reliability_weight" yaml:"reliability_weight"`
	Datasets          []fileDataset `json:"datasets" yaml:"datasets"`
	Verifiable        bool          `json:"verifiable" yaml:"verifiable"`
	AvoidProviders    []string      `json:"avoid_providers" yaml:"avoid_providers"`
	MinTrustLevel     int           `json:"min_trust_level" yaml:"min_trust_level"`
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
	var ie *idlegrid.Error
	if err := p.set(n.Value); errors.As(err, &ie) {
		return idlegrid.Invalid(ie.Field, "line %d: %s", n.Line, ie.Message)
	} else if err != nil {
		return err
	}
	return nil
}

func (p *price) set(s string) error {
	m, err := idlegrid.ParseMicros(s)
	if err != nil {
		return idlegrid.Invalid("job.max_price", "%v; write a decimal amount per GPU-hour such as \"2.50\"", err)
	}
	p.micros = m
	return nil
}

// fileDeadline is a job file's deadline, written as --deadline takes it:
// a time ("2026-12-24T18:00:00Z", or "2026-12-24 18:00" in UTC) or a span
// from when the file is read ("6h"). A time YAML reads as a timestamp is
// taken as YAML reads it.
type fileDeadline struct {
	text string
	line int        // where a YAML file gives it; 0 in JSON
	at   *time.Time // a YAML timestamp
}

func (d *fileDeadline) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return idlegrid.Invalid("job.deadline", "line %d: must be %s; found %s", n.Line, deadlineForms, yamlKinds[strings.TrimPrefix(n.ShortTag(), "!!")])
	}
	if n.ShortTag() == "!!timestamp" {
		var t time.Time
		if err := n.Decode(&t); err == nil {
			d.at = &t
			return nil
		}
	}
	d.text, d.line = n.Value, n.Line
	return nil
}

func (d *fileDeadline) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &d.text); err != nil {
		return idlegrid.Invalid("job.deadline", "must be %s, got %s", deadlineForms, b)
	}
	return nil
}

// time is the deadline, a span read as from now.
func (d *fileDeadline) time(now time.Time) (*time.Time, error) {
	if d.at != nil {
		return d.at, nil
	}
	t, err := parseDeadline(d.text, now)
	if err != nil && d.line > 0 {
		return nil, idlegrid.Invalid("job.deadline", "line %d: %v", d.line, err)
	} else if err != nil {
		return nil, idlegrid.Invalid("job.deadline", "%v", err)
	}
	return &t, nil
}

// parseJobFile reads a job spec from a YAML or JSON file (JSON when the
// first non-space byte is '{'). It returns the spec as written, not yet
// normalised or validated; a deadline given as a span is from now.
func parseJobFile(r io.Reader) (idlegrid.JobSpec, error) {
	return parseJobFileAt(r, time.Now())
}

// parseJobFileAt is parseJobFile read at now.
func parseJobFileAt(r io.Reader, now time.Time) (idlegrid.JobSpec, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxJobFileBytes+1))
	if err != nil {
		return idlegrid.JobSpec{}, err
	} else if len(data) > maxJobFileBytes {
		return idlegrid.JobSpec{}, idlegrid.Invalid("job", "job file is over %d bytes", maxJobFileBytes)
	}
	var f jobFile
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		err = decodeJSONStrict(data, &f)
	} else {
		err = decodeYAMLStrict(data, &f)
	}
	if err != nil {
		return idlegrid.JobSpec{}, err
	}
	return f.spec(now)
}

func decodeJSONStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonFileError(data, err)
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
		return yamlFileError(data, v, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return idlegrid.Invalid("job", "job file holds more than one YAML document")
	}
	return nil
}

// jsonFileError turns encoding/json's error reading data into one that
// names the field, and the line, when it can.
func jsonFileError(data []byte, err error) error {
	var ie *idlegrid.Error
	if errors.As(err, &ie) {
		return ie
	}
	msg := err.Error()
	// encoding/json: `json: unknown field "gpu"`
	if field, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name := strings.Trim(field, `"`)
		path, within := jsonUnknownField(data, name)
		return idlegrid.Invalid("job."+path, "unknown field%s", unknownFieldAdvice(name, within))
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		got := kindOr(jsonKinds, te.Value, "a "+te.Value)
		if n, ok := strings.CutPrefix(te.Value, "number "); ok { // a number out of range, or not whole
			got = n
		}
		line := 1 + bytes.Count(data[:min(max(te.Offset, 0), int64(len(data)))], []byte("\n"))
		return idlegrid.Invalid("job."+te.Field, "line %d: must be %s, not %s", line, kindOr(goKinds, te.Type.String(), "a "+te.Type.String()), got)
	}
	return idlegrid.Invalid("job", "cannot read job file: %s", msg)
}

// jsonUnknownField finds in a JSON job file the key name that encoding/json
// found no field for (it names the key alone), reading the file as YAML,
// which JSON is: it returns the key's path and the struct it is not a
// field of, or name and jobFile when it cannot tell.
func jsonUnknownField(data []byte, name string) (string, reflect.Type) {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) == nil {
		var within reflect.Type
		path, _, ok := yamlFind(&doc, reflect.TypeFor[jobFile](), "", func(n *yaml.Node, in reflect.Type, key bool) bool {
			if key && n.Value == name && in.Kind() == reflect.Struct && yamlValueType(in, name) == nil {
				within = in
				return true
			}
			return false
		})
		if ok {
			return path, within
		}
	}
	return name, reflect.TypeFor[jobFile]()
}

// yamlFileError turns yaml.v3's error decoding data into v into one that
// names each field at fault, with its line: yaml.v3 says only the line
// ("line 2: cannot unmarshal !!str `two` into int"), so the field is
// found in the document, as the node on that line that v's type would
// decode into what the error names.
func yamlFileError(data []byte, v any, err error) error {
	var ie *idlegrid.Error
	var te *yaml.TypeError
	if errors.As(err, &ie) {
		return ie
	} else if !errors.As(err, &te) {
		return idlegrid.Invalid("job", "cannot read job file: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil {
		doc = yaml.Node{}
	}
	var ps []*idlegrid.Error
	named := map[*yaml.Node]bool{} // the nodes a problem names already
	for i, l := range te.Errors {
		if i == maxFileProblems {
			ps = append(ps, idlegrid.Invalid("job", "cannot read job file: %d more mistakes like these", len(te.Errors)-i))
			break
		}
		ps = append(ps, yamlProblem(&doc, reflect.TypeOf(v), l, named))
	}
	return idlegrid.Problems(ps)
}

// maxFileProblems is how many of a job file's mistakes are named: each
// is looked for through the whole file.
const maxFileProblems = 10

// The errors of yaml.v3's TypeError: a value of the wrong type, a field
// unknown, and a field given twice.
var (
	yamlTypeRE    = regexp.MustCompile(`^line (\d+): cannot unmarshal !!(\w+)(?: \x60(.*)\x60)? into (.+)$`)
	yamlUnknownRE = regexp.MustCompile(`^line (\d+): field (.+) not found in type (.+)$`)
	yamlTwiceRE   = regexp.MustCompile(`^line (\d+): mapping key (".*") already defined at line (\d+)$`)
)

// yamlProblem is one of yaml.v3's type errors, l, in the file's words,
// naming the field of doc (decoded into a t) it is about: "job.gpus",
// "job.datasets[1].size_gb"; "job" when none is found. yaml.v3 says its
// errors in the document's order, so one is about the first node that
// fits it of those no earlier one named (named, which it adds to): of
// "[[a], [b]]", the first error is about [a], the second about [b].
func yamlProblem(doc *yaml.Node, t reflect.Type, l string, named map[*yaml.Node]bool) *idlegrid.Error {
	if m := yamlTypeRE.FindStringSubmatch(l); m != nil {
		line, _ := strconv.Atoi(m[1])
		path, n, ok := yamlFind(doc, t, "", func(n *yaml.Node, into reflect.Type, key bool) bool {
			return !key && !named[n] && n.Line == line && n.ShortTag() == "!!"+m[2] && into.String() == m[4] && yamlValueIs(n, m[3])
		})
		named[n] = true
		got, want := yamlKinds[m[2]], goKinds[m[4]]
		switch {
		case got == "" || want == "":
			return yamlField(ok, path, "%s", l)
		case n != nil && n.Kind == yaml.ScalarNode:
			return yamlField(ok, path, "line %d: %q is %s; want %s", line, shorten(n.Value), got, want)
		case m[3] != "":
			return yamlField(ok, path, "line %d: %q is %s; want %s", line, m[3], got, want)
		}
		return yamlField(ok, path, "line %d: found %s; want %s", line, got, want)
	}
	if m := yamlUnknownRE.FindStringSubmatch(l); m != nil {
		line, _ := strconv.Atoi(m[1])
		var within reflect.Type // the struct the field is not in
		path, n, ok := yamlFind(doc, t, "", func(n *yaml.Node, in reflect.Type, key bool) bool {
			if key && !named[n] && n.Line == line && n.Value == m[2] && in.String() == m[3] {
				within = in
				return true
			}
			return false
		})
		named[n] = true
		if !ok {
			path = m[2]
		}
		return idlegrid.Invalid("job."+path, "unknown field (line %d)%s", line, unknownFieldAdvice(m[2], within))
	}
	if m := yamlTwiceRE.FindStringSubmatch(l); m != nil {
		line, _ := strconv.Atoi(m[1])
		name, _ := strconv.Unquote(m[2])
		path, n, ok := yamlFind(doc, t, "", func(n *yaml.Node, _ reflect.Type, key bool) bool {
			return key && !named[n] && n.Line == line && n.Value == name
		})
		named[n] = true
		return yamlField(ok, path, "line %d: given again; it was given at line %s already", line, m[3])
	}
	return yamlField(false, "", "%s", l)
}

// yamlField is the problem with the field at path, when found (ok), and
// otherwise with the file as a whole.
func yamlField(ok bool, path, format string, args ...any) *idlegrid.Error {
	msg := fmt.Sprintf(format, args...)
	if !ok || path == "" {
		return idlegrid.Invalid("job", "cannot read job file: %s", msg)
	}
	return idlegrid.Invalid("job."+path, "%s", msg)
}

// yamlValueIs reports whether n's value is v as yaml.v3 quotes it in an
// error: in full, or its first 7 bytes and "..." when over 10; any value
// when v is "" (yaml.v3 quotes none of a list's or a mapping's).
func yamlValueIs(n *yaml.Node, v string) bool {
	if v == "" || n.Value == v {
		return true
	}
	head, cut := strings.CutSuffix(v, "...")
	return cut && len(n.Value) > 10 && strings.HasPrefix(n.Value, head)
}

// shorten is v, cut to a length an error can quote.
func shorten(v string) string {
	if r := []rune(v); len(r) > 40 {
		return string(r[:37]) + "..."
	}
	return v
}

// yamlFind walks n, which decodes into a t, in document order, to the
// first node match accepts: a value with the type it decodes into, or a
// mapping's key with the type of the mapping (key true). It returns the
// node's path below path, "gpus" or "datasets[1].size_gb" ("" for the
// top node), and the node.
func yamlFind(n *yaml.Node, t reflect.Type, path string, match func(n *yaml.Node, into reflect.Type, key bool) bool) (string, *yaml.Node, bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "", nil, false
	}
	if n.Kind != yaml.DocumentNode && match(n, t, false) {
		return path, n, true
	}
	switch {
	case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
		return yamlFind(n.Content[0], t, path, match)
	case n.Kind == yaml.SequenceNode && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i, c := range n.Content {
			if p, found, ok := yamlFind(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), match); ok {
				return p, found, ok
			}
		}
	case n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			if match(k, t, true) {
				return p, k, true
			}
			if p, found, ok := yamlFind(v, yamlValueType(t, k.Value), p, match); ok {
				return p, found, ok
			}
		}
	}
	return "", nil, false
}

// unknownFieldAdvice is what follows "unknown field" for a field typed
// in a mapping decoded into a within (a struct; nil when not known): the
// field of within meant, or where the fields are described.
func unknownFieldAdvice(typed string, within reflect.Type) string {
	var names []string
	if within != nil && within.Kind() == reflect.Struct {
		for i := range within.NumField() {
			if name := yamlFieldName(within.Field(i)); name != "" && name != "-" {
				names = append(names, name)
			}
		}
	}
	if advice := didYouMean(typed, names, func(s string) string { return s }); advice != "" {
		return advice
	}
	return "; see 'idlegrid job submit --help' for the fields"
}

// yamlValueType is the type the value of key decodes into in a mapping
// decoded into a t: a struct's field of that yaml name, or a map's
// values; nil for none.
func yamlValueType(t reflect.Type, key string) reflect.Type {
	switch t.Kind() {
	case reflect.Map:
		return t.Elem()
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); yamlFieldName(f) == key {
				return f.Type
			}
		}
	}
	return nil
}

// yamlFieldName is the name a job file gives a field of its structs: the
// first part of its yaml tag.
func yamlFieldName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

// yamlKinds and goKinds name YAML's and the job file's kinds of value in
// words.
var (
	yamlKinds = map[string]string{"str": "text", "int": "a number", "float": "a number", "bool": "true or false",
		"seq": "a list", "map": "a mapping", "null": "nothing", "timestamp": "a time", "binary": "binary data"}
	goKinds = map[string]string{"int": "a whole number", "int64": "a whole number", "float64": "a number", "string": "text",
		"bool": "true or false", "[]string": "a list", "map[string]string": "a mapping of names to values",
		"cli.jobFile":       "a mapping of job fields (image: …, gpus: …)",
		"cli.fileDataset":   "a dataset: a mapping with a name and a size_gb",
		"[]cli.fileDataset": "a list of datasets, each a mapping with a name and a size_gb"}
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

// spec turns the file into a JobSpec, resolving the conveniences.
func (f *jobFile) spec(now time.Time) (idlegrid.JobSpec, error) {
	s := idlegrid.JobSpec{
		Name: f.Name, Kind: idlegrid.WorkloadKind(f.Kind), Image: f.Image, Command: f.Command, Env: f.Env,
		GPUs: 1, Nodes: f.Nodes, GPUModels: f.GPUModels, MinVRAMMB: f.MinVRAMMB, CPUCores: f.CPUCores, RAMMB: f.RAMMB,
		Tier:                     idlegrid.Tier(f.Tier),
		MaxPriceMicrosPerGPUHour: idlegrid.Micros(f.MaxPriceMicrosPerGPUHour),
		Region:                   f.Region, RegionPreferred: f.RegionPreferred, Residency: f.Residency,
		ReliabilityWeight: f.ReliabilityWeight, Verifiable: f.Verifiable, AvoidProviders: f.AvoidProviders,
		MinTrustLevel: f.MinTrustLevel,
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
	if f.Deadline != nil {
		if s.Deadline, err = f.Deadline.time(now); err != nil {
			return s, err
		}
	}
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
