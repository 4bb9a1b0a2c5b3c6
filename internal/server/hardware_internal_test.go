package server

import (
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/challenge"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

func TestHardwareDoubt(t *testing.T) {
	spec, _ := challenge.LookupSpec("RTX4090")
	gpuSize := challenge.SizeFor(spec, true, 24564, maxChallengeSize)
	if gpuSize <= DefaultChallengeMaxSize {
		t.Fatalf("an RTX 4090's CUDA size is %d, not above the CPU's %d", gpuSize, DefaultChallengeMaxSize)
	}
	gpus := []idlegrid.GPU{{UUID: "GPU-a", Model: "RTX4090", VRAMMB: 24564}, {UUID: "GPU-b", Model: "RTX4090", VRAMMB: 24564}}
	// c is a challenge of uuid in state, newest first in the lists below.
	c := func(uuid string, state idlegrid.ChallengeState, size int) *idlegrid.Challenge {
		ch := &idlegrid.Challenge{ID: "chl_" + uuid + "_" + string(state), GPUUUID: uuid, Model: "RTX4090", VRAMMB: 24564, Size: size, State: state}
		if state == idlegrid.ChallengeUnsupported {
			ch.Answer = &idlegrid.ChallengeAnswer{Unsupported: "busy " + uuid}
		}
		return ch
	}
	passed := func(uuid string) *idlegrid.Challenge { return c(uuid, idlegrid.ChallengePassed, gpuSize) }
	small := func(uuid string) *idlegrid.Challenge {
		return c(uuid, idlegrid.ChallengePassed, DefaultChallengeMaxSize)
	}
	unsup := func(uuid string) *idlegrid.Challenge { return c(uuid, idlegrid.ChallengeUnsupported, gpuSize) }
	// as is c issued for another claim of the GPU: an H100's.
	as := func(ch *idlegrid.Challenge) *idlegrid.Challenge {
		ch.ID, ch.Model, ch.VRAMMB = ch.ID+"_h100", "H100-80GB", 81920
		return ch
	}
	waiting := func(uuid string) *idlegrid.Challenge { return c(uuid, idlegrid.ChallengeIssued, gpuSize) }
	strict := trustpolicy.Challenges{UnverifiedAfterUnsupported: 3}
	lax := trustpolicy.Challenges{UnverifiedAfterUnsupported: 3, AllowSimulatedRunners: true}

	for _, tc := range []struct {
		name string
		pol  trustpolicy.Challenges
		cs   []*idlegrid.Challenge
		want string // "" for no doubt
	}{
		{"never challenged", strict, nil, "GPU GPU-a, offered as a RTX4090 with 24564 MB, has passed no challenge as such"},
		{"one GPU never challenged", strict, []*idlegrid.Challenge{passed("GPU-a")}, "GPU GPU-b"},
		{"passed at the GPU's size", strict, []*idlegrid.Challenge{passed("GPU-a"), passed("GPU-b")}, ""},
		{"passed at the simulated size", strict, []*idlegrid.Challenge{passed("GPU-a"), small("GPU-b")},
			"challenge chl_GPU-b_passed on GPU GPU-b passed at the simulated size N=512"},
		{"simulated size allowed", lax, []*idlegrid.Challenge{small("GPU-a"), small("GPU-b")}, ""},
		{"simulated size allowed, yet never passed", lax, []*idlegrid.Challenge{small("GPU-a")}, "GPU GPU-b"},
		{"an older simulated pass is settled by a newer one at size", strict,
			[]*idlegrid.Challenge{passed("GPU-a"), small("GPU-a"), passed("GPU-b")}, ""},
		{"a newer simulated pass is not excused by an older one at size", strict,
			[]*idlegrid.Challenge{small("GPU-a"), passed("GPU-a"), passed("GPU-b")}, "passed at the simulated size"},
		{"two unsupported", strict, []*idlegrid.Challenge{unsup("GPU-a"), unsup("GPU-a"), passed("GPU-a"), passed("GPU-b")}, ""},
		{"three unsupported", strict, []*idlegrid.Challenge{unsup("GPU-a"), unsup("GPU-a"), unsup("GPU-a"), passed("GPU-a"), passed("GPU-b")},
			"hardware could not be checked: 3 challenges in a row answered unsupported on GPU GPU-a: busy GPU-a"},
		{"unsupported on two GPUs do not add up", strict,
			[]*idlegrid.Challenge{unsup("GPU-a"), unsup("GPU-b"), unsup("GPU-a"), unsup("GPU-b"), passed("GPU-a"), passed("GPU-b")}, ""},
		{"a pass ends the run", strict, []*idlegrid.Challenge{unsup("GPU-a"), passed("GPU-a"), unsup("GPU-a"), unsup("GPU-a"), passed("GPU-b")}, ""},
		{"an expiry ends the run (its bad fact counts)", strict,
			[]*idlegrid.Challenge{unsup("GPU-a"), unsup("GPU-a"), c("GPU-a", idlegrid.ChallengeExpired, gpuSize), unsup("GPU-a"), passed("GPU-a"), passed("GPU-b")}, ""},
		{"an expiry after a pass (its bad fact counts)", strict,
			[]*idlegrid.Challenge{c("GPU-a", idlegrid.ChallengeExpired, gpuSize), passed("GPU-a"), passed("GPU-b")}, ""},
		{"only expiries", strict, []*idlegrid.Challenge{c("GPU-a", idlegrid.ChallengeExpired, gpuSize), passed("GPU-b")}, "GPU GPU-a"},
		{"a waiting challenge is skipped", strict,
			[]*idlegrid.Challenge{waiting("GPU-a"), unsup("GPU-a"), unsup("GPU-a"), unsup("GPU-a"), passed("GPU-a"), passed("GPU-b")}, "3 challenges in a row"},
		{"only a waiting challenge", strict, []*idlegrid.Challenge{waiting("GPU-a"), passed("GPU-b")},
			"has passed no challenge as such; challenge chl_GPU-a_issued waits for the agent's answer"},
		{"never, at 0", trustpolicy.Challenges{}, []*idlegrid.Challenge{unsup("GPU-a"), unsup("GPU-a"), unsup("GPU-a"), unsup("GPU-a"), passed("GPU-a"), passed("GPU-b")}, ""},
		{"a GPU no longer offered", strict, []*idlegrid.Challenge{unsup("GPU-z"), unsup("GPU-z"), unsup("GPU-z"), small("GPU-y"), passed("GPU-a"), passed("GPU-b")}, ""},
		// A pass proves the GPU as the model and memory it was issued for.
		{"passed as another model", lax, []*idlegrid.Challenge{passed("GPU-a"), as(passed("GPU-b"))},
			"GPU GPU-b, offered as a RTX4090 with 24564 MB, has passed no challenge as such (challenge chl_GPU-b_passed_h100 passed it as a H100-80GB with 81920 MB)"},
		{"passed as another memory", lax, []*idlegrid.Challenge{passed("GPU-a"), func() *idlegrid.Challenge {
			ch := passed("GPU-b")
			ch.VRAMMB = 48000
			return ch
		}()}, "GPU GPU-b"},
		{"a newer pass of another claim does not settle this one", strict,
			[]*idlegrid.Challenge{as(passed("GPU-a")), small("GPU-a"), passed("GPU-b")}, "passed at the simulated size"},
		{"unsupported answers of another claim do not count", strict,
			[]*idlegrid.Challenge{as(unsup("GPU-a")), as(unsup("GPU-a")), as(unsup("GPU-a")), passed("GPU-a"), passed("GPU-b")}, ""},
		{"a waiting challenge of another claim proves nothing", lax,
			[]*idlegrid.Challenge{passed("GPU-a"), as(waiting("GPU-b"))}, "GPU GPU-b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hardwareDoubt(tc.pol, gpus, tc.cs)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("hardwareDoubt = %q, want %q", got, tc.want)
			}
		})
	}
}
