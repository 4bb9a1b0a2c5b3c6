package trustpolicy

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/reputation"
)

func TestDefault(t *testing.T) {
	p := Default()
	if p.Version != Version || len(p.SHA256) != 64 {
		t.Errorf("got version %d, digest %q", p.Version, p.SHA256)
	}
	// The file and the reputation package's defaults must not drift apart.
	if want := reputation.DefaultParams(); !reflect.DeepEqual(p.Reputation, want) {
		t.Errorf("reputation:\ngot  %+v\nwant %+v", p.Reputation, want)
	}
	if want := reputation.DefaultLevels(); !reflect.DeepEqual(p.Levels, want) {
		t.Errorf("levels:\ngot  %+v\nwant %+v", p.Levels, want)
	}
	if p.Gold.MinLevel != 2 || p.Gold.Allows(1) || !p.Gold.Allows(2) {
		t.Errorf("gold: got %+v, want level 2 and above", p.Gold)
	}
	if c := p.Challenges; !c.AtJoin || !c.OnFingerprintChange || c.PerNodePerDay != 1 || c.AllowSimulatedRunners || c.UnverifiedAfterUnsupported != 3 {
		t.Errorf("challenges: got %+v", c)
	}
	if v := p.Verification; v.Fraction(0, 2) != 0.25 || v.Fraction(2, 2) != 0.05 || v.FirstChecks != 2 {
		t.Errorf("verification: got %+v", v)
	}
	if p.Reputation.FlagBelow != 0.8 {
		t.Errorf("reputation.flag_below: got %g, want 0.8", p.Reputation.FlagBelow)
	}
	want := map[Offence]SlashRule{
		OffenceForgedReceipt:    {FixedMicros: 50_000_000, BondBPS: 2500, HarmBPS: 20000, To: ToRenter},
		OffenceFakeHardware:     {FixedMicros: 100_000_000, BondBPS: 5000, HarmBPS: 10000, To: ToRenter},
		OffenceMismatchedResult: {FixedMicros: 20_000_000, BondBPS: 1000, HarmBPS: 20000, To: ToRenter},
		OffenceBrokenNotice:     {HarmBPS: 10000, MaxMicros: 50_000_000, To: ToRenter},
	}
	if !reflect.DeepEqual(p.Slashing, want) {
		t.Errorf("slashing:\ngot  %+v\nwant %+v", p.Slashing, want)
	}
}

func mustParse(tb testing.TB, s string) *Policy {
	tb.Helper()
	p, err := Parse([]byte(s))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestParse_Overrides(t *testing.T) {
	p := mustParse(t, `
version: 1
reputation:
  half_life: 1440h
  weights:
    uptime: {bad: 0.5}
gold: {min_level: 1}
slashing:
  forged_receipt: {fixed: "$75.25", bond_percent: 12.5, to: platform}
`)
	d := Default()
	if p.Reputation.HalfLife != 60*24*time.Hour {
		t.Errorf("half_life: got %s", p.Reputation.HalfLife)
	}
	if got := p.Reputation.Weights[reputation.DimUptime]; got != (reputation.Weight{Good: 0.05, Bad: 0.5}) {
		t.Errorf("uptime weight: got %+v, want the default good and bad 0.5", got)
	}
	if p.Gold.MinLevel != 1 {
		t.Errorf("gold: got %d", p.Gold.MinLevel)
	}
	want := SlashRule{FixedMicros: 75_250_000, BondBPS: 1250, HarmBPS: 20000, To: ToPlatform}
	if got := p.Slashing[OffenceForgedReceipt]; got != want {
		t.Errorf("forged_receipt: got %+v, want %+v", got, want)
	}
	if !reflect.DeepEqual(p.Levels, d.Levels) || p.Slashing[OffenceBrokenNotice] != d.Slashing[OffenceBrokenNotice] {
		t.Error("keys left out did not keep their defaults")
	}
	if p.SHA256 == d.SHA256 {
		t.Error("two different files have one digest")
	}
}

// A version 1 file still reads, with the defaults of the keys versions 2
// and 3 added; a version 2 file may set its keys, and a version 3 file
// all.
func TestParse_Versions(t *testing.T) {
	old := mustParse(t, "version: 1\nchallenges: {per_node_per_day: 2}\n")
	if c := old.Challenges; old.Version != 1 || c.PerNodePerDay != 2 || c.AllowSimulatedRunners || c.UnverifiedAfterUnsupported != 3 {
		t.Errorf("version 1: got version %d, challenges %+v; want its rate and version 2's defaults", old.Version, c)
	}
	dev := mustParse(t, "version: 2\nchallenges: {allow_simulated_runners: true, unverified_after_unsupported: 0}\n")
	if c := dev.Challenges; dev.Version != 2 || !c.AllowSimulatedRunners || c.UnverifiedAfterUnsupported != 0 || !c.AtJoin {
		t.Errorf("version 2: got version %d, challenges %+v; want the keys set and the rest default", dev.Version, c)
	}
	if old.Levels.OffenceHold != 30*24*time.Hour || dev.Levels.OffenceHold != 30*24*time.Hour {
		t.Errorf("offence hold: got %s and %s for versions 1 and 2, want the default 720h", old.Levels.OffenceHold, dev.Levels.OffenceHold)
	}
	if old.Challenges.MaxOwed != 24*time.Hour {
		t.Errorf("max owed: got %s for version 1, want the default 24h", old.Challenges.MaxOwed)
	}
	for give, want := range map[string]time.Duration{"6h": 6 * time.Hour, "2d": 48 * time.Hour, "0": 0} {
		if p := mustParse(t, "version: 4\nchallenges: {max_owed: "+give+"}\n"); p.Challenges.MaxOwed != want || !p.Challenges.AtJoin {
			t.Errorf("max_owed %s: got %+v, want %s and the rest default", give, p.Challenges, want)
		}
	}
	for give, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "36h": 36 * time.Hour, "0": 0} {
		if p := mustParse(t, "version: 3\nlevels: {offence_hold: "+give+"}\n"); p.Levels.OffenceHold != want || p.Version != 3 {
			t.Errorf("offence_hold %s: got %s (version %d), want %s", give, p.Levels.OffenceHold, p.Version, want)
		}
	}
}

func TestParse_Errors(t *testing.T) {
	for _, tt := range []struct {
		name, yaml, field, msg string
	}{
		{"empty", ``, "version", "empty"},
		{"no version", "gold: {min_level: 1}\n", "version", "required"},
		{"newer version", "version: 5\nfuture_key: 1\n", "version", "reads version 1 to 4 policies, got 5"},
		{"version 0", "version: 0\n", "version", "reads version 1 to 4 policies, got 0"},
		{"version 4 key in a version 3 file", "version: 3\nchallenges: {max_owed: 6h}\n",
			"challenges.max_owed", "line 2: needs a version 4 policy; this file is version 3"},
		{"max owed too long", "version: 4\nchallenges: {max_owed: 31d}\n", "challenges.max_owed", "between 0 (never closes a node) and 30d"},
		{"version 3 key in a version 2 file", "version: 2\nlevels: {offence_hold: 7d}\n",
			"levels.offence_hold", "line 2: needs a version 3 policy; this file is version 2"},
		{"offence hold too long", "version: 3\nlevels: {offence_hold: 3651d}\n", "levels.offence_hold", "between 0 (no hold) and 3650d"},
		{"offence hold without a unit", "version: 3\nlevels: {offence_hold: 30}\n", "levels.offence_hold", "60d"},
		{"version 2 key in a version 1 file", "version: 1\nchallenges: {allow_simulated_runners: true}\n",
			"challenges.allow_simulated_runners", "line 2: needs a version 2 policy; this file is version 1"},
		{"unsupported limit", "version: 2\nchallenges: {unverified_after_unsupported: -1}\n", "challenges.unverified_after_unsupported", "between 0 (never) and 100"},
		{"version not a number", "version: one\n", "version", "whole number"},
		{"not a mapping", "- version: 1\n", "policy", "mapping"},
		{"not YAML", "version: 1\n\tgold: [\n", "policy", "not YAML"},
		{"two documents", "version: 1\n---\nversion: 1\n", "policy", "one YAML document"},
		{"unknown key", "version: 1\nslashing:\n  forged_receipt: {fixd: 5}\n", "slashing.forged_receipt.fixd", "line 3: unknown key; known keys here: fixed, bond_percent, harm_percent, max, to"},
		{"unknown section", "version: 1\nbonds: {}\n", "bonds", "unknown key"},
		{"key twice", "version: 1\ngold: {min_level: 1}\ngold: {min_level: 2}\n", "gold", "given twice"},
		{"wrong type", "version: 1\ngold: {min_level: high}\n", "gold.min_level", `want a whole number, got "high"`},
		{"list for a value", "version: 1\nchallenges: {at_join: [true]}\n", "challenges.at_join", "single value"},
		{"value for a section", "version: 1\nreputation: 5\n", "reputation", "want a mapping"},
		{"negative amount", "version: 1\nslashing: {fake_hardware: {fixed: -5}}\n", "slashing.fake_hardware.fixed", "negative"},
		{"amount too precise", "version: 1\nslashing: {fake_hardware: {max: 0.0000001}}\n", "slashing.fake_hardware.max", "at most 6 decimal places"},
		{"percent too precise", "version: 1\nslashing: {fake_hardware: {bond_percent: 2.555}}\n", "slashing.fake_hardware.bond_percent", "at most two decimals"},
		{"bond percent over 100", "version: 1\nslashing: {fake_hardware: {bond_percent: 101}}\n", "slashing.fake_hardware.bond_percent", "between 0 and 100"},
		{"harm percent over 1000", "version: 1\nslashing: {broken_notice: {harm_percent: 1000.01}}\n", "slashing.broken_notice.harm_percent", "between 0 and 1000"},
		{"unknown recipient", "version: 1\nslashing: {broken_notice: {to: operator}}\n", "slashing.broken_notice.to", `renter or platform, got "operator"`},
		{"bad half-life", "version: 1\nreputation: {half_life: -3d}\n", "reputation.half_life", "60d"},
		{"half-life too short", "version: 1\nreputation: {half_life: 5m}\n", "reputation.half_life", "at least an hour"},
		{"zero prior", "version: 1\nreputation: {prior: {good: 0}}\n", "reputation.prior.good", "above 0"},
		{"NaN weight", "version: 1\nreputation: {weights: {leases: {bad: .nan}}}\n", "reputation.weights.leases", "between 0"},
		{"levels out of order", "version: 1\nlevels: {rules: [{level: 2, name: x}]}\n", "levels.rules[0].level", "want 1, got 2"},
		{"level easier than the one below", "version: 1\nlevels:\n  rules:\n    - {level: 1, name: a, min_score: 0.9}\n    - {level: 2, name: b, min_score: 0.8}\n", "levels.rules[1]", "at least what the level below"},
		{"gold above the ladder", "version: 1\ngold: {min_level: 4}\n", "gold.min_level", "highest level, 3"},
		{"fraction over 1", "version: 1\nverification: {sample_fraction: 1.5}\n", "verification.sample_fraction", "between 0 and 1"},
		{"challenge rate", "version: 1\nchallenges: {per_node_per_day: -1}\n", "challenges.per_node_per_day", "between 0 and 96"},
		{"alias", "version: 1\nx: &a {min_level: 1}\ngold: *a\n", "x", "unknown key"},
		{"alias in a known place", "version: 1\nchallenges: &a {at_join: true}\nverification: *a\n", "verification", "aliases are not allowed"},
		{"too large", "version: 1\n#" + strings.Repeat("x", maxFileBytes), "policy", "larger than"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			var e *idlegrid.Error
			if !errors.As(err, &e) || e.Code != idlegrid.EINVALID {
				t.Fatalf("got %v, want an EINVALID error", err)
			}
			if e.Field != tt.field || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("got %q: %q; want %q: …%s…", e.Field, e.Message, tt.field, tt.msg)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trust.yaml")
	if err := os.WriteFile(path, []byte("version: 1\ngold: {min_level: 3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err != nil || p.Gold.MinLevel != 3 {
		t.Fatalf("got %+v, %v", p, err)
	}
	if err := os.WriteFile(path, []byte("version: 1\ngold: {min_level: 9}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	var e *idlegrid.Error
	if !errors.As(err, &e) || e.Field != "gold.min_level" || !strings.Contains(err.Error(), path) {
		t.Errorf("got %v, want an error naming the file and gold.min_level", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("loaded a missing file")
	}
}

// TestPolicy_Penalty works the default rules through the examples of
// docs/trust.md.
func TestPolicy_Penalty(t *testing.T) {
	p := Default()
	const unit = idlegrid.MicrosPerUnit
	for _, tt := range []struct {
		name       string
		o          Offence
		bond, harm idlegrid.Micros
		want       idlegrid.Micros
		to         Recipient
	}{
		// 50 + 25% of 500 + 200% of 12.34 = 50 + 125 + 24.68
		{"forged receipt", OffenceForgedReceipt, 500 * unit, 12_340_000, 199_680_000, ToRenter},
		// 100 + 50% of 500 + 100% of 40
		{"fake hardware", OffenceFakeHardware, 500 * unit, 40 * unit, 390 * unit, ToRenter},
		// 20 + 10% of 1000.000001 (rounded down) + 200% of 3
		{"mismatched result", OffenceMismatchedResult, 1000*unit + 1, 3 * unit, 126 * unit, ToRenter},
		// 100% of 80, capped at 50
		{"broken notice, capped", OffenceBrokenNotice, 500 * unit, 80 * unit, 50 * unit, ToRenter},
		{"broken notice", OffenceBrokenNotice, 500 * unit, 7_500_001, 7_500_001, ToRenter},
		{"never more than the bond", OffenceFakeHardware, 30 * unit, 40 * unit, 30 * unit, ToRenter},
		{"no bond, no penalty", OffenceForgedReceipt, 0, 10 * unit, 0, ToRenter},
		{"negative amounts count as zero", OffenceFakeHardware, -5, -5, 0, ToRenter},
		{"huge amounts do not overflow", OffenceFakeHardware, math.MaxInt64, math.MaxInt64, math.MaxInt64, ToRenter},
		{"unknown offence", "rudeness", 500 * unit, 10 * unit, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, to := p.Penalty(tt.o, tt.bond, tt.harm)
			if got != tt.want || to != tt.to {
				t.Errorf("got %s to %q, want %s to %q", got, to, tt.want, tt.to)
			}
		})
	}
}

func TestShare(t *testing.T) {
	for _, tt := range []struct {
		m    idlegrid.Micros
		bps  int64
		want idlegrid.Micros
	}{
		{9999, 1, 0}, {10000, 1, 1}, {19999, 5000, 9999}, {1_000_000, 2500, 250_000},
		{math.MaxInt64, 10000, math.MaxInt64}, {math.MaxInt64, 5000, math.MaxInt64 / 2},
		{math.MaxInt64, 100000, math.MaxInt64}, {5, 0, 0}, {-5, 100, 0},
	} {
		if got := share(tt.m, tt.bps); got != tt.want {
			t.Errorf("share(%d, %d): got %d, want %d", tt.m, tt.bps, got, tt.want)
		}
	}
}

func TestChallenges_Chance(t *testing.T) {
	c := Challenges{PerNodePerDay: 1}
	if got := c.Chance(24 * time.Hour); math.Abs(got-(1-math.Exp(-1))) > 1e-12 {
		t.Errorf("a day at one a day: got %v, want 1 − 1/e", got)
	}
	if got := c.Chance(2 * time.Second); math.Abs(got-2.0/86400) > 1e-9 {
		t.Errorf("two seconds: got %v, want about %v", got, 2.0/86400)
	}
	if c.Chance(0) != 0 || (Challenges{}).Chance(time.Hour) != 0 {
		t.Error("a chance without time or rate")
	}
}

func TestDefaultYAML(t *testing.T) {
	b := DefaultYAML()
	b[0] = 'X' // a copy: the default must not change
	if Default().SHA256 != mustParse(t, string(defaultYAML)).SHA256 || defaultYAML[0] == 'X' {
		t.Error("DefaultYAML handed out the embedded bytes")
	}
}

func TestVerification_Fraction(t *testing.T) {
	v := Verification{SampleFraction: 0.05, NewcomerSampleFraction: 0.25, FirstChecks: 2}
	for _, tc := range []struct {
		level, matched int
		want           float64
	}{
		{0, 0, 1}, {2, 1, 1}, // every lease until two re-runs confirmed the node
		{0, 2, 0.25}, {1, 3, 0.05},
	} {
		if got := v.Fraction(tc.level, tc.matched); got != tc.want {
			t.Errorf("Fraction(level %d, %d confirmed) = %g, want %g", tc.level, tc.matched, got, tc.want)
		}
	}
}
