package reputation

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

const hour = 3600 // GPU-seconds in a GPU-hour

func TestLevels_Level(t *testing.T) {
	ls := DefaultLevels()
	for _, tt := range []struct {
		name    string
		s       Standing
		level   int
		reasons []string
	}{
		{"newcomer", Standing{Score: 0.9}, 0, []string{
			"level 1 (established) needs 10 GPU-hours served, has 0",
			"level 1 (established) needs verified hardware: its challenges have not all passed yet",
		}},
		{"established", Standing{Score: 0.93, GPUSecondsServed: 45 * hour, HardwareVerified: true}, 1, []string{
			"level 1 (established): score 0.930 ≥ 0.850, 45 GPU-hours served ≥ 10, hardware verified",
			"level 2 (trusted) needs 200 GPU-hours served, has 45",
		}},
		{"trusted", Standing{Score: 0.95, GPUSecondsServed: 250*hour + 1800, HardwareVerified: true}, 2, []string{
			"level 2 (trusted): score 0.950 ≥ 0.920, 250.5 GPU-hours served ≥ 200, hardware verified",
			"level 3 (elite) needs a score of 0.970, has 0.950",
			"level 3 (elite) needs 2000 GPU-hours served, has 250.5",
		}},
		{"elite", Standing{Score: 0.99, GPUSecondsServed: 3000 * hour, HardwareVerified: true}, 3, []string{
			"level 3 (elite): score 0.990 ≥ 0.970, 3000 GPU-hours served ≥ 2000, hardware verified",
		}},
		{"hours without score", Standing{Score: 0.80, GPUSecondsServed: 3000 * hour, HardwareVerified: true}, 0, []string{
			"level 1 (established) needs a score of 0.850, has 0.800",
		}},
		{"kept within the margin", Standing{Score: 0.905, GPUSecondsServed: 300 * hour, HardwareVerified: true, Current: 2}, 2, []string{
			"level 2 (trusted): score 0.905 kept within the demotion margin of 0.020 below 0.920, 300 GPU-hours served ≥ 200, hardware verified",
			"level 3 (elite) needs a score of 0.970, has 0.905",
			"level 3 (elite) needs 2000 GPU-hours served, has 300",
		}},
		{"no margin for a promotion", Standing{Score: 0.905, GPUSecondsServed: 300 * hour, HardwareVerified: true, Current: 1}, 1, nil},
		{"below the margin", Standing{Score: 0.899, GPUSecondsServed: 300 * hour, HardwareVerified: true, Current: 2}, 1, nil},
		{"hardware unchecked", Standing{Score: 0.95, GPUSecondsServed: 300 * hour, Current: 2,
			HardwareNote: "hardware could not be checked: 3 challenges in a row answered unsupported: busy"}, 0, []string{
			"level 1 (established) needs verified hardware: hardware could not be checked: 3 challenges in a row answered unsupported: busy",
		}},
		{"quarantined", Standing{Score: 0.99, GPUSecondsServed: 3000 * hour, HardwareVerified: true, Quarantined: true, Current: 3}, 0, []string{
			"quarantined: level 0 until the quarantine is lifted",
		}},
		{"held for an offence", Standing{Score: 0.99, GPUSecondsServed: 3000 * hour, HardwareVerified: true, Current: 3,
			Held: "dispute d_1 (mismatched_result) upheld on 2026-12-05; until 2027-01-04"}, 0, []string{
			"held at level 0: dispute d_1 (mismatched_result) upheld on 2026-12-05; until 2027-01-04",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := ls.Level(tt.s)
			if a.Level != tt.level || a.Name != ls.Name(tt.level) {
				t.Errorf("got level %d (%s), want %d (%s); reasons %q", a.Level, a.Name, tt.level, ls.Name(tt.level), a.Reasons)
			}
			if tt.reasons != nil && !slices.Equal(a.Reasons, tt.reasons) {
				t.Errorf("reasons:\ngot  %q\nwant %q", a.Reasons, tt.reasons)
			}
		})
	}
}

func TestLevels_ChangeOf(t *testing.T) {
	ls := DefaultLevels()
	now := ls.Level(Standing{Score: 0.95, GPUSecondsServed: 250 * hour, HardwareVerified: true})
	c, ok := ls.ChangeOf("nod_1", 1, now, t0)
	if !ok || !c.Promotion() || c.From != 1 || c.To != 2 || c.FromName != "established" || c.ToName != "trusted" || !c.At.Equal(t0) {
		t.Fatalf("got %+v, %v", c, ok)
	}
	want := "nod_1 promoted from level 1 (established) to level 2 (trusted): " +
		"level 2 (trusted): score 0.950 ≥ 0.920, 250 GPU-hours served ≥ 200, hardware verified; " +
		"level 3 (elite) needs a score of 0.970, has 0.950; level 3 (elite) needs 2000 GPU-hours served, has 250"
	if got := c.String(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}

	down, ok := ls.ChangeOf("nod_1", 2, ls.Level(Standing{Quarantined: true}), t0)
	if !ok || down.Promotion() || down.String() != "nod_1 demoted from level 2 (trusted) to level 0 (newcomer): quarantined: level 0 until the quarantine is lifted" {
		t.Errorf("got %q, %v", down.String(), ok)
	}
	if _, ok := ls.ChangeOf("nod_1", 2, now, t0); ok {
		t.Error("a change recorded while the level stayed")
	}
}

func TestLevels_Validate(t *testing.T) {
	if err := DefaultLevels().Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	for _, tt := range []struct {
		field  string
		change func(ls *Levels)
	}{
		{"levels.demotion_margin", func(ls *Levels) { ls.DemotionMargin = -0.1 }},
		{"levels.offence_hold", func(ls *Levels) { ls.OffenceHold = -time.Hour }},
		{"levels.offence_hold", func(ls *Levels) { ls.OffenceHold = MaxOffenceHold + time.Hour }},
		{"levels.rules[1].level", func(ls *Levels) { ls.Rules[1].Level = 3 }},
		{"levels.rules[0].name", func(ls *Levels) { ls.Rules[0].Name = "" }},
		{"levels.rules[2].min_score", func(ls *Levels) { ls.Rules[2].MinScore = 1.5 }},
		{"levels.rules[0].min_gpu_hours", func(ls *Levels) { ls.Rules[0].MinGPUHours = -1 }},
		{"levels.rules[1]", func(ls *Levels) { ls.Rules[1].MinScore = 0.5 }},
		{"levels.rules[2]", func(ls *Levels) { ls.Rules[2].VerifiedHardware = false }},
	} {
		ls := DefaultLevels()
		tt.change(&ls)
		var e *idlegrid.Error
		if err := ls.Validate(); !errors.As(err, &e) || e.Field != tt.field {
			t.Errorf("got %v, want an error on %s", err, tt.field)
		}
	}
}
