package trustsim

import (
	"fmt"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/challenge"
)

// Behaviour is how a simulated provider deals with the market.
type Behaviour string

const (
	// Honest runs every lease it gets, signs receipts for exactly what
	// ran, reports the true output and answers challenges with its real
	// GPU; a share of its leases (Config.HonestFailure) fails by accident.
	Honest Behaviour = "honest"
	// LiesGPU offers a better GPU than it has and otherwise behaves. Its
	// challenge answers are its real GPU's: the right result in its real
	// model's time, with its real memory.
	LiesGPU Behaviour = "lies-gpu"
	// InflatesReceipts runs its leases but, on a share of them
	// (inflateShare), signs a receipt claiming 25% more GPU-seconds than
	// its interval held.
	InflatesReceipts Behaviour = "inflates-receipts"
	// BillsOffline runs its leases but is offline half the time: it sends
	// every other heartbeat (never missing enough to be declared lost)
	// while its receipts bill every second.
	BillsOffline Behaviour = "bills-offline"
	// DropsJobs accepts every lease but drops a share of them (dropShare):
	// half of those it never starts, half it starts and later stops on its
	// own, saying nothing.
	DropsJobs Behaviour = "drops-jobs"
	// FakesUptime heartbeats as if available and takes leases, but never
	// runs them: it signs receipts for the time and reports success with
	// a made-up output digest.
	FakesUptime Behaviour = "fakes-uptime"
)

// Cheating is every cheating behaviour, in the order cheaters are dealt.
var Cheating = []Behaviour{LiesGPU, InflatesReceipts, BillsOffline, DropsJobs, FakesUptime}

// Behaviours is every behaviour, honest first.
var Behaviours = append([]Behaviour{Honest}, Cheating...)

// Strategy knobs. They are constants, not flags: they define the
// behaviours that docs/trust.md describes.
const (
	inflateShare = 0.3  // leases on which an inflater overclaims
	inflateBy    = 1.25 // how much its receipt overclaims
	dropShare    = 0.5  // leases a dropper drops
	// receiptEvery is how often agents sign a receipt, and at a lease's
	// end: six heartbeat intervals, as the real agent's 60 s receipts to
	// its 10 s heartbeats.
	receiptEvery = 6 * Step
)

// ParseBehaviours reads a comma-separated list of cheating behaviours.
func ParseBehaviours(s string) ([]Behaviour, error) {
	var out []Behaviour
	for _, f := range strings.Split(s, ",") {
		b := Behaviour(strings.TrimSpace(f))
		if b == "" {
			continue
		}
		found := false
		for _, c := range Cheating {
			found = found || c == b
		}
		if !found {
			return nil, idlegrid.Invalid("behaviours", "unknown cheating behaviour %q; use some of %s", b, cheatingNames())
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, idlegrid.Invalid("behaviours", "name at least one of %s", cheatingNames())
	}
	return out, nil
}

// cheatingNames lists the cheating behaviours as the flag takes them,
// separated by commas.
func cheatingNames() string {
	names := make([]string, len(Cheating))
	for i, b := range Cheating {
		names[i] = string(b)
	}
	return strings.Join(names, ",")
}

// device is a GPU as it really is, and as its provider offers it.
type device struct {
	claimed, actual string // models
}

// honestModels are the GPUs honest providers (and every provider but a
// liar) have. Each has a spec, so its challenge time is judged.
var honestModels = []string{"RTX4090", "A100-80GB", "L40", "RTX3090", "A10G", "H100-80GB"}

// lies pair a claimed model with the one the liar really has. Each lie is
// outside the challenge's time band (challenge.BandLow..BandHigh) or its
// memory check; a lie within both (an A10G offered as an RTX3090, 13%
// apart) would pass, and is left out: docs/trust.md says so.
var lies = []device{
	{claimed: "RTX4090", actual: "RTX3090"},     // 2.3× slower
	{claimed: "H100-80GB", actual: "A100-80GB"}, // 3.4× slower
	{claimed: "A100-80GB", actual: "A100-40GB"}, // half the memory
	{claimed: "L40", actual: "L4"},              // 3× slower, half the memory
}

// vramMB is what a model's GPU reports as its memory.
func vramMB(model string) int {
	s, ok := challenge.LookupSpec(model)
	if !ok || s.VRAMMB == 0 {
		panic(fmt.Sprintf("trustsim: no memory size for %s", model))
	}
	return s.VRAMMB
}
