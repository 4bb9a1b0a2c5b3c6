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
`, idlegrid.JobSpec{Image: "x", GPUs: 1, ReliabilityWeight: 2.5, Datasets: []idlegrid.Dataset{{Name: "imagenet", SizeGB: 150}, {Name: "c4"}},
			Verifiable: true, AvoidProviders: []string{"acct_a", "acct_b"}}},
		{"RankingAndTrustJSON", `{"image": "x", "reliability_weight": 0.5, "datasets": [{"name": "laion", "size_gb": 9}]}`,
			idlegrid.JobSpec{Image: "x", GPUs: 1, ReliabilityWeight: 0.5, Datasets: []idlegrid.Dataset{{Name: "laion", SizeGB: 9}}}},
		{"LeadingSpaceJSON", "\n  {\"image\": \"x\"}\n", idlegrid.JobSpec{Image: "x", GPUs: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseJobFile(strings.NewReader(tt.file))
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
		{"UnknownYAMLField", "image: x\ngpu: 2\n", "job.gpu", "unknown field (line 2)"},
		{"UnknownJSONField", `{"image": "x", "gpu_model": "T4"}`, "job.gpu_model", "unknown field"},
		{"UnknownNestedDoesNotExist", "image: x\nresources: {gpus: 1}\n", "job.resources", "unknown field"},
		{"BadPrice", "max_price: cheap\n", "job.max_price", `not a decimal amount: "cheap"`},
		{"TooPrecisePrice", `{"max_price": "0.0000001"}`, "job.max_price", "at most 6 decimal places"},
		{"PriceTwice", "max_price: 1\nmax_price_micros_per_gpu_hour: 1000000\n", "job.max_price", "not both"},
		{"PriceAsList", "max_price: [1]\n", "job.max_price", "decimal amount"},
		{"BadDuration", "duration: forever\n", "job.duration", `must be a duration such as 90m`},
		{"FractionalDuration", "duration: 1.5s\n", "job.duration", "whole seconds"},
		{"DurationOver30Days", "duration: 800h\n", "job.duration", `must be at most 720h (30 days), got "800h"`},
		{"DurationTwice", "duration: 1h\nduration_seconds: 3600\n", "job.duration", "not both"},
		{"BadCheckpointEvery", "checkpoint_every: often\n", "job.checkpoint_every", `must be a duration such as 90m`},
		{"CheckpointEveryTwice", "checkpoint_every: 1h\ncheckpoint_every_seconds: 3600\n", "job.checkpoint_every", "not both"},
		{"WrongJSONType", `{"gpus": "two"}`, "job.gpus", "must be a whole number, not text"},
		{"ListForJSONEnv", `{"env": ["A=1"]}`, "job.env", "must be a mapping of names to values, not a list"},
		{"WrongYAMLType", "gpus: two\n", "job", `cannot read job file: line 1: "two" is text; want a whole number`},
		{"ListForYAMLEnv", "image: x\nenv: [A=1]\n", "job", "cannot read job file: line 2: found a list; want a mapping of names to values"},
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
