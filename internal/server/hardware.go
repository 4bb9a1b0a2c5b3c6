package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/challenge"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// Verified hardware (docs/trust.md). A failed or unanswered challenge is a
// bad fact in the node's reputation, and the level rules read it
// (hardwareVerified). Two outcomes leave no bad fact yet prove nothing of
// the GPU, and the trust policy decides what they are worth:
//
//   - a challenge passed at the simulated size: the node said it computes
//     challenges on the CPU (its runner is its own word) and got one too
//     small to tell its GPU from another; it counts only where the policy
//     allows simulated runners (challenges.allow_simulated_runners);
//   - challenges answered unsupported: after the policy's number of them in
//     a row on one GPU (challenges.unverified_after_unsupported), the node's
//     hardware counts as unverified until a challenge of that GPU passes.

// hardwareWindow is how many of a node's newest challenges are read to
// judge its hardware: at one random challenge a day, months of them.
const hardwareWindow = 200

// levelChecks is what a standing's level rests on besides its evidence.
// A provider is never quarantined itself (its nodes are), and its hardware
// is in doubt while a node's is (providerChecks).
type levelChecks struct {
	quarantined bool // a quarantined node holds level 0
	// hardwareDoubt says why the node's challenges leave its hardware
	// unverified, or "" (hardwareDoubt).
	hardwareDoubt string
}

// nodeChecks are n's level checks: its quarantine and what its challenges
// say of its hardware.
func (s *Server) nodeChecks(ctx context.Context, n *idlegrid.Node) (levelChecks, error) {
	doubt, err := s.hardwareDoubt(ctx, n)
	return levelChecks{quarantined: n.Quarantined, hardwareDoubt: doubt}, err
}

// providerChecks are a provider's level checks: while the saved standing
// of one of its nodes says that node's hardware is unverified, the
// provider's hardware is unverified too, as a failed challenge on one node
// makes the provider's pooled evidence unverified. Nodes' notes are as of
// their last save, so they follow a changed trust policy at each node's
// next save. A pending node standing, when not nil, stands in for that
// node's saved one.
func (s *Server) providerChecks(ctx context.Context, providerID string, pending *idlegrid.Reputation) (levelChecks, error) {
	rs, err := s.store.ListReputations(ctx, idlegrid.ReputationFilter{
		Subject: idlegrid.SubjectNode, ProviderID: providerID, HardwareDoubted: true, Limit: 2})
	if err != nil {
		return levelChecks{}, err
	}
	if pending != nil {
		rs = withPending(rs, pending)
	}
	var doubted *idlegrid.Reputation // the first by node ID, as listed
	for _, r := range rs {
		if r.HardwareNote != "" && (doubted == nil || r.SubjectID < doubted.SubjectID) {
			doubted = r
		}
	}
	if doubted == nil {
		return levelChecks{}, nil
	}
	return levelChecks{hardwareDoubt: fmt.Sprintf("node %s: %s", doubted.SubjectID, doubted.HardwareNote)}, nil
}

// hardwareDoubt reads n's newest challenges and says why they leave its
// hardware unverified under the trust policy, or "" when they do not.
func (s *Server) hardwareDoubt(ctx context.Context, n *idlegrid.Node) (string, error) {
	cs, err := s.store.ListChallenges(ctx, idlegrid.ChallengeFilter{NodeID: n.ID, Limit: hardwareWindow})
	if err != nil {
		return "", err
	}
	return hardwareDoubt(s.trust.policy.Challenges, n.GPUs, cs), nil
}

// hardwareDoubt says why the challenges cs (newest first) leave the
// hardware of a node offering gpus unverified under pol, or "". Each
// offered GPU is judged by its own challenges, newest first: a pass
// settles it, unless it was at the simulated size and pol does not allow
// simulated runners; pol's number of unsupported answers in a row before
// any pass leaves it unverified. A GPU with no answer yet, or whose newest
// answer failed or expired (a bad fact the evidence already counts), adds
// no doubt here. A GPU no longer offered cannot be leased and is not
// judged.
func hardwareDoubt(pol trustpolicy.Challenges, gpus []idlegrid.GPU, cs []*idlegrid.Challenge) string {
	byGPU := map[string][]*idlegrid.Challenge{}
	for _, c := range cs {
		byGPU[c.GPUUUID] = append(byGPU[c.GPUUUID], c)
	}
	for _, g := range gpus {
		if why := gpuDoubt(pol, g.UUID, byGPU[g.UUID]); why != "" {
			return why
		}
	}
	return ""
}

// gpuDoubt judges one GPU by its challenges, newest first.
func gpuDoubt(pol trustpolicy.Challenges, uuid string, cs []*idlegrid.Challenge) string {
	var unsupported []*idlegrid.Challenge
	var settled *idlegrid.Challenge // the newest answer that is not unsupported
	for _, c := range cs {
		if c.State == idlegrid.ChallengeIssued {
			continue
		}
		if c.State != idlegrid.ChallengeUnsupported {
			settled = c
			break
		}
		unsupported = append(unsupported, c)
	}
	if k := pol.UnverifiedAfterUnsupported; k > 0 && len(unsupported) >= k {
		return fmt.Sprintf("hardware could not be checked: %d challenges in a row answered unsupported on GPU %s: %s",
			len(unsupported), uuid, unsupportedReason(unsupported[0]))
	}
	if settled == nil || settled.State != idlegrid.ChallengePassed || pol.AllowSimulatedRunners {
		return ""
	}
	if gpuSize, simulated := simulatedSize(settled); simulated {
		return fmt.Sprintf("challenge %s on GPU %s passed at the simulated size N=%d, not at the size for a %s, N=%d; "+
			"the trust policy does not count simulated runners (challenges.allow_simulated_runners)",
			settled.ID, uuid, settled.Size, settled.Model, gpuSize)
	}
	return ""
}

// simulatedSize reports whether c was smaller than the size a GPU of its
// claimed model and memory gets from a CUDA runner (maxSizeFor): sized for
// the CPU, small enough that a slower GPU, or the CPU itself, passes it.
func simulatedSize(c *idlegrid.Challenge) (gpuSize int, simulated bool) {
	spec, ok := challenge.LookupSpec(c.Model)
	gpuSize = challenge.SizeFor(spec, ok, c.VRAMMB, maxChallengeSize)
	return gpuSize, c.Size < gpuSize
}

// unsupportedReason is why the agent answered c unsupported, in its words.
func unsupportedReason(c *idlegrid.Challenge) string {
	if c.Answer != nil && c.Answer.Unsupported != "" {
		return c.Answer.Unsupported
	}
	for _, f := range c.Findings {
		if why, ok := strings.CutPrefix(f, "unsupported: "); ok {
			return why
		}
	}
	return "no reason given"
}
