package reputation

import (
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
)

// LevelRule is what a level needs. A node or provider holds the highest
// level whose rule it meets together with the rules of every level below.
type LevelRule struct {
	Level            int     `json:"level"`
	Name             string  `json:"name"`
	MinScore         float64 `json:"min_score"`
	MinGPUHours      float64 `json:"min_gpu_hours"`     // GPU-hours of leases served, all time
	VerifiedHardware bool    `json:"verified_hardware"` // the hardware passed its challenges and its fingerprint holds
}

// Levels is the ladder of levels above level 0, which needs nothing.
type Levels struct {
	Rules []LevelRule `json:"rules"` // levels 1, 2, 3…, in order
	// DemotionMargin lets a holder keep its level while its score is at most
	// this far below the level's minimum, so that a score hovering at a
	// threshold does not promote and demote on every lease.
	DemotionMargin float64 `json:"demotion_margin"`
	// OffenceHold holds every node of a provider, and the provider, at
	// level 0 for this long after one of its offences was upheld, whatever
	// its record, so that a caught cheater with a long record does not keep
	// its level and gold work; 0 holds nothing.
	OffenceHold time.Duration `json:"offence_hold"`
}

// MaxOffenceHold bounds Levels.OffenceHold.
const MaxOffenceHold = 10 * 365 * 24 * time.Hour

// NewcomerName is the name of level 0.
const NewcomerName = "newcomer"

// DefaultLevels are the levels of the default trust policy. Gold jobs need
// level 2 there (see internal/trustpolicy).
func DefaultLevels() Levels {
	return Levels{
		Rules: []LevelRule{
			{Level: 1, Name: "established", MinScore: 0.85, MinGPUHours: 10, VerifiedHardware: true},
			{Level: 2, Name: "trusted", MinScore: 0.92, MinGPUHours: 200, VerifiedHardware: true},
			{Level: 3, Name: "elite", MinScore: 0.97, MinGPUHours: 2000, VerifiedHardware: true},
		},
		DemotionMargin: 0.02,
		OffenceHold:    30 * 24 * time.Hour,
	}
}

// Validate checks the ladder, naming fields as the policy file does.
func (ls Levels) Validate() error {
	if !(ls.DemotionMargin >= 0 && ls.DemotionMargin < 1) {
		return idlegrid.Invalid("levels.demotion_margin", "must be at least 0 and below 1, got %g", ls.DemotionMargin)
	} else if ls.OffenceHold < 0 || ls.OffenceHold > MaxOffenceHold {
		return idlegrid.Invalid("levels.offence_hold", "must be between 0 (no hold) and 3650d, got %s", ls.OffenceHold)
	}
	var prev LevelRule
	for i, r := range ls.Rules {
		f := fmt.Sprintf("levels.rules[%d]", i)
		switch {
		case r.Level != i+1:
			return idlegrid.Invalid(f+".level", "levels must be 1, 2, 3… in order; want %d, got %d", i+1, r.Level)
		case r.Name == "" || len(r.Name) > 32:
			return idlegrid.Invalid(f+".name", "required, at most 32 characters")
		case !(r.MinScore >= 0 && r.MinScore <= 1):
			return idlegrid.Invalid(f+".min_score", "must be between 0 and 1, got %g", r.MinScore)
		case !(r.MinGPUHours >= 0 && r.MinGPUHours <= 1e9):
			return idlegrid.Invalid(f+".min_gpu_hours", "must be between 0 and 1e9, got %g", r.MinGPUHours)
		case r.MinScore < prev.MinScore || r.MinGPUHours < prev.MinGPUHours || (prev.VerifiedHardware && !r.VerifiedHardware):
			return idlegrid.Invalid(f, "a level must need at least what the level below it needs")
		}
		prev = r
	}
	return nil
}

// Standing is what a level is decided on.
type Standing struct {
	Score            float64 `json:"score"`
	GPUSecondsServed int64   `json:"gpu_seconds_served"`
	HardwareVerified bool    `json:"hardware_verified"`
	// HardwareNote says why the hardware is not verified, when there is
	// more to say than that its challenges have not all passed.
	HardwareNote string `json:"hardware_note,omitempty"`
	Quarantined  bool   `json:"quarantined"` // a quarantined node holds level 0
	// Held says why the holder is held at level 0 for an upheld offence
	// (Levels.OffenceHold), or "".
	Held    string `json:"held,omitempty"`
	Current int    `json:"current"` // the level held now, for the demotion margin
}

// Assessment is a level with its reasons, in words: what the level rests on,
// and what the next level still needs.
type Assessment struct {
	Level   int      `json:"level"`
	Name    string   `json:"name"`
	Reasons []string `json:"reasons"`
}

// Level decides the level s earns. Levels are cumulative: level 2 needs the
// rules of levels 1 and 2.
func (ls Levels) Level(s Standing) Assessment {
	a := Assessment{Name: NewcomerName}
	if s.Quarantined {
		a.Reasons = []string{"quarantined: level 0 until the quarantine is lifted"}
		return a
	}
	if s.Held != "" {
		a.Reasons = []string{"held at level 0: " + s.Held}
		return a
	}
	for _, r := range ls.Rules {
		missing := ls.missing(r, s)
		if len(missing) > 0 {
			for _, m := range missing {
				a.Reasons = append(a.Reasons, fmt.Sprintf("level %d (%s) needs %s", r.Level, r.Name, m))
			}
			return a
		}
		a.Level, a.Name = r.Level, r.Name
		a.Reasons = []string{ls.met(r, s)}
	}
	return a
}

// missing lists what s lacks for rule r.
func (ls Levels) missing(r LevelRule, s Standing) []string {
	var out []string
	need := r.MinScore
	if r.Level <= s.Current {
		need -= ls.DemotionMargin
	}
	if s.Score < need {
		out = append(out, fmt.Sprintf("a score of %.3f, has %.3f", r.MinScore, s.Score))
	}
	if h := hours(s.GPUSecondsServed); h < r.MinGPUHours {
		out = append(out, fmt.Sprintf("%s GPU-hours served, has %s", trim(r.MinGPUHours), trim(h)))
	}
	if r.VerifiedHardware && !s.HardwareVerified {
		why := "its challenges have not all passed yet"
		if s.HardwareNote != "" {
			why = s.HardwareNote
		}
		out = append(out, "verified hardware: "+why)
	}
	return out
}

// met says why s holds rule r's level.
func (ls Levels) met(r LevelRule, s Standing) string {
	why := fmt.Sprintf("level %d (%s): score %.3f ≥ %.3f", r.Level, r.Name, s.Score, r.MinScore)
	if s.Score < r.MinScore {
		why = fmt.Sprintf("level %d (%s): score %.3f kept within the demotion margin of %.3f below %.3f",
			r.Level, r.Name, s.Score, ls.DemotionMargin, r.MinScore)
	}
	why += fmt.Sprintf(", %s GPU-hours served ≥ %s", trim(hours(s.GPUSecondsServed)), trim(r.MinGPUHours))
	if r.VerifiedHardware {
		why += ", hardware verified"
	}
	return why
}

func hours(gpuSeconds int64) float64 { return float64(gpuSeconds) / 3600 }

// trim formats hours with one decimal, or none when whole.
func trim(h float64) string {
	if h == float64(int64(h)) {
		return fmt.Sprintf("%d", int64(h))
	}
	return fmt.Sprintf("%.1f", h)
}

// Change is a promotion or a demotion, recorded with its reasons.
type Change struct {
	Subject  string    `json:"subject"` // a node or provider ID
	From     int       `json:"from"`
	To       int       `json:"to"`
	FromName string    `json:"from_name"`
	ToName   string    `json:"to_name"`
	Reasons  []string  `json:"reasons"`
	At       time.Time `json:"at"`
}

// Promotion reports whether the change raised the level.
func (c *Change) Promotion() bool { return c.To > c.From }

// String says the change in words, e.g. "nod_1 promoted from level 1
// (established) to level 2 (trusted): …".
func (c *Change) String() string {
	verb := "demoted"
	if c.Promotion() {
		verb = "promoted"
	}
	s := fmt.Sprintf("%s %s from level %d (%s) to level %d (%s)", c.Subject, verb, c.From, c.FromName, c.To, c.ToName)
	for i, r := range c.Reasons {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		s += sep + r
	}
	return s
}

// ChangeOf compares the level subject held with the one it now earns, and
// returns the change to record, or false when the level stays.
func (ls Levels) ChangeOf(subject string, held int, now Assessment, at time.Time) (Change, bool) {
	if held == now.Level {
		return Change{}, false
	}
	return Change{Subject: subject, From: held, To: now.Level, FromName: ls.Name(held), ToName: now.Name,
		Reasons: now.Reasons, At: at}, true
}

// Name returns the name of level n.
func (ls Levels) Name(n int) string {
	for _, r := range ls.Rules {
		if r.Level == n {
			return r.Name
		}
	}
	if n == 0 {
		return NewcomerName
	}
	return fmt.Sprintf("level %d", n)
}
