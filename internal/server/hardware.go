package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/challenge"
	"github.com/idlegrid/idlegrid/internal/reputation"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// Verified hardware (docs/trust.md). A challenge passed proves the GPU it
// was issued for as what it claimed then: its UUID, model and memory. A
// node's hardware is verified only while every GPU it offers has passed a
// challenge as it is offered now (hardwareDoubt): a GPU never challenged,
// one whose challenges are all still waiting, and one offered as another
// model or with other memory than its passes proved (an offer changed
// without a new attestation, say) are not verified, and an offer that
// changes a GPU's claim has it challenged (offerChanged). A failed or
// unanswered challenge is a bad fact in the node's reputation, and the
// level rules read it too (hardwareUnverified). Two outcomes leave no bad
// fact yet prove nothing of the GPU, and the trust policy decides what
// they are worth:
//
//   - a challenge passed at the simulated size: the node said it computes
//     challenges on the CPU (its runner is its own word) and got one too
//     small to tell its GPU from another; it counts only where the policy
//     allows simulated runners (challenges.allow_simulated_runners);
//   - challenges answered unsupported: after the policy's number of them in
//     a row on one GPU (challenges.unverified_after_unsupported), the node's
//     hardware counts as unverified until a challenge of that GPU passes.

// offerChanged follows a change of the GPUs node nodeID offers, from
// before: each GPU whose claim changed (another model or memory, or new to
// the offer) is challenged as a changed fingerprint's GPUs are, where the
// trust policy asks for that (challenges.on_fingerprint_change) and the
// node has attested (an agent that does not attest cannot answer); and the
// node's standing is assessed again at once, so that a level its old
// claim earned does not outlive it (hardwareDoubt). A failure is logged:
// the offer was saved, and the next challenge or fact saves the standing.
func (s *Server) offerChanged(ctx context.Context, nodeID string, before []idlegrid.GPU) {
	ctx, cancel := followUp(ctx)
	defer cancel()
	n, err := s.store.FindNode(ctx, nodeID)
	if err != nil {
		s.log.Error("find node after its offer changed", "node", nodeID, "err", err)
		return
	}
	var changed []idlegrid.GPU
	for _, g := range n.GPUs {
		if !slices.ContainsFunc(before, func(b idlegrid.GPU) bool { return sameClaim(b, g) }) {
			changed = append(changed, g)
		}
	}
	if len(changed) > 0 && s.trust.policy.Challenges.OnFingerprintChange {
		if err := s.challengeChanged(ctx, n, changed); err != nil {
			s.log.Error("challenge changed GPUs", "node", nodeID, "err", err)
		}
	}
	if err := s.recordFacts(ctx, nodeID, nil, standingDelta{}); err != nil {
		s.log.Error("assess node after its offer changed", "node", nodeID, "err", err)
	}
}

// sameClaim reports whether a and b are the same GPU claimed as the same
// model with the same memory: what a challenge proves (provesClaim).
func sameClaim(a, b idlegrid.GPU) bool {
	return a.UUID == b.UUID && a.Model == b.Model && a.VRAMMB == b.VRAMMB
}

// sameClaims reports whether two offers' GPUs claim the same, in any order.
func sameClaims(a, b []idlegrid.GPU) bool {
	if len(a) != len(b) {
		return false
	}
	for _, g := range a {
		if !slices.ContainsFunc(b, func(h idlegrid.GPU) bool { return sameClaim(g, h) }) {
			return false
		}
	}
	return true
}

// challengeChanged challenges the GPUs of n whose claim its offer changed,
// sized for the runner of its latest attestation; a node that never
// attested is not challenged.
func (s *Server) challengeChanged(ctx context.Context, n *idlegrid.Node, gpus []idlegrid.GPU) error {
	att, err := s.store.LatestAttestation(ctx, n.ID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil
	} else if err != nil {
		return err
	}
	s.attest.mu.Lock()
	defer s.attest.mu.Unlock()
	cs, err := s.challengeGPUs(ctx, n, gpus, idlegrid.ChallengeOnChange, att.ChallengeRunner)
	for _, c := range cs {
		s.log.Warn("the offer changed a GPU's model or memory, or added it; challenged", "node", n.ID, "gpu", c.GPUUUID, "model", c.Model, "vram_mb", c.VRAMMB)
	}
	return err
}

// hardwareWindow is how many of a node's newest challenges are read to
// judge its hardware: at one random challenge a day, months of them.
const hardwareWindow = 200

// levelChecks is what a standing's level rests on besides its evidence.
// A provider is never quarantined itself (its nodes are), and its hardware
// is in doubt while a node's is (providerChecks).
type levelChecks struct {
	quarantined bool // a quarantined node holds level 0
	// held says why the node's provider is held at level 0 for an upheld
	// offence (offenceHold), or "".
	held string
	// hardwareDoubt says why the node's challenges leave its hardware
	// unverified, or "" (hardwareDoubt).
	hardwareDoubt string
	// provider is a thin node's provider's flag, which bounds the score
	// its level rests on (scoreOf, reputation.Params.NodeScore); nil for
	// a provider, or when no bound applies.
	provider *reputation.Flag
}

// nodeChecks are n's level checks: its quarantine, its provider's offence
// hold and what its challenges say of its hardware.
func (s *Server) nodeChecks(ctx context.Context, n *idlegrid.Node) (levelChecks, error) {
	held, err := s.offenceHold(ctx, n.ProviderID, s.Now())
	if err != nil {
		return levelChecks{}, err
	}
	doubt, err := s.hardwareDoubt(ctx, n)
	return levelChecks{quarantined: n.Quarantined, held: held, hardwareDoubt: doubt}, err
}

// providerChecks are a provider's level checks: its offence hold, and
// what its nodes' saved standings say of their hardware: while one of
// them says that node's hardware is unverified, the provider's hardware
// is unverified too, as a failed challenge on one node makes the
// provider's pooled evidence unverified. Nodes' notes are as of their
// last save, so they follow a changed trust policy at each node's next
// save. A pending node standing, when not nil, stands in for that node's
// saved one.
func (s *Server) providerChecks(ctx context.Context, providerID string, pending *idlegrid.Reputation) (levelChecks, error) {
	held, err := s.offenceHold(ctx, providerID, s.Now())
	if err != nil {
		return levelChecks{}, err
	}
	rs, err := s.store.ListReputations(ctx, idlegrid.ReputationFilter{
		Subject: idlegrid.SubjectNode, ProviderID: providerID, HardwareDoubted: true, Limit: 2})
	if err != nil {
		return levelChecks{}, err
	}
	if pending != nil {
		rs = withPending(rs, pending)
	}
	chk := levelChecks{held: held}
	var doubted *idlegrid.Reputation // the first by node ID, as listed
	for _, r := range rs {
		if r.HardwareNote != "" && (doubted == nil || r.SubjectID < doubted.SubjectID) {
			doubted = r
		}
	}
	if doubted != nil {
		chk.hardwareDoubt = fmt.Sprintf("node %s: %s", doubted.SubjectID, doubted.HardwareNote)
	}
	return chk, nil
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
// offered GPU is judged by its own challenges for its claim as offered
// (its UUID, model and memory), newest first: it needs a pass, and its
// newest pass settles it, unless that pass was at the simulated size and
// pol does not allow simulated runners; pol's number of unsupported
// answers in a row before any other answer leaves it unverified. A
// challenge issued for another claim of the GPU (before its offer
// changed) proves nothing of this one. A failed or expired answer after a
// pass adds no doubt here: it is a bad fact the evidence already counts. A
// GPU no longer offered cannot be leased and is not judged.
func hardwareDoubt(pol trustpolicy.Challenges, gpus []idlegrid.GPU, cs []*idlegrid.Challenge) string {
	byGPU := map[string][]*idlegrid.Challenge{}
	for _, c := range cs {
		byGPU[c.GPUUUID] = append(byGPU[c.GPUUUID], c)
	}
	for _, g := range gpus {
		if why := gpuDoubt(pol, g, byGPU[g.UUID]); why != "" {
			return why
		}
	}
	return ""
}

// provesClaim reports whether challenge c was issued for g as g is
// offered: the same GPU, model and memory.
func provesClaim(c *idlegrid.Challenge, g idlegrid.GPU) bool {
	return sameClaim(idlegrid.GPU{UUID: c.GPUUUID, Model: c.Model, VRAMMB: c.VRAMMB}, g)
}

// gpuDoubt judges one offered GPU by its challenges, newest first.
func gpuDoubt(pol trustpolicy.Challenges, g idlegrid.GPU, cs []*idlegrid.Challenge) string {
	var unsupported []*idlegrid.Challenge
	var passed, waiting, other *idlegrid.Challenge // the newest pass, waiting challenge, and pass of another claim
	settled := false                               // an answer other than unsupported came since the newest unsupported ones
	for _, c := range cs {
		if !provesClaim(c, g) {
			if other == nil && c.State == idlegrid.ChallengePassed {
				other = c
			}
			continue
		}
		switch c.State {
		case idlegrid.ChallengeIssued:
			if waiting == nil {
				waiting = c
			}
			continue
		case idlegrid.ChallengeUnsupported:
			if !settled {
				unsupported = append(unsupported, c)
			}
			continue
		case idlegrid.ChallengePassed:
			if passed == nil {
				passed = c
			}
		}
		settled = true
	}
	if k := pol.UnverifiedAfterUnsupported; k > 0 && len(unsupported) >= k {
		return fmt.Sprintf("hardware could not be checked: %d challenges in a row answered unsupported on GPU %s: %s",
			len(unsupported), g.UUID, unsupportedReason(unsupported[0]))
	}
	if passed == nil {
		why := fmt.Sprintf("GPU %s, offered as a %s with %d MB, has passed no challenge as such", g.UUID, g.Model, g.VRAMMB)
		if other != nil {
			why += fmt.Sprintf(" (challenge %s passed it as a %s with %d MB)", other.ID, other.Model, other.VRAMMB)
		}
		if waiting != nil {
			why += "; challenge " + waiting.ID + " waits for the agent's answer"
		}
		return why
	}
	if pol.AllowSimulatedRunners {
		return ""
	}
	if gpuSize, simulated := simulatedSize(passed); simulated {
		return fmt.Sprintf("challenge %s on GPU %s passed at the simulated size N=%d, not at the size for a %s, N=%d; "+
			"the trust policy does not count simulated runners (challenges.allow_simulated_runners)",
			passed.ID, g.UUID, passed.Size, passed.Model, gpuSize)
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
