package idlegrid_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

var jobNow = time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)

func validSpec() idlegrid.JobSpec {
	return idlegrid.JobSpec{
		Name:                     "llama-ft",
		Kind:                     idlegrid.KindFineTune,
		Image:                    "ghcr.io/acme/trainer:1.2",
		Command:                  []string{"python", "train.py"},
		Env:                      map[string]string{"EPOCHS": "3", "_X": "1"},
		GPUs:                     2,
		Nodes:                    1,
		GPUModels:                []string{"H100-80GB"},
		MinVRAMMB:                40000,
		CPUCores:                 8,
		RAMMB:                    64000,
		Tier:                     idlegrid.TierSilver,
		MaxPriceMicrosPerGPUHour: 3 * idlegrid.MicrosPerUnit,
		Region:                   "eu-west",
		Residency:                "EU",
		DurationSeconds:          3600,
	}
}

func TestJobSpec_Normalize(t *testing.T) {
	tests := []struct {
		name string
		in   idlegrid.JobSpec
		want idlegrid.JobSpec
	}{
		{
			name: "defaults",
			in:   idlegrid.JobSpec{},
			want: idlegrid.JobSpec{Nodes: 1, Tier: idlegrid.TierSilver, Kind: idlegrid.KindOther},
		},
		{
			name: "bronze is interruptible",
			in:   idlegrid.JobSpec{Tier: idlegrid.TierBronze, Nodes: 3, Kind: idlegrid.KindEval},
			want: idlegrid.JobSpec{Tier: idlegrid.TierBronze, Nodes: 3, Kind: idlegrid.KindEval, Interruptible: true},
		},
		{
			name: "gold left as asked",
			in:   idlegrid.JobSpec{Tier: idlegrid.TierGold, Interruptible: true},
			want: idlegrid.JobSpec{Tier: idlegrid.TierGold, Nodes: 1, Kind: idlegrid.KindOther, Interruptible: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			got.Normalize()
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
	t.Run("deadline in UTC to the microsecond", func(t *testing.T) {
		s := validSpec()
		d := time.Date(2026, 1, 2, 16, 4, 5, 123456789, time.FixedZone("CET", 3600))
		s.Deadline = &d
		s.Normalize()
		want := time.Date(2026, 1, 2, 15, 4, 5, 123456000, time.UTC)
		if s.Deadline.Location() != time.UTC || !s.Deadline.Equal(want) {
			t.Errorf("deadline = %v, want %v", s.Deadline, want)
		}
		if d.Nanosecond() != 123456789 {
			t.Errorf("the caller's time changed to %v", d)
		}
	})
	t.Run("idempotent", func(t *testing.T) {
		s := validSpec()
		s.Normalize()
		once := fmt.Sprintf("%+v", s)
		s.Normalize()
		if twice := fmt.Sprintf("%+v", s); once != twice {
			t.Errorf("second Normalize changed %s\nto %s", once, twice)
		}
	})
}

func TestJobSpec_Validate(t *testing.T) {
	s := validSpec()
	if err := s.Validate(jobNow); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	past, future := jobNow.Add(-time.Second), jobNow.Add(time.Hour)
	tests := []struct {
		name   string
		change func(s *idlegrid.JobSpec)
		field  string // "" means valid
	}{
		{"long name", func(s *idlegrid.JobSpec) { s.Name = strings.Repeat("n", 101) }, "job.name"},
		{"name at the limit", func(s *idlegrid.JobSpec) { s.Name = strings.Repeat("n", 100) }, ""},
		{"name with an escape", func(s *idlegrid.JobSpec) { s.Name = "x\x1b[31mRED" }, "job.name"},
		{"name with a line break", func(s *idlegrid.JobSpec) { s.Name = "x\nnewline" }, "job.name"},
		{"name with a tab", func(s *idlegrid.JobSpec) { s.Name = "a\tb" }, "job.name"},
		{"name in another script", func(s *idlegrid.JobSpec) { s.Name = "訓練-ü 1" }, ""},
		{"unknown kind", func(s *idlegrid.JobSpec) { s.Kind = "mining" }, "job.kind"},
		{"empty kind", func(s *idlegrid.JobSpec) { s.Kind = "" }, "job.kind"},
		{"no image", func(s *idlegrid.JobSpec) { s.Image = "" }, "job.image"},
		{"image with space", func(s *idlegrid.JobSpec) { s.Image = "ubuntu latest" }, "job.image"},
		{"image by digest", func(s *idlegrid.JobSpec) { s.Image = "ubuntu@sha256:" + strings.Repeat("ab", 32) }, ""},
		{"image by a digest that is not one", func(s *idlegrid.JobSpec) { s.Image = "x@sha256:zz" }, "job.image"},
		{"image by a short digest", func(s *idlegrid.JobSpec) { s.Image = "ubuntu@sha256:abc123" }, "job.image"},
		{"image on a registry port", func(s *idlegrid.JobSpec) { s.Image = "registry.example.com:5000/x:1" }, ""},
		{"image on a port past 65535", func(s *idlegrid.JobSpec) { s.Image = "registry.example.com:99999/x:1" }, "job.image"},
		{"image on port 0", func(s *idlegrid.JobSpec) { s.Image = "localhost:0/x:1" }, "job.image"},
		{"image with an uppercase tag", func(s *idlegrid.JobSpec) { s.Image = "ghcr.io/acme/trainer:V1.2-RC1" }, ""},
		{"image with an uppercase repository", func(s *idlegrid.JobSpec) { s.Image = "ghcr.io/Acme/trainer:1" }, "job.image"},
		{"long command", func(s *idlegrid.JobSpec) { s.Command = make([]string, idlegrid.MaxCommandWords+1) }, "job.command"},
		{"too many env", func(s *idlegrid.JobSpec) {
			s.Env = map[string]string{}
			for i := range idlegrid.MaxEnvEntries + 1 {
				s.Env[fmt.Sprint("V", i)] = ""
			}
		}, "job.env"},
		{"bad env name", func(s *idlegrid.JobSpec) { s.Env = map[string]string{"1BAD": "x"} }, "job.env"},
		{"env name with dash", func(s *idlegrid.JobSpec) { s.Env = map[string]string{"MY-VAR": "x"} }, "job.env"},
		{"zero gpus", func(s *idlegrid.JobSpec) { s.GPUs = 0 }, "job.gpus"},
		{"too many gpus", func(s *idlegrid.JobSpec) { s.GPUs = idlegrid.MaxGPUsPerNode + 1 }, "job.gpus"},
		{"most gpus", func(s *idlegrid.JobSpec) { s.GPUs = idlegrid.MaxGPUsPerNode }, ""},
		{"zero nodes", func(s *idlegrid.JobSpec) { s.Nodes = 0 }, "job.nodes"},
		{"too many nodes", func(s *idlegrid.JobSpec) { s.Nodes = idlegrid.MaxNodesPerJob + 1 }, "job.nodes"},
		{"negative vram", func(s *idlegrid.JobSpec) { s.MinVRAMMB = -1 }, "job.min_vram_mb"},
		{"negative cpu", func(s *idlegrid.JobSpec) { s.CPUCores = -1 }, "job.cpu_cores"},
		{"negative ram", func(s *idlegrid.JobSpec) { s.RAMMB = -1 }, "job.ram_mb"},
		{"unknown tier", func(s *idlegrid.JobSpec) { s.Tier = "platinum" }, "job.tier"},
		{"zero cap", func(s *idlegrid.JobSpec) { s.MaxPriceMicrosPerGPUHour = 0 }, "job.max_price_micros_per_gpu_hour"},
		{"cap over 1000", func(s *idlegrid.JobSpec) { s.MaxPriceMicrosPerGPUHour = 1000*idlegrid.MicrosPerUnit + 1 }, "job.max_price_micros_per_gpu_hour"},
		{"cap at 1000", func(s *idlegrid.JobSpec) { s.MaxPriceMicrosPerGPUHour = 1000 * idlegrid.MicrosPerUnit }, ""},
		{"interruptible gold", func(s *idlegrid.JobSpec) { s.Tier, s.Interruptible = idlegrid.TierGold, true }, "job.interruptible"},
		{"uninterruptible bronze", func(s *idlegrid.JobSpec) { s.Tier, s.Interruptible = idlegrid.TierBronze, false }, "job.interruptible"},
		{"interruptible silver", func(s *idlegrid.JobSpec) { s.Interruptible = true }, "job.interruptible"},
		{"bad region", func(s *idlegrid.JobSpec) { s.Region = "EU-West" }, "job.region"},
		{"preferred without region", func(s *idlegrid.JobSpec) { s.Region, s.RegionPreferred = "", true }, "job.region_preferred"},
		{"zero duration", func(s *idlegrid.JobSpec) { s.DurationSeconds = 0 }, "job.duration_seconds"},
		{"over 30 days", func(s *idlegrid.JobSpec) { s.DurationSeconds = idlegrid.MaxJobSeconds + 1 }, "job.duration_seconds"},
		{"negative checkpoint interval", func(s *idlegrid.JobSpec) { s.CheckpointEverySeconds = -1 }, "job.checkpoint_every_seconds"},
		{"checkpoint interval over 30 days", func(s *idlegrid.JobSpec) { s.CheckpointEverySeconds = idlegrid.MaxJobSeconds + 1 }, "job.checkpoint_every_seconds"},
		{"30 days", func(s *idlegrid.JobSpec) { s.DurationSeconds = idlegrid.MaxJobSeconds }, ""},
		{"deadline past", func(s *idlegrid.JobSpec) { s.Deadline = &past }, "job.deadline"},
		{"deadline now", func(s *idlegrid.JobSpec) { s.Deadline = &jobNow }, "job.deadline"},
		{"deadline ahead", func(s *idlegrid.JobSpec) { s.Deadline = &future }, ""},
		{"deadline before the run could end", func(s *idlegrid.JobSpec) { s.Deadline, s.DurationSeconds = &future, 3601 }, "job.deadline"},
		{"empty model name", func(s *idlegrid.JobSpec) { s.GPUModels = []string{"H100", ""} }, "job.gpu_models"},
		{"long model name", func(s *idlegrid.JobSpec) { s.GPUModels = []string{strings.Repeat("m", 65)} }, "job.gpu_models"},
		{"model name at the limit", func(s *idlegrid.JobSpec) { s.GPUModels = []string{strings.Repeat("m", idlegrid.MaxGPUModelBytes)} }, ""},
		{"negative trust level", func(s *idlegrid.JobSpec) { s.MinTrustLevel = -1 }, "job.min_trust_level"},
		{"trust level past the most", func(s *idlegrid.JobSpec) { s.MinTrustLevel = idlegrid.MaxTrustLevel + 1 }, "job.min_trust_level"},
		{"trust level", func(s *idlegrid.JobSpec) { s.MinTrustLevel = 2 }, ""},
		{"long checkpoint reference", func(s *idlegrid.JobSpec) { s.CheckpointRef = strings.Repeat("c", idlegrid.MaxCheckpointRefBytes+1) }, "job.checkpoint_ref"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.change(&s)
			err := s.Validate(jobNow)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			wantField(t, err, tt.field)
		})
	}
	t.Run("normalized empty spec names the image and the rest", func(t *testing.T) {
		var s idlegrid.JobSpec
		s.Normalize()
		err := s.Validate(jobNow)
		for _, f := range []string{"job.image", "job.gpus", "job.max_price_micros_per_gpu_hour", "job.duration_seconds"} {
			if !strings.Contains(idlegrid.ErrorMessage(err), f+": ") {
				t.Errorf("empty spec: %v; want it to name %s", err, f)
			}
		}
		if e := (*idlegrid.Error)(nil); !errors.As(err, &e) || e.Field != "job.image" {
			t.Errorf("empty spec: %v; want job.image first", err)
		}
	})
}

// TestJobSpec_Validate_everyProblem: a spec wrong in several fields is
// refused with every one of them named, in the spec's order.
func TestJobSpec_Validate_everyProblem(t *testing.T) {
	s := validSpec()
	s.GPUs, s.Tier, s.DurationSeconds, s.Env = 0, "platinum", 0, map[string]string{"B-AD": "x", "A-BAD": "y"}
	err := s.Validate(jobNow)
	var e *idlegrid.Error
	if !errors.As(err, &e) {
		t.Fatalf("a spec wrong in four fields is valid")
	}
	for _, p := range e.All() {
		if p.Code != idlegrid.EINVALID || p.Message == "" || len(p.More) != 0 {
			t.Errorf("problem %+v: want an invalid field with a reason, alone", p)
		}
	}
	if got := fieldsAtFault(t, err); got != "job.env,job.gpus,job.tier,job.duration_seconds" {
		t.Errorf("fields at fault = %s, want job.env,job.gpus,job.tier,job.duration_seconds", got)
	}
	want := `job.env: bad variable name "A-BAD"; job.gpus: must be between 1 and 16; ` +
		`job.tier: must be gold, silver or bronze, got "platinum"; job.duration_seconds: must be between 1 and 2592000 (30 days)`
	if e.Error() != want {
		t.Errorf("error = %q\nwant    %q", e.Error(), want)
	}
	if e.Field != "job.env" || idlegrid.ErrorMessage(e) != want {
		t.Errorf("the error's own field %q and message %q: want the first problem's field and every problem", e.Field, idlegrid.ErrorMessage(e))
	}
}

func TestProblems(t *testing.T) {
	if err := idlegrid.Problems(nil); err != nil {
		t.Errorf("no problems = %v, want nil", err)
	}
	one := idlegrid.Invalid("a", "bad")
	if err := idlegrid.Problems([]*idlegrid.Error{one}); err.Error() != "a: bad" {
		t.Errorf("one problem = %v", err)
	}
	two := idlegrid.Problems([]*idlegrid.Error{one, idlegrid.Invalid("b", "worse")})
	var e *idlegrid.Error
	if !errors.As(two, &e) || len(e.All()) != 2 || e.All()[1].Field != "b" || len(e.All()[0].More) != 0 || len(one.More) != 0 {
		t.Errorf("two problems = %+v; want a then b, the first's record left alone", two)
	}
}

func TestTier(t *testing.T) {
	for i, tier := range idlegrid.Tiers {
		if !tier.Valid() || tier.Rank() != i {
			t.Errorf("%s: valid %v rank %d, want rank %d", tier, tier.Valid(), tier.Rank(), i)
		}
	}
	if idlegrid.Tier("").Valid() || idlegrid.Tier("Gold").Valid() {
		t.Errorf("unknown tiers are valid")
	}
}

func TestJobState_Terminal(t *testing.T) {
	tests := map[idlegrid.JobState]bool{
		idlegrid.JobQueued: false, idlegrid.JobRunning: false,
		idlegrid.JobSucceeded: true, idlegrid.JobFailed: true, idlegrid.JobCancelled: true,
	}
	for s, want := range tests {
		if got := s.Terminal(); got != want {
			t.Errorf("%s.Terminal() = %v, want %v", s, got, want)
		}
	}
}

func TestJob_String(t *testing.T) {
	j := &idlegrid.Job{ID: "job_x", JobSpec: idlegrid.JobSpec{Tier: idlegrid.TierSilver, Nodes: 2, GPUs: 4}}
	if got, want := j.String(), "job_x (silver 2x4GPU)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestJobSpec_Submitted: what the market set on a job is left out, and
// the spec itself is not changed.
func TestJobSpec_Submitted(t *testing.T) {
	s := idlegrid.JobSpec{Image: "x/y:1", GPUs: 2, CheckpointRef: "s3://ckpt/7", VerifiesLeaseID: "lease_1"}
	got := s.Submitted()
	if got.CheckpointRef != "" || got.VerifiesLeaseID != "" || got.Image != "x/y:1" || got.GPUs != 2 {
		t.Errorf("Submitted() = %+v, want the spec without its checkpoint and verified lease", got)
	}
	if s.CheckpointRef != "s3://ckpt/7" {
		t.Errorf("Submitted changed the spec: %+v", s)
	}
}

// TestJob_LatestStart: a job that resumes from a checkpoint needs only the
// run it has left before its deadline; one with none, its whole run.
func TestJob_LatestStart(t *testing.T) {
	due := time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)
	j := &idlegrid.Job{JobSpec: idlegrid.JobSpec{DurationSeconds: 3600, Deadline: &due}}
	for _, tt := range []struct {
		resume int64
		want   time.Time
	}{
		{0, due.Add(-time.Hour)},
		{45 * 60, due.Add(-15 * time.Minute)},
		{3600, due.Add(-time.Second)}, // it still has to start
	} {
		j.ResumeSeconds = tt.resume
		if got, ok := j.LatestStart(); !ok || !got.Equal(tt.want) {
			t.Errorf("with %d s done: latest start %v, %v; want %v", tt.resume, got, ok, tt.want)
		}
	}
	if _, ok := (&idlegrid.Job{}).LatestStart(); ok {
		t.Error("a job without a deadline has a latest start")
	}
}
