package agent_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
)

// TestStarter_Config: the starter config loads as the agent reads it, with
// what it was told, and a starter the agent could not load is refused.
func TestStarter_Config(t *testing.T) {
	floors := map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierGold: 500_000, idlegrid.TierSilver: 400_000, idlegrid.TierBronze: 125_000}
	windows := idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, TimeZone: "Europe/Paris", Weekly: []idlegrid.WeeklyWindow{
		{Days: []string{"mon", "tue"}, Start: "22:00", End: "08:00"}, {Days: []string{"sat", "sun"}, Start: "00:00", End: "00:00"}}}
	for _, tt := range []struct {
		name string
		s    agent.Starter
	}{
		{"always", agent.Starter{Path: "agent.yaml", Server: "https://market.example", DataDir: "/var/lib/idlegrid", Name: "rig-1",
			Region: "us-east", Residency: "US", Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways, TimeZone: "America/New_York"},
			Floors: floors, GPUs: "2x H100-80GB (81559 MB), by NVML"}},
		{"windows when idle, simulated", agent.Starter{Path: "try.yaml", Server: "http://127.0.0.1:7070", DataDir: "/srv/gpu #1: idle", Name: "pc",
			Region: "eu-west", Residency: "EU", Schedule: windows, Mode: agent.ModeWhenIdle, Floors: floors, FakeGPUs: "2xRTX4090"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data, err := tt.s.Config()
			if err != nil {
				t.Fatal(err)
			}
			c, err := agent.ParseConfig(data)
			if err != nil {
				t.Fatalf("the starter does not load: %v\n%s", err, data)
			}
			wantMode := tt.s.Mode
			if wantMode == "" {
				wantMode = agent.ModeSchedule
			}
			if c.Server != tt.s.Server || c.DataDir != tt.s.DataDir || c.Name != tt.s.Name || c.Region != tt.s.Region ||
				c.Residency != tt.s.Residency || c.Mode != wantMode || c.FakeGPUs != tt.s.FakeGPUs {
				t.Errorf("loaded %+v, want what the starter says: %+v", c, tt.s)
			}
			if tt.s.FakeGPUs != "" && c.RuntimeName() != agent.RuntimeFake {
				t.Errorf("runtime %s with simulated GPUs, want fake", c.RuntimeName())
			}
			o, err := c.Offer([]idlegrid.GPU{{UUID: "GPU-1", Model: "RTX4090", VRAMMB: 24564}}, agent.Host{Name: "x"})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(o.Schedule, tt.s.Schedule) {
				t.Errorf("schedule %+v, want %+v", o.Schedule, tt.s.Schedule)
			}
			if !reflect.DeepEqual(o.Ask.FloorMicrosPerGPUHour, floors) {
				t.Errorf("floors %v, want %v", o.Ask.FloorMicrosPerGPUHour, floors)
			}
			if !strings.Contains(string(data), "idlegrid agent --check --config "+tt.s.Path) {
				t.Errorf("the starter does not say how to check it:\n%s", data)
			}
		})
	}
	bad := agent.Starter{Server: "http://x", DataDir: "/d", Name: "n", Region: "EU West", Residency: "EU", Floors: floors,
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}}
	if _, err := bad.Config(); err == nil || !strings.Contains(err.Error(), "region") {
		t.Errorf("a starter with region %q: %v, want refused naming the region", bad.Region, err)
	}
}
