package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/challenge"
	"github.com/idlegrid/idlegrid/internal/gpu/fake"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// Hardware attestation (docs/trust.md): after publishing its offer the
// agent signs the node's hardware fingerprint with the node's key and sends
// it; while it serves, it signs it again whenever the hardware it detects
// changes, and answers the server's hardware challenges.

// AttestServer is a Server that takes attestations and challenges;
// *client.AgentClient is one. With a Server that is not, the agent does
// neither.
type AttestServer interface {
	Attest(ctx context.Context, a idlegrid.Attestation) (*idlegrid.AttestResponse, error)
	PendingChallenges(ctx context.Context) ([]*idlegrid.Challenge, error)
	AnswerChallenge(ctx context.Context, id string, ans idlegrid.ChallengeAnswer) (*idlegrid.Challenge, error)
}

// ChallengePoll is how often the agent asks for challenges and checks its
// fingerprint; the server gives a challenge minutes to be answered.
const ChallengePoll = 30 * time.Second

// MaxSimulatedSize is the largest challenge the agent computes on the CPU
// for a simulated GPU (about a second); a larger one, sized for a real
// GPU, is answered as unsupported rather than burning the CPU for hours.
const MaxSimulatedSize = 1024

// simulatedGPUs is a detector whose GPUs are simulated (internal/gpu/fake):
// the agent runs the challenge on the CPU and reports the time the GPU's
// actual model would take.
type simulatedGPUs interface {
	Actual(uuid string) (fake.Actual, bool)
}

// attestation is what the agent attests, for its loop.
type attestation struct {
	hash string // of the fingerprint last accepted
}

// attest signs the node's fingerprint and sends it, unless the server
// already holds this one from this run. A failure is logged: the node
// serves either way, and the loop tries again.
func (a *Agent) attest(ctx context.Context, last *attestation) {
	as, ok := a.srv.(AttestServer)
	if !ok {
		return
	}
	devs, err := a.det.Detect(ctx)
	if err != nil || len(devs) == 0 {
		a.log.Warn("attest: cannot detect the GPUs", "err", err)
		return
	}
	gpus := make([]idlegrid.GPU, len(devs))
	for i, d := range devs {
		gpus[i] = d.GPU
	}
	att := idlegrid.Attestation{NodeID: a.NodeID(), Fingerprint: idlegrid.FingerprintOf(gpus), SignedAt: a.clock.Now()}
	if h := att.Fingerprint.Hash(); h == last.hash {
		return
	}
	nodekey.SignAttestation(a.key, &att)
	resp, err := as.Attest(ctx, att)
	if err != nil {
		a.log.Warn("attest: the server did not take the node's hardware fingerprint", "err", err)
		return
	}
	last.hash = resp.Hash
	a.log.Info("hardware attested", "fingerprint", resp.Hash, "changes", len(resp.Changes), "challenges", len(resp.Challenges))
}

// challengeLoop attests again when the hardware changes and answers the
// node's challenges, every ChallengePoll until ctx is done.
func (a *Agent) challengeLoop(ctx context.Context, last *attestation) {
	as, ok := a.srv.(AttestServer)
	if !ok {
		return
	}
	for {
		a.attest(ctx, last)
		a.answerChallenges(ctx, as)
		if !sleep(ctx, ChallengePoll) {
			return
		}
	}
}

// answerChallenges runs each waiting challenge and sends its answer.
func (a *Agent) answerChallenges(ctx context.Context, as AttestServer) {
	cs, err := as.PendingChallenges(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("challenges: cannot list them", "err", err)
		}
		return
	}
	for _, c := range cs {
		ans := a.runChallenge(ctx, c)
		if ctx.Err() != nil {
			return
		}
		got, err := as.AnswerChallenge(ctx, c.ID, ans)
		if err != nil {
			a.log.Warn("challenge: the answer was not taken", "challenge", c.ID, "err", err)
			continue
		}
		a.log.Info("hardware challenge answered", "challenge", c.ID, "gpu", c.GPUUUID, "state", got.State, "findings", got.Findings)
	}
}

// runChallenge runs c's workload on its GPU. On simulated GPUs it computes
// the product on the CPU and reports the time the GPU's actual model takes
// at its peak (challenge.Spec.Expected) and the memory it lets a workload
// allocate. Real GPUs need the challenge's CUDA image, not built yet: the
// answer says so (docs/trust.md).
func (a *Agent) runChallenge(ctx context.Context, c *idlegrid.Challenge) idlegrid.ChallengeAnswer {
	sim, ok := a.det.(simulatedGPUs)
	if !ok {
		return idlegrid.ChallengeAnswer{Unsupported: "this agent has no GPU kernel for the challenge workload yet; it runs only on simulated GPUs (docs/trust.md)"}
	}
	actual, ok := sim.Actual(c.GPUUUID)
	if !ok {
		return idlegrid.ChallengeAnswer{Unsupported: fmt.Sprintf("GPU %s is not on this node now", c.GPUUUID)}
	}
	t, err := challenge.TaskOf(c)
	if err != nil {
		return idlegrid.ChallengeAnswer{Unsupported: err.Error()}
	} else if t.Size > MaxSimulatedSize {
		return idlegrid.ChallengeAnswer{Unsupported: fmt.Sprintf("simulated GPUs compute challenges up to N=%d on the CPU; this one is N=%d", MaxSimulatedSize, t.Size)}
	}
	hashes, measured, err := challenge.Run(ctx, t)
	if err != nil {
		return idlegrid.ChallengeAnswer{Unsupported: err.Error()}
	}
	elapsed := measured
	if spec, ok := challenge.LookupSpec(actual.Model); ok && spec.Expected(t.Size) > 0 {
		elapsed = spec.Expected(t.Size)
	}
	return idlegrid.ChallengeAnswer{RowHashes: hashes, Digest: challenge.Digest(hashes),
		ElapsedNanos: max(int64(elapsed), 1), VRAMMB: actual.VRAMMB}
}
