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
	gpus := []idlegrid.GPU{{UUID: "GPU-a"}, {UUID: "GPU-b"}}
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
	strict := trustpolicy.Challenges{UnverifiedAfterUnsupported: 3}
	lax := trustpolicy.Challenges{UnverifiedAfterUnsupported: 3, AllowSimulatedRunners: true}

	for _, tc := range []struct {
		name string
		pol  trustpolicy.Challenges
		cs   []*idlegrid.Challenge
		want string // "" for no doubt
	}{
		{"never challenged", strict, nil, ""},
		{"passed at the GPU's size", strict, []*idlegrid.Challenge{passed("GPU-a"), passed("GPU-b")}, ""},
		{"passed at the simulated size", strict, []*idlegrid.Challenge{passed("GPU-a"), small("GPU-b")},
			"challenge chl_GPU-b_passed on GPU GPU-b passed at the simulated size N=512"},
		{"simulated size allowed", lax, []*idlegrid.Challenge{small("GPU-a"), small("GPU-b")}, ""},
		{"an older simulated pass is settled by a newer one at size", strict,
			[]*idlegrid.Challenge{passed("GPU-a"), small("GPU-a")}, ""},
		{"a newer simulated pass is not excused by an older one at size", strict,
			[]*idlegrid.Challenge{small("GPU-a"), passed("GPU-a")}, "passed at the simulated size"},
		{"two unsupported", strict, []*idlegrid.Challenge{unsup("GPU-a"), unsup("GPU-a"), passed("GPU-a")}, ""},
		{"three unsupported", strict, []*idlegrid.Challenge{unsup("GPU-a"), unsup("GPU-a"), unsup("GPU-a"), passed("GPU-a")},
			"hardware could not be checked: 3 challenges in a row answered unsupported on GPU GPU-a: busy GPU-a"},
		{"unsupported on two GPUs do not add up", strict,
			[]*idlegrid.Challenge{unsup("GPU-a"), unsup("GPU-b"), unsup("GPU-a"), unsup("GPU-b")}, ""},
		{"a pass ends the run", strict, []*idlegrid.Challenge{unsup("GPU-a"), passed("GPU-a"), unsup("GPU-a"), unsup("GPU-a")}, ""},
		{"an expiry ends the run (its bad fact counts)", strict,
			[]*idlegrid.Challenge{unsup("GPU-a"), unsup("GPU-a"), c("GPU-a", idlegrid.ChallengeExpired, gpuSize), unsup("GPU-a")}, ""},
		{"a waiting challenge is skipped", strict,
			[]*idlegrid.Challenge{c("GPU-a", idlegrid.ChallengeIssued, gpuSize), unsup("GPU-a"), unsup("GPU-a"), unsup("GPU-a")}, "3 challenges in a row"},
		{"never, at 0", trustpolicy.Challenges{}, []*idlegrid.Challenge{unsup("GPU-a"), unsup("GPU-a"), unsup("GPU-a"), unsup("GPU-a")}, ""},
		{"a GPU no longer offered", strict, []*idlegrid.Challenge{unsup("GPU-z"), unsup("GPU-z"), unsup("GPU-z"), small("GPU-y")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hardwareDoubt(tc.pol, gpus, tc.cs)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("hardwareDoubt = %q, want %q", got, tc.want)
			}
		})
	}
}
