package trustsim

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/challenge"
)

// challengeFor is the challenge the coordinator issues to a GPU that
// claims model, as attest.go sizes it (with the simulation's size cap).
func challengeFor(t *testing.T, model string) *idlegrid.Challenge {
	t.Helper()
	spec, ok := challenge.LookupSpec(model)
	if !ok {
		t.Fatalf("no spec for %s", model)
	}
	c := &idlegrid.Challenge{ID: "chl_test", Model: model, VRAMMB: vramMB(model),
		Seed: hex.EncodeToString([]byte("0123456789abcdef")), Size: challenge.SizeFor(spec, ok, vramMB(model), 64)}
	lo, hi := spec.Band(c.Size)
	c.MinNanos, c.MaxNanos = int64(lo), int64(hi)
	return c
}

func TestAnswerAs(t *testing.T) {
	for _, lie := range lies {
		t.Run(lie.claimed+"/"+lie.actual, func(t *testing.T) {
			c := challengeFor(t, lie.claimed)
			honest, err := answerAs(context.Background(), c, lie.claimed)
			if err != nil {
				t.Fatal(err)
			}
			if v := challenge.Judge(c, &honest, []int{0, 1, 63}); !v.Passed {
				t.Fatalf("a real %s fails its own challenge: %v", lie.claimed, v.Failures)
			}
			lying, err := answerAs(context.Background(), c, lie.actual)
			if err != nil {
				t.Fatal(err)
			}
			if v := challenge.Judge(c, &lying, []int{0, 1, 63}); v.Passed {
				t.Fatalf("a %s claiming to be a %s passes: %v", lie.actual, lie.claimed, v.Findings)
			}
		})
	}
	for _, m := range honestModels {
		c := challengeFor(t, m)
		a, err := answerAs(context.Background(), c, m)
		if err != nil {
			t.Fatal(err)
		}
		if v := challenge.Judge(c, &a, []int{0}); !v.Passed {
			t.Errorf("honest %s fails: %v", m, v.Failures)
		}
	}
}

// TestParseBehaviours: the flag's list of cheating behaviours, read, and a
// bad one refused naming the flag and the behaviours it takes.
func TestParseBehaviours(t *testing.T) {
	got, err := ParseBehaviours(" lies-gpu, fakes-uptime ,")
	if err != nil || len(got) != 2 || got[0] != LiesGPU || got[1] != FakesUptime {
		t.Errorf("ParseBehaviours = %v, %v; want lies-gpu and fakes-uptime", got, err)
	}
	for _, s := range []string{"honest", "lies-gpu,nope", " , "} {
		_, err := ParseBehaviours(s)
		var e *idlegrid.Error
		if !errors.As(err, &e) || e.Field != "behaviours" || !strings.Contains(e.Message, "lies-gpu,inflates-receipts,bills-offline,drops-jobs,fakes-uptime") {
			t.Errorf("ParseBehaviours(%q) = %v; want EINVALID naming behaviours and listing them", s, err)
		}
	}
}
