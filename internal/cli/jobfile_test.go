package cli

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

func TestParseJobFile(t *testing.T) {
	deadline := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	now := time.Date(2029, 6, 1, 12, 0, 0, 500, time.UTC) // when the file is read
	full := idlegrid.JobSpec{
		Name: "llama-finetune", Kind: idlegrid.KindFineTune, Image: "ghcr.io/acme/trainer:1.4",
		Command: []string{"python", "train.py", "--epochs", "3"}, Env: map[string]string{"WANDB_MODE": "offline"},
		GPUs: 2, Nodes: 1, GPUModels: []string{"H100-80GB", "A100-80GB"}, MinVRAMMB: 40000,
		Tier: idlegrid.TierSilver, MaxPriceMicrosPerGPUHour: 2_500_000,
		Region: "eu-west", RegionPreferred: true, Residency: "EU", DurationSeconds: 7200, Deadline: &deadline,
	}
	for _, tt := range []struct {
		name string
		file string
		want idlegrid.JobSpec
	}{
		{"YAML", `
name: llama-finetune
kind: fine-tuning
image: ghcr.io/acme/trainer:1.4
command: [python, train.py, --epochs, "3"]
env: {WANDB_MODE: offline}
gpus: 2
nodes: 1
gpu_models: [H100-80GB, A100-80GB]
min_vram_mb: 40000
tier: silver
max_price: "2.50"
region: eu-west
region_preferred: true
residency: EU
duration: 2h
deadline: 2030-01-02T03:04:05Z
`, full},
		{"JSON", `{"name": "llama-finetune", "kind": "fine-tuning", "image": "ghcr.io/acme/trainer:1.4",
			"command": ["python", "train.py", "--epochs", "3"], "env": {"WANDB_MODE": "offline"},
			"gpus": 2, "nodes": 1, "gpu_models": ["H100-80GB", "A100-80GB"], "min_vram_mb": 40000,
			"tier": "silver", "max_price_micros_per_gpu_hour": 2500000, "region": "eu-west", "region_preferred": true,
			"residency": "EU", "duration_seconds": 7200, "deadline": "2030-01-02T03:04:05Z"}`, full},
		{"YAMLUnquotedPrice", "image: x\nmax_price: 2.50\nduration: 90m\n",
			idlegrid.JobSpec{Image: "x", GPUs: 1, MaxPriceMicrosPerGPUHour: 2_500_000, DurationSeconds: 5400}},
		{"JSONNumberPrice", `{"image": "x", "max_price": 0.000001, "duration": "1m30s"}`,
			idlegrid.JobSpec{Image: "x", GPUs: 1, MaxPriceMicrosPerGPUHour: 1, DurationSeconds: 90}},
		{"JSONStringPrice", `{"image": "x", "max_price": "$12"}`,
			idlegrid.JobSpec{Image: "x", GPUs: 1, MaxPriceMicrosPerGPUHour: 12_000_000}},
		{"CheckpointEvery", "image: x\ntier: bronze\ncheckpoint_every: 30m\n",
			idlegrid.JobSpec{Image: "x", GPUs: 1, Tier: idlegrid.TierBronze, CheckpointEverySeconds: 1800}},
		{"CheckpointEverySeconds", `{"image": "x", "checkpoint_every_seconds": 600}`,
			idlegrid.JobSpec{Image: "x", GPUs: 1, CheckpointEverySeconds: 600}},
		{"Interruptible", "image: x\ninterruptible: true\n",
			idlegrid.JobSpec{Image: "x", GPUs: 1, Interruptible: true}},
		{"RankingAndTrust", `
image: x
reliability_weight: 2.5
datasets:
  - {name: imagenet, size_gb: 150}
  - name: c4
verifiable: true
avoid_providers: [acct_a, acct_b]
min_trust_level: 2
`, idlegrid.JobSpec{Image: "x", GPUs: 1, ReliabilityWeight: 2.5, Datasets: []idlegrid.Dataset{{Name: "imagenet", SizeGB: 150}, {Name: "c4"}},
			Verifiable: true, AvoidProviders: []string{"acct_a", "acct_b"}, MinTrustLevel: 2}},
		{"RankingAndTrustJSON", `{"image": "x", "reliability_weight": 0.5, "datasets": [{"name": "laion", "size_gb": 9}]}`,
			idlegrid.JobSpec{Image: "x", GPUs: 1, ReliabilityWeight: 0.5, Datasets: []idlegrid.Dataset{{Name: "laion", SizeGB: 9}}}},
		{"LeadingSpaceJSON", "\n  {\"image\": \"x\"}\n", idlegrid.JobSpec{Image: "x", GPUs: 1}},
		// A deadline is written as --deadline takes it: a time, or a span
		// from when the file is read, to the second.
		{"DeadlineSpan", "image: x\ndeadline: 2h\n", idlegrid.JobSpec{Image: "x", GPUs: 1, Deadline: ptr(time.Date(2029, 6, 1, 14, 0, 0, 0, time.UTC))}},
		{"DeadlineSpanJSON", `{"image": "x", "deadline": "90m"}`, idlegrid.JobSpec{Image: "x", GPUs: 1, Deadline: ptr(time.Date(2029, 6, 1, 13, 30, 0, 0, time.UTC))}},
		{"DeadlineQuoted", "image: x\ndeadline: \"2030-01-02T03:04:05Z\"\n", idlegrid.JobSpec{Image: "x", GPUs: 1, Deadline: &deadline}},
		{"DeadlineWithOffset", "image: x\ndeadline: 2030-01-02T05:04:05+02:00\n", idlegrid.JobSpec{Image: "x", GPUs: 1, Deadline: &deadline}},
		{"DeadlineUTCWithoutZone", "image: x\ndeadline: 2030-01-02 03:04\n", idlegrid.JobSpec{Image: "x", GPUs: 1, Deadline: ptr(time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC))}},
		{"DeadlineYAMLDate", "image: x\ndeadline: 2030-01-02\n", idlegrid.JobSpec{Image: "x", GPUs: 1, Deadline: ptr(time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC))}},
		{"DeadlineJSONNull", `{"image": "x", "deadline": null}`, idlegrid.JobSpec{Image: "x", GPUs: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseJobFileAt(strings.NewReader(tt.file), now)
			if err != nil {
				t.Fatal(err)
			}
			if !sameSpec(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseJobFile_Errors(t *testing.T) {
	for _, tt := range []struct {
		name, file string
		field      string // the field the error names
		message    string // a part of the message
	}{
		{"UnknownYAMLField", "image: x\ngpu: 2\n", "job.gpu", "unknown field (line 2); did you mean gpus?"},
		{"UnknownJSONField", `{"image": "x", "gpu_model": "T4"}`, "job.gpu_model", "unknown field; did you mean gpu_models?"},
		{"UnknownFarFromAny", "image: x\ncolour: blue\n", "job.colour", "unknown field (line 2); see 'idlegrid job submit --help' for the fields"},
		{"UnknownInJSONDataset", `{"image": "x", "datasets": [{"name": "c", "size_gb": 1}, {"nam": "d"}]}`, "job.datasets[1].nam", "unknown field; did you mean name?"},
		{"UnknownNestedDoesNotExist", "image: x\nresources: {gpus: 1}\n", "job.resources", "unknown field"},
		{"BadPrice", "max_price: cheap\n", "job.max_price", `not a decimal amount: "cheap"`},
		{"TooPrecisePrice", `{"max_price": "0.0000001"}`, "job.max_price", "at most 6 decimal places"},
		{"PriceTwice", "max_price: 1\nmax_price_micros_per_gpu_hour: 1000000\n", "job.max_price", "not both"},
		{"PriceAsList", "max_price: [1]\n", "job.max_price", "decimal amount"},
		{"BadPriceLine", "image: x\nmax_price: cheap\n", "job.max_price", `line 2: not a decimal amount: "cheap"`},
		{"BadDuration", "duration: forever\n", "job.duration", `must be a duration such as 90m`},
		{"FractionalDuration", "duration: 1.5s\n", "job.duration", "whole seconds"},
		{"DurationOver30Days", "duration: 800h\n", "job.duration", `must be at most 720h (30 days), got "800h"`},
		{"DurationTwice", "duration: 1h\nduration_seconds: 3600\n", "job.duration", "not both"},
		{"BadCheckpointEvery", "checkpoint_every: often\n", "job.checkpoint_every", `must be a duration such as 90m`},
		{"CheckpointEveryTwice", "checkpoint_every: 1h\ncheckpoint_every_seconds: 3600\n", "job.checkpoint_every", "not both"},
		{"WrongJSONType", `{"gpus": "two"}`, "job.gpus", "line 1: must be a whole number, not text"},
		{"ListForJSONEnv", `{"env": ["A=1"]}`, "job.env", "must be a mapping of names to values, not a list"},
		{"JSONLine", "{\"image\": \"x\",\n  \"nodes\": true}", "job.nodes", "line 2: must be a whole number, not true or false"},
		{"JSONLineAfterSpace", "\n\n{\"image\": \"x\", \"gpus\": \"two\"}", "job.gpus", "line 3: must be a whole number, not text"},
		{"JSONFractionForInt", `{"gpus": 1.5}`, "job.gpus", "line 1: must be a whole number, not 1.5"},
		{"JSONTextForFloat", `{"reliability_weight": "high"}`, "job.reliability_weight", "must be a number, not text"},
		{"JSONNumberForText", `{"image": 5}`, "job.image", "must be text, not a number"},
		{"JSONTextForList", `{"command": "python train.py"}`, "job.command", "must be a list, not text"},
		{"JSONTextForBool", `{"verifiable": "yes"}`, "job.verifiable", "must be true or false, not text"},
		{"JSONObjectForDatasets", `{"datasets": {"name": "a"}}`, "job.datasets", "must be a list of datasets, each a mapping with a name and a size_gb, not a mapping"},
		{"JSONInDataset", `{"datasets": [{"name": "a", "size_gb": "lots"}]}`, "job.datasets.size_gb", "must be a whole number, not text"},
		{"WrongYAMLType", "image: x/y:1\ngpus: two\n", "job.gpus", `line 2: "two" is text; want a whole number`},
		{"YAMLTextForFloat", "reliability_weight: high\n", "job.reliability_weight", `line 1: "high" is text; want a number`},
		{"YAMLTextForBool", "image: x\ninterruptible: maybe\n", "job.interruptible", `line 2: "maybe" is text; want true or false`},
		{"YAMLTextForInt64", "duration_seconds: an hour\n", "job.duration_seconds", `line 1: "an hour" is text; want a whole number`},
		{"YAMLTextForList", "command: python train.py --epochs 3\n", "job.command", `line 1: "python train.py --epochs 3" is text; want a list`},
		{"YAMLListForText", "image: [a, b]\n", "job.image", "line 1: found a list; want text"},
		{"YAMLMappingForText", "image: x\nregion: {name: eu-west}\n", "job.region", "line 2: found a mapping; want text"},
		{"ListForYAMLEnv", "image: x\nenv: [A=1]\n", "job.env", "line 2: found a list; want a mapping of names to values"},
		{"ListInYAMLEnv", "image: x\nenv: {A: 1, B: [2]}\n", "job.env.B", "line 2: found a list; want text"},
		{"YAMLMappingForDatasets", "datasets: {name: a}\n", "job.datasets", "line 1: found a mapping; want a list of datasets"},
		{"YAMLInDataset", "datasets:\n  - {name: a, size_gb: 1}\n  - {name: b, size_gb: lots}\n", "job.datasets[1].size_gb", `line 3: "lots" is text; want a whole number`},
		{"YAMLTextForDataset", "datasets: [imagenet]\n", "job.datasets[0]", `line 1: "imagenet" is text; want a dataset`},
		{"YAMLNestedListForText", "command: [a, [b]]\n", "job.command[1]", "line 1: found a list; want text"},
		{"UnknownInDataset", "datasets:\n  - {nam: c}\n", "job.datasets[0].nam", "unknown field (line 2); did you mean name?"},
		{"YAMLFieldTwice", "image: x\ngpus: 1\nimage: y\n", "job.image", "line 3: given again; it was given at line 1 already"},
		{"BadDeadline", "image: x\ndeadline: soon\n", "job.deadline",
			`line 2: must be a time such as 2026-12-24T18:00:00Z (or 2026-12-24 18:00, UTC) or a span from now such as 6h, got "soon"`},
		{"NegativeDeadline", "deadline: -2h\n", "job.deadline", `a span from now must be positive, got "-2h"`},
		{"NumberDeadline", "deadline: 5\n", "job.deadline", `or a span from now such as 6h, got "5"`},
		{"ListDeadline", "deadline: [2h]\n", "job.deadline", "line 1: must be a time such as 2026-12-24T18:00:00Z (or 2026-12-24 18:00, UTC) or a span from now such as 6h; found a list"},
		{"BadJSONDeadline", `{"deadline": "tomorrow"}`, "job.deadline", `or a span from now such as 6h, got "tomorrow"`},
		{"NumberJSONDeadline", `{"deadline": 7200}`, "job.deadline", "or a span from now such as 6h, got 7200"},
		{"NotAMapping", "hello\n", "job", `line 1: "hello" is text; want a mapping of job fields`},
		{"Empty", "", "job", "empty"},
		{"TwoYAMLDocuments", "image: x\n---\nimage: y\n", "job", "more than one YAML document"},
		{"TwoJSONObjects", `{"image": "x"} {"image": "y"}`, "job", "more than one JSON object"},
		{"BrokenJSON", `{"image": `, "job", "cannot read job file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseJobFile(strings.NewReader(tt.file))
			e, ok := err.(*idlegrid.Error)
			if !ok {
				t.Fatalf("got %T %v, want *idlegrid.Error", err, err)
			}
			if e.Code != idlegrid.EINVALID || e.Field != tt.field || !strings.Contains(e.Message, tt.message) {
				t.Fatalf("got %s %q: %q; want invalid %q containing %q", e.Code, e.Field, e.Message, tt.field, tt.message)
			}
		})
	}
}

// TestParseJobFile_ErrorsEach: a YAML file with several values of the
// wrong type has each named, as its field with its line.
func TestParseJobFile_ErrorsEach(t *testing.T) {
	_, err := parseJobFile(strings.NewReader("image: x\ngpus: two\nenv: [A=1]\nverifiable: sure\nsizes: 3\n"))
	var got []string
	if e, ok := err.(*idlegrid.Error); ok {
		for _, p := range e.All() {
			got = append(got, p.Error())
		}
	}
	want := []string{
		`job.gpus: line 2: "two" is text; want a whole number`,
		`job.env: line 3: found a list; want a mapping of names to values`,
		`job.verifiable: line 4: "sure" is text; want true or false`,
		`job.sizes: unknown field (line 5); see 'idlegrid job submit --help' for the fields`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// TestParseJobFile_ManyErrors: of a file with many mistakes, the first
// are named, and the rest counted.
func TestParseJobFile_ManyErrors(t *testing.T) {
	_, err := parseJobFile(strings.NewReader("command: [" + strings.Repeat("[a], ", 24) + "[a]]\n"))
	e, ok := err.(*idlegrid.Error)
	if !ok {
		t.Fatalf("got %T %v, want *idlegrid.Error", err, err)
	}
	ps := e.All()
	if len(ps) != maxFileProblems+1 || ps[9].Field != "job.command[9]" || ps[10].Error() != "job: cannot read job file: 15 more mistakes like these" {
		t.Fatalf("got %d problems: %v", len(ps), e)
	}
}

func TestParseJobFile_TooLarge(t *testing.T) {
	_, err := parseJobFile(strings.NewReader("image: x\n# " + strings.Repeat("a", maxJobFileBytes)))
	if got, want := idlegrid.ErrorMessage(err), "job: job file is over 1048576 bytes"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// FuzzParseJobFile checks that the parser never panics, and that what it
// accepts survives a round trip through the wire form of a spec (JSON),
// which it must also accept.
func FuzzParseJobFile(f *testing.F) {
	for _, seed := range []string{
		"image: x\nmax_price: \"2.50\"\nduration: 90m\n",
		`{"image": "x", "max_price": 2.5, "duration_seconds": 60, "env": {"A": "b"}}`,
		"gpus: 2\ngpu_models: [H100-80GB]\ntier: gold\ndeadline: 2030-01-01T00:00:00Z\n",
		"max_price: -1\n",
		"command: [a, b]\ninterruptible: false\n",
		"{}",
		"- a\n- b\n",
		"&a [*a]",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, file string) {
		spec, err := parseJobFile(strings.NewReader(file))
		if err != nil {
			if idlegrid.ErrorCode(err) != idlegrid.EINVALID {
				t.Fatalf("error %v has code %q, want invalid", err, idlegrid.ErrorCode(err))
			}
			return
		}
		wire, err := json.Marshal(spec)
		if err != nil {
			t.Fatalf("marshal %+v: %v", spec, err)
		}
		again, err := parseJobFile(strings.NewReader(string(wire)))
		if err != nil {
			t.Fatalf("the wire form %s of an accepted file is refused: %v", wire, err)
		}
		if !sameSpec(spec, again) {
			t.Fatalf("round trip changed the spec:\nfirst  %+v\nsecond %+v", spec, again)
		}
	})
}

// sameSpec compares specs, treating empty and nil lists and maps alike and
// deadlines by instant.
func sameSpec(a, b idlegrid.JobSpec) bool {
	if (a.Deadline == nil) != (b.Deadline == nil) || (a.Deadline != nil && !a.Deadline.Equal(*b.Deadline)) {
		return false
	}
	a.Deadline, b.Deadline = nil, nil
	for _, s := range []*idlegrid.JobSpec{&a, &b} {
		if len(s.Command) == 0 {
			s.Command = nil
		}
		if len(s.Env) == 0 {
			s.Env = nil
		}
		if len(s.GPUModels) == 0 {
			s.GPUModels = nil
		}
	}
	return reflect.DeepEqual(a, b)
}

func ptr[T any](v T) *T { return &v }
