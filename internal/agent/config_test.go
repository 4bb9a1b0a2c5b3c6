package agent_test

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
)

const exampleConfig = "testdata/agent.yaml"

func mustLoadConfig(tb testing.TB, path string) *agent.Config {
	tb.Helper()
	c, err := agent.LoadConfig(path)
	if err != nil {
		tb.Fatalf("LoadConfig(%s): %v", path, err)
	}
	return c
}

func TestLoadConfig(t *testing.T) {
	t.Run("Example", func(t *testing.T) {
		got := mustLoadConfig(t, exampleConfig)
		want := &agent.Config{
			Server: "http://127.0.0.1:7070", JoinToken: "igj_example", DataDir: "/var/lib/idlegrid",
			Name: "garage-4090", Region: "eu-west", Residency: "EU",
			Labels:   map[string]string{"owner": "alice", "cooling": "water"},
			CPUCores: 16, RAMMB: 65536,
			Schedule: agent.ScheduleConfig{
				Mode: idlegrid.ScheduleWindows, TimeZone: "Europe/Berlin",
				Weekly: []idlegrid.WeeklyWindow{
					{Days: []string{"sat", "sun"}, Start: "00:00", End: "00:00"},
					{Days: []string{"mon", "tue", "wed", "thu", "fri"}, Start: "22:00", End: "07:00"},
				},
				OneOff: []idlegrid.OneOffWindow{{
					Start: time.Date(2030, 12, 24, 8, 0, 0, 0, time.UTC), End: time.Date(2030, 12, 27, 8, 0, 0, 0, time.UTC),
				}},
			},
			Ask: agent.AskConfig{
				Floor:         map[idlegrid.Tier]string{"gold": "2.10", "silver": "1.50", "bronze": "0.80"},
				AllowedKinds:  []idlegrid.WorkloadKind{idlegrid.KindTraining, idlegrid.KindFineTune, idlegrid.KindInference},
				MaxJobSeconds: 86400,
			},
			Mode: agent.ModeWhenIdle, Idle: agent.IdleConfig{MaxUtilPct: 10, For: 10 * time.Minute},
			ThermalCapC: 83, PowerCapW: 350,
			AllowedImages: []string{"ghcr.io/acme/", "pytorch/pytorch", "nvcr.io/nvidia/pytorch:24.*"},
			FakeGPUs:      "2xRTX4090", FakeSpeed: 60,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("config mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("Minimal", func(t *testing.T) {
		c := mustParse(t, minimal)
		if got := c.Schedule.Mode; got != "" {
			t.Errorf("mode = %q, want empty (always)", got)
		}
		o, err := c.Offer(oneGPU, agent.Host{Name: "box", CPUCores: 8, RAMMB: 1024, DiskGB: 100})
		if err != nil {
			t.Fatalf("Offer: %v", err)
		}
		if o.Name != "box" || o.CPUCores != 8 || o.RAMMB != 1024 || o.DiskGB != 100 || o.Schedule.Mode != idlegrid.ScheduleAlways {
			t.Errorf("offer = %+v, want host defaults and mode always", o)
		}
	})
	t.Run("UnquotedPrice", func(t *testing.T) {
		c := mustParse(t, strings.Replace(minimal, `silver: "1.50"`, "silver: 1.50", 1))
		o, err := c.Offer(oneGPU, agent.Host{Name: "box"})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := o.Ask.FloorMicrosPerGPUHour[idlegrid.TierSilver], idlegrid.Micros(1_500_000); got != want {
			t.Errorf("silver floor = %d, want %d", got, want)
		}
	})
	t.Run("Missing", func(t *testing.T) {
		if _, err := agent.LoadConfig(filepath.Join(t.TempDir(), "nope.yaml")); err == nil {
			t.Error("got nil error for a missing file")
		}
	})
	t.Run("ErrorNamesFile", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "agent.yaml")
		os.WriteFile(path, []byte(minimal+"bogus: 1\n"), 0o600)
		_, err := agent.LoadConfig(path)
		if err == nil || !strings.Contains(err.Error(), path) || idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Errorf("error = %v, want an invalid error naming %s", err, path)
		}
	})
}

const minimal = `server: 127.0.0.1:7070
data_dir: /tmp/idlegrid
region: us-east
residency: US
ask:
  floor:
    silver: "1.50"
fake_gpus: 1xT4
`

var oneGPU = []idlegrid.GPU{{UUID: "GPU-1", Model: "T4", VRAMMB: 15360}}

func mustParse(tb testing.TB, yaml string) *agent.Config {
	tb.Helper()
	c, err := agent.ParseConfig([]byte(yaml))
	if err != nil {
		tb.Fatalf("ParseConfig: %v\n%s", err, yaml)
	}
	return c
}

func TestParseConfig_Errors(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		field    string
		mentions []string
	}{
		{"UnknownKey", minimal + "regoin: eu-west\n", "regoin", []string{"line 9", "unknown key", "known keys here: server, join_token"}},
		{"UnknownNestedKey", strings.Replace(minimal, "  floor:", "  flor:", 1), "ask.flor", []string{"line 6", "floor, allowed_kinds, max_job_seconds"}},
		{"UnknownWindowKey", minimal + "schedule:\n  mode: windows\n  weekly:\n    - days: [sat]\n      start: \"00:00\"\n      stop: \"01:00\"\n", "schedule.weekly[0].stop", []string{"line 14", "days, start, end"}},
		{"BadPrice", strings.Replace(minimal, `"1.50"`, `"1.5.0"`, 1), "ask.floor.silver", []string{`"2.10"`}},
		{"TooPrecisePrice", strings.Replace(minimal, `"1.50"`, `"1.0000001"`, 1), "ask.floor.silver", []string{"6 decimal places"}},
		{"ZeroPrice", strings.Replace(minimal, `"1.50"`, `"0"`, 1), "ask.floor.silver", []string{"between"}},
		{"UnknownTier", strings.Replace(minimal, "silver:", "platinum:", 1), "ask.floor", []string{`"platinum"`, "gold, silver or bronze"}},
		{"NoPrice", strings.Replace(minimal, `    silver: "1.50"`+"\n", "", 1), "ask.floor", []string{"at least one tier"}},
		{"BadKind", strings.Replace(minimal, "ask:\n", "ask:\n  allowed_kinds: [mining]\n", 1), "ask.allowed_kinds", []string{`"mining"`}},
		{"BadWindowStart", minimal + "schedule:\n  mode: windows\n  weekly:\n    - days: [sat]\n      start: \"25:00\"\n      end: \"01:00\"\n", "schedule.weekly[0].start", []string{"HH:MM"}},
		{"BadWindowDay", minimal + "schedule:\n  mode: windows\n  weekly:\n    - days: [caturday]\n      start: \"00:00\"\n      end: \"01:00\"\n", "schedule.weekly[0].days", []string{`"caturday"`}},
		{"WindowsWithoutWindows", minimal + "schedule:\n  mode: windows\n", "schedule.weekly", []string{"at least one"}},
		{"BadMode", minimal + "schedule:\n  mode: sometimes\n", "schedule.mode", []string{`"sometimes"`}},
		{"BadTimeZone", minimal + "schedule:\n  time_zone: Mars/Olympus\n", "schedule.time_zone", []string{"Mars/Olympus"}},
		{"OneOffBackwards", minimal + "schedule:\n  mode: windows\n  one_off:\n    - start: 2030-01-02T00:00:00Z\n      end: 2030-01-01T00:00:00Z\n", "schedule.one_off[0].end", []string{"after start"}},
		{"BadTime", minimal + "schedule:\n  one_off:\n    - start: tomorrow\n", "schedule.one_off[0].start", []string{"line 11", "want a time", `"tomorrow"`}},
		{"NotANumber", minimal + "cpu_cores: lots\n", "cpu_cores", []string{"line 9", "want a whole number", `"lots"`}},
		{"Negative", minimal + "ram_mb: -1\n", "ram_mb", []string{"negative"}},
		{"ListForText", minimal + "name: [a, b]\n", "name", []string{"want text, got a list"}},
		{"BadName", minimal + "name: 'my node!'\n", "name", []string{"letters, digits"}},
		{"BadRegion", strings.Replace(minimal, "us-east", "US East", 1), "region", []string{"lower-case"}},
		{"NoResidency", strings.Replace(minimal, "residency: US\n", "", 1), "residency", []string{"required"}},
		{"NoServer", strings.Replace(minimal, "server: 127.0.0.1:7070\n", "", 1), "server", []string{"required"}},
		{"ServerScheme", strings.Replace(minimal, "server: 127.0.0.1:7070", "server: ftp://127.0.0.1:7070", 1), "server", []string{"http:// or https://", `"ftp://127.0.0.1:7070"`}},
		{"ServerAPIPath", strings.Replace(minimal, "server: 127.0.0.1:7070", "server: https://market.example.com/v1", 1), "server", []string{"without /v1", "https://market.example.com"}},
		{"NoDataDir", strings.Replace(minimal, "data_dir: /tmp/idlegrid\n", "", 1), "data_dir", []string{"required"}},
		{"BadFakeGPUs", strings.Replace(minimal, "1xT4", "1xGTX1080", 1), "fake_gpus", []string{`"GTX1080"`, "known models"}},
		{"BadSpeed", minimal + "fake_speed: -2\n", "fake_speed", nil},
		{"BadRuntime", minimal + "runtime: podman\n", "runtime", []string{`"podman"`, "docker or fake"}},
		{"Empty", "", "config", []string{"empty"}},
		{"NotYAML", "server: [", "config", nil},
		{"DuplicateKey", minimal + "region: eu-west\n", "config", []string{"already defined"}},
		{"NotAMapping", "- a\n- b\n", "config", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agent.ParseConfig([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("got nil error for:\n%s", tt.yaml)
			}
			e, ok := err.(*idlegrid.Error)
			if !ok {
				t.Fatalf("error %v is a %T, want *idlegrid.Error", err, err)
			}
			if e.Code != idlegrid.EINVALID || e.Field != tt.field || len(e.More) != 0 {
				t.Errorf("error %q: code %q field %q and %d more, want %q %q alone", err, e.Code, e.Field, len(e.More), idlegrid.EINVALID, tt.field)
			}
			for _, m := range tt.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

// TestParseConfig_everyFault: a config wrong in several places names each,
// by the key to edit, so that a provider mends it in one go.
func TestParseConfig_everyFault(t *testing.T) {
	yaml := strings.NewReplacer("server: 127.0.0.1:7070\n", "", "us-east", "US East", "1xT4", "1xGTX1080").Replace(minimal) +
		"runtime: podman\nram_mb: -1\nschedule:\n  mode: sometimes\n"
	_, err := agent.ParseConfig([]byte(yaml))
	if got, want := fieldsAtFault(t, err), "server,ram_mb,runtime,fake_gpus,region,schedule.mode"; got != want {
		t.Errorf("fields at fault = %s\nwant %s\n(%v)", got, want, err)
	}
}

func TestConfig_RuntimeName(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"FakeGPUsDefaultToFake", minimal, agent.RuntimeFake},
		{"RealGPUsDefaultToDocker", strings.Replace(minimal, "fake_gpus: 1xT4\n", "", 1), agent.RuntimeDocker},
		{"FakeGPUsInDocker", minimal + "runtime: docker\n", agent.RuntimeDocker},
		{"RealGPUsSimulated", strings.Replace(minimal, "fake_gpus: 1xT4\n", "", 1) + "runtime: fake\n", agent.RuntimeFake},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustParse(t, tt.yaml).RuntimeName(); got != tt.want {
				t.Errorf("RuntimeName() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConfig_ApplyEnv(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == agent.EnvJoinToken {
				return v
			}
			return ""
		}
	}
	c := mustParse(t, minimal+"join_token: from-file\n")
	c.ApplyEnv(env(""))
	if c.JoinToken != "from-file" {
		t.Errorf("token = %q, want from-file when the env is empty", c.JoinToken)
	}
	c.ApplyEnv(env(" from-env "))
	if c.JoinToken != "from-env" {
		t.Errorf("token = %q, want from-env", c.JoinToken)
	}
}

func TestConfig_Offer(t *testing.T) {
	c := mustLoadConfig(t, exampleConfig)
	_, priv, _ := ed25519.GenerateKey(nil)
	det, err := c.Detector(priv)
	if err != nil {
		t.Fatal(err)
	}
	devs, err := det.Detect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var gpus []idlegrid.GPU
	for _, d := range devs {
		gpus = append(gpus, d.GPU)
	}
	o, err := c.Offer(gpus, agent.Host{Name: "ignored", CPUCores: 2, RAMMB: 2, DiskGB: 500})
	if err != nil {
		t.Fatalf("Offer: %v", err)
	}
	if len(o.GPUs) != 2 || o.GPUs[0].Model != "RTX4090" {
		t.Errorf("gpus = %+v, want 2 RTX4090", o.GPUs)
	}
	if o.Name != "garage-4090" || o.CPUCores != 16 || o.RAMMB != 65536 || o.DiskGB != 500 {
		t.Errorf("offer %+v: want config values over the host's, host's disk", o)
	}
	want := map[idlegrid.Tier]idlegrid.Micros{"gold": 2_100_000, "silver": 1_500_000, "bronze": 800_000}
	if diff := cmp.Diff(want, o.Ask.FloorMicrosPerGPUHour); diff != "" {
		t.Errorf("floors (-want +got):\n%s", diff)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("offer does not validate: %v", err)
	}
	// Saturday noon in Berlin is inside a window.
	if until := o.Schedule.AvailableUntil(time.Date(2030, 6, 1, 10, 0, 0, 0, time.UTC)); until.IsZero() {
		t.Error("not available on a Saturday")
	}
	t.Run("EveryProblemByItsConfigKey", func(t *testing.T) {
		bad := *c
		bad.Region, bad.Residency = "", ""
		_, err := bad.Offer(nil, agent.Host{})
		if got := fieldsAtFault(t, err); got != "fake_gpus,region,residency" {
			t.Errorf("fields at fault = %s, want fake_gpus,region,residency (%v)", got, err)
		}
	})
	t.Run("NoGPUs", func(t *testing.T) {
		_, err := c.Offer(nil, agent.Host{})
		if e, ok := err.(*idlegrid.Error); !ok || e.Field != "fake_gpus" {
			t.Errorf("error = %v, want one naming fake_gpus", err)
		}
	})
	t.Run("RealGPUs", func(t *testing.T) {
		c := *c
		c.FakeGPUs = ""
		t.Setenv("PATH", t.TempDir()) // no nvidia-smi
		d, note, err := c.OpenDetector(t.Context(), priv)
		if err == nil {
			if cl, ok := d.(interface{ Close() error }); ok {
				cl.Close()
			}
			t.Skipf("this machine has NVIDIA GPUs (%s)", note)
		}
		if idlegrid.ErrorCode(err) != idlegrid.EUNAVAILABLE || !strings.Contains(err.Error(), "install the NVIDIA driver") {
			t.Errorf("Detector error = %v, want unavailable, saying what to install", err)
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	example, err := os.ReadFile(exampleConfig)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{string(example), minimal, minimal + "bogus: 1\n", "a: &x {b: 1}\nc: *x\n", "<<: {server: x}\n", "ask: {floor: {gold: 1e400}}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := agent.ParseConfig(data)
		if err != nil {
			if idlegrid.ErrorCode(err) != idlegrid.EINVALID {
				t.Fatalf("error %v has code %q, want invalid", err, idlegrid.ErrorCode(err))
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
		o, err := c.Offer(oneGPU, agent.Host{Name: "fuzz"})
		if err != nil {
			t.Fatalf("valid config gives no offer: %v", err)
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("valid config gives an invalid offer: %v", err)
		}
	})
}

// fieldsAtFault is the config keys err names, in order, comma-separated.
func fieldsAtFault(tb testing.TB, err error) string {
	tb.Helper()
	var e *idlegrid.Error
	if !errors.As(err, &e) {
		tb.Fatalf("got %v (%T), want *idlegrid.Error", err, err)
	}
	var fields []string
	for _, p := range e.All() {
		fields = append(fields, p.Field)
	}
	return strings.Join(fields, ",")
}
