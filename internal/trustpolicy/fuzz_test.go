package trustpolicy

import (
	"errors"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// FuzzParse feeds the parser anything: it must not panic, every refusal
// must be an *idlegrid.Error naming a field, and every policy it accepts
// must be valid and slash no more than a bond.
func FuzzParse(f *testing.F) {
	f.Add(defaultYAML)
	for _, s := range []string{
		"version: 1\n",
		"version: 1\nslashing: {forged_receipt: {fixed: 1.5, bond_percent: 99.99, to: platform}}\n",
		"version: 1\nlevels: {rules: [{level: 1, name: a, min_score: 0.5}]}\ngold: {min_level: 1}\n",
		"version: 1\nreputation: {half_life: 0, prior: {good: 1, bad: 0}}\n",
		"version: 1\nx: &a [*a]\n",
		"version: 1\ngold: !!binary aGVsbG8=\n",
		"version: 2\nchallenges: {allow_simulated_runners: true, unverified_after_unsupported: 5}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			var e *idlegrid.Error
			if !errors.As(err, &e) || e.Code != idlegrid.EINVALID || e.Field == "" {
				t.Fatalf("got %#v, want an EINVALID error naming a field", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted an invalid policy: %v", err)
		}
		for _, o := range Offences {
			for _, bond := range []idlegrid.Micros{0, 1, 1_000_000_000, 1 << 62} {
				if got, to := p.Penalty(o, bond, bond/3); got < 0 || got > bond || (to != ToRenter && to != ToPlatform) {
					t.Fatalf("%s on a bond of %d: got %d to %q", o, bond, got, to)
				}
			}
		}
	})
}
