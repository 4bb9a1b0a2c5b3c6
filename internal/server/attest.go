package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/challenge"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/reputation"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// Hardware attestation (docs/trust.md). A node's agent signs its hardware
// fingerprint with the node's key after it publishes its offer; the
// coordinator checks the signature with the key the node joined with,
// keeps every fingerprint and records each change with both values. It
// challenges a node's GPUs at its first attestation, after a change, and at
// random times (a Poisson rate from the trust policy): the agent runs the
// challenge workload (internal/challenge) and answers; the coordinator
// spot-checks the result, the time against the claimed model's band and
// the memory, records the outcome as a reputation fact and quarantines a
// node whose answer does not fit its claim, with the challenge as evidence.
// A quarantined node takes no new leases until an admin lifts it.

// Defaults of the challenge settings in Config.
const (
	// DefaultChallengeMaxSize caps N for nodes that compute challenges in
	// Go on the CPU (simulated GPUs) or did not say what they run them
	// with; a node whose agent runs them with CUDA gets challenges sized
	// for its GPU, up to maxChallengeSize (see docs/trust.md).
	DefaultChallengeMaxSize = 512
	DefaultChallengeTimeout = 10 * time.Minute
	DefaultChallengePeriod  = time.Minute
	// maxChallengeSize keeps an answer's row hashes (32 bytes a row,
	// base64 on the wire) well under the API's 1 MiB body limit.
	maxChallengeSize = 16384
	// viewChallenges and viewChanges bound the lists of an attestation view.
	viewAttestations, viewChallenges, viewHardwareChanges = 20, 50, 50
)

// attestState is the coordinator's attestation bookkeeping.
type attestState struct {
	maxSize int
	timeout time.Duration
	period  time.Duration

	// mu serialises comparing and saving fingerprints, issuing and
	// resolving challenges in this process; the store's checks guard
	// other coordinators.
	mu       sync.Mutex
	random   io.Reader // seeds, rows checked, random times
	lastPass time.Time // of the challenge loop
	// owed are the nodes drawn for a random challenge while every GPU
	// they offer was held by a live lease: each pass tries them again,
	// until one of their GPUs is idle (challengeAtRandom). This process's
	// alone: a restart forgets them, and the draw finds them again.
	owed owedChallenges
}

// owedChallenges are the nodes that owe a random challenge. The challenge
// pass writes them; the scheduler (takesNewLeases) and the hardware view
// read them, under their own lock.
type owedChallenges struct {
	mu    sync.Mutex
	nodes map[string]owedChallenge
}

// owedChallenge is one node's: since when it owes it, and whether it takes
// no new leases (the policy's MaxOwed) while it owes it and then while the
// challenge issued runs (issued), until it is answered or expires, so
// that the GPU that freed up for it is not rented again under it.
type owedChallenge struct {
	since  time.Time
	closed bool
	issued string // the challenge's ID, once issued to a closed node
}

// owing lists, in order, the nodes whose challenge is still to issue.
func (o *owedChallenges) owing() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []string
	for id, c := range o.nodes {
		if c.issued == "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// running lists the closed nodes whose challenge has been issued, with
// its ID.
func (o *owedChallenges) running() map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]string{}
	for id, c := range o.nodes {
		if c.issued != "" {
			out[id] = c.issued
		}
	}
	return out
}

// of returns node id's owed challenge; ok is false when it has none.
func (o *owedChallenges) of(id string) (c owedChallenge, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok = o.nodes[id]
	return c, ok
}

// add records that node id owes a challenge from at.
func (o *owedChallenges) add(id string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.nodes[id] = owedChallenge{since: at}
}

// close records that owing node id takes no new leases; it reports
// whether it took them before.
func (o *owedChallenges) close(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.nodes[id]
	if !ok || c.closed {
		return false
	}
	c.closed = true
	o.nodes[id] = c
	return true
}

// paid records that node id owes its challenge no more: issued (ID) runs
// now, or "" when none does (the node left, say). A closed node stays so
// while it runs; paid reports whether the node opened.
func (o *owedChallenges) paid(id, issued string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.nodes[id]
	if ok && c.closed && issued != "" {
		c.issued = issued
		o.nodes[id] = c
		return false
	}
	delete(o.nodes, id)
	return ok && c.closed
}

func newAttestState(cfg Config) *attestState {
	st := &attestState{maxSize: cfg.ChallengeMaxSize, timeout: cfg.ChallengeTimeout, period: cfg.ChallengePeriod, random: cfg.ChallengeRandom,
		owed: owedChallenges{nodes: map[string]owedChallenge{}}}
	if st.maxSize <= 0 {
		st.maxSize = DefaultChallengeMaxSize
	}
	st.maxSize = min(st.maxSize, maxChallengeSize)
	if st.timeout <= 0 {
		st.timeout = DefaultChallengeTimeout
	}
	if st.period <= 0 {
		st.period = DefaultChallengePeriod
	}
	if st.random == nil {
		st.random = rand.Reader
	}
	return st
}

// maxSizeFor caps N for a runner: a GPU's time is launch overhead at the
// CPU's sizes, so a CUDA runner gets the one-second size up to what an
// answer's row hashes allow in a request body.
func (st *attestState) maxSizeFor(r idlegrid.ChallengeRunner) int {
	if r == idlegrid.RunnerCUDA {
		return maxChallengeSize
	}
	return st.maxSize
}

// uint64 reads 8 random bytes; st.mu must be held.
func (st *attestState) uint64() uint64 {
	var b [8]byte
	if _, err := io.ReadFull(st.random, b[:]); err != nil {
		panic(fmt.Sprintf("challenge randomness failed: %v", err)) // crypto/rand never fails
	}
	return binary.LittleEndian.Uint64(b[:])
}

// float is uniform in [0, 1); st.mu must be held.
func (st *attestState) float() float64 { return float64(st.uint64()>>11) / (1 << 53) }

// rows picks k distinct rows of n; st.mu must be held.
func (st *attestState) rows(n, k int) []int {
	picked := map[int]bool{}
	for len(picked) < min(k, n) {
		picked[int(st.uint64()%uint64(n))] = true
	}
	out := make([]int, 0, len(picked))
	for r := range picked {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// Attest checks and records the calling node's signed fingerprint, flags
// what changed since the last one and issues the challenges the trust
// policy asks for.
func (s *Server) Attest(ctx context.Context, req idlegrid.AttestRequest) (*idlegrid.AttestResponse, error) {
	c, err := node(ctx)
	if err != nil {
		return nil, err
	}
	a := req.Attestation
	if a.NodeID != c.NodeID {
		return nil, idlegrid.Invalid("attestation.node_id", "must be the calling node, %s", c.NodeID)
	}
	if err := a.Fingerprint.Validate("attestation.fingerprint"); err != nil {
		return nil, err
	}
	if err := a.ChallengeRunner.Validate("attestation.challenge_runner"); err != nil {
		return nil, err
	}
	n, err := s.store.FindNode(ctx, c.NodeID)
	if err != nil {
		return nil, err
	}
	if err := s.checkAttestation(n, &a); err != nil {
		return nil, err
	}
	now := s.Now()
	a.Hash, a.ReceivedAt = a.Fingerprint.Hash(), now

	s.attest.mu.Lock()
	defer s.attest.mu.Unlock()
	prev, err := s.store.LatestAttestation(ctx, n.ID)
	if err != nil && idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		return nil, err
	}
	var changes []idlegrid.HardwareChange
	prevHash := ""
	if prev != nil {
		prevHash = prev.Hash
		changes = idlegrid.DiffFingerprints(prev.Fingerprint, a.Fingerprint)
		for i := range changes {
			ch := &changes[i]
			ch.ID, ch.NodeID, ch.At, ch.FromHash, ch.ToHash = idlegrid.NewID("hwc"), n.ID, now, prev.Hash, a.Hash
		}
	}
	if err := s.store.SaveAttestation(ctx, &a, prevHash, changes); err != nil {
		return nil, err
	}
	for _, ch := range changes {
		s.log.Warn("hardware changed", "node", n.ID, "kind", ch.Kind, "gpu", ch.GPUUUID, "before", ch.Before, "after", ch.After)
	}
	resp := &idlegrid.AttestResponse{Hash: a.Hash, Changes: changes}
	policy := s.trust.policy.Challenges
	err = nil
	switch {
	case prev == nil && policy.AtJoin:
		resp.Challenges, err = s.challengeGPUs(ctx, n, a.Fingerprint.GPUs, idlegrid.ChallengeAtJoin, a.ChallengeRunner)
	case len(changes) > 0 && policy.OnFingerprintChange:
		resp.Challenges, err = s.challengeGPUs(ctx, n, changedGPUs(a.Fingerprint, changes), idlegrid.ChallengeOnChange, a.ChallengeRunner)
	}
	return resp, err
}

// checkAttestation checks a's signature with the key n joined with, its
// time, and that it covers every GPU n offers as offered.
func (s *Server) checkAttestation(n *idlegrid.Node, a *idlegrid.Attestation) error {
	pub, err := nodekey.ParsePublic(n.PublicKey)
	if err != nil {
		return err
	}
	if err := nodekey.VerifyAttestation(pub, a); err != nil {
		return idlegrid.Invalid("attestation.signature", "%v; sign the fingerprint with the node's key (nodekey.SignAttestation)", err)
	}
	if d := s.Now().Sub(a.SignedAt); d > nodekey.MaxSkew || d < -nodekey.MaxSkew {
		return idlegrid.Invalid("attestation.signed_at", "%s off the server's clock; sign a fresh attestation and check the node's clock (NTP)", d.Round(time.Second))
	}
	attested := map[string]idlegrid.GPU{}
	for _, g := range a.Fingerprint.GPUs {
		attested[g.UUID] = g
	}
	for _, g := range n.GPUs {
		f, ok := attested[g.UUID]
		if !ok || f.Model != g.Model || f.VRAMMB != g.VRAMMB {
			return idlegrid.Invalid("attestation.fingerprint", "GPU %s is offered as %s with %d MB; the fingerprint must list every offered GPU as offered", g.UUID, g.Model, g.VRAMMB)
		}
	}
	return nil
}

// changedGPUs are the GPUs of f that changes touch.
func changedGPUs(f idlegrid.HardwareFingerprint, changes []idlegrid.HardwareChange) []idlegrid.GPU {
	touched := map[string]bool{}
	for _, c := range changes {
		touched[c.GPUUUID] = true
	}
	var out []idlegrid.GPU
	for _, g := range f.GPUs {
		if touched[g.UUID] {
			out = append(out, g)
		}
	}
	return out
}

// challengeGPUs issues a challenge to each of gpus that has none waiting
// for its claim (its model and memory as given), sized for the node's
// runner; s.attest.mu must be held. A challenge issued for an earlier
// claim of the GPU still waits for its answer, but proves only that claim
// (hardwareDoubt), so the GPU gets one for its new claim too.
func (s *Server) challengeGPUs(ctx context.Context, n *idlegrid.Node, gpus []idlegrid.GPU, why idlegrid.ChallengeReason, runner idlegrid.ChallengeRunner) ([]*idlegrid.Challenge, error) {
	open, err := s.store.ListChallenges(ctx, idlegrid.ChallengeFilter{NodeID: n.ID, States: []idlegrid.ChallengeState{idlegrid.ChallengeIssued}})
	if err != nil {
		return nil, err
	}
	var out []*idlegrid.Challenge
	for _, g := range gpus {
		if slices.ContainsFunc(open, func(c *idlegrid.Challenge) bool { return provesClaim(c, g) }) {
			continue
		}
		c := s.newChallenge(n.ID, g, why, runner)
		if err := s.store.CreateChallenge(ctx, c); err != nil {
			return out, err
		}
		s.log.Info("hardware challenge issued", "node", n.ID, "gpu", g.UUID, "model", g.Model, "reason", why, "size", c.Size)
		out = append(out, c)
	}
	return out, nil
}

// newChallenge sizes a challenge for g's claimed model and memory and the
// node's runner; s.attest.mu must be held.
func (s *Server) newChallenge(nodeID string, g idlegrid.GPU, why idlegrid.ChallengeReason, runner idlegrid.ChallengeRunner) *idlegrid.Challenge {
	spec, ok := challenge.LookupSpec(g.Model)
	size := challenge.SizeFor(spec, ok, g.VRAMMB, s.attest.maxSizeFor(runner))
	var seed [challenge.SeedSize]byte
	binary.LittleEndian.PutUint64(seed[:8], s.attest.uint64())
	binary.LittleEndian.PutUint64(seed[8:], s.attest.uint64())
	now := s.Now()
	c := &idlegrid.Challenge{
		ID: idlegrid.NewID("chl"), NodeID: nodeID, GPUUUID: g.UUID, Model: g.Model, VRAMMB: g.VRAMMB,
		Seed: hex.EncodeToString(seed[:]), Size: size, Reason: why, State: idlegrid.ChallengeIssued,
		IssuedAt: now, Deadline: now.Add(s.attest.timeout),
	}
	if ok {
		lo, hi := spec.Band(size)
		c.MinNanos, c.MaxNanos = int64(lo), int64(hi)
	}
	return c
}

// PendingChallenges lists the calling node's challenges that wait for its
// answer, oldest first.
func (s *Server) PendingChallenges(ctx context.Context) (*idlegrid.ChallengesResponse, error) {
	c, err := node(ctx)
	if err != nil {
		return nil, err
	}
	open, err := s.store.ListChallenges(ctx, idlegrid.ChallengeFilter{NodeID: c.NodeID, States: []idlegrid.ChallengeState{idlegrid.ChallengeIssued}})
	if err != nil {
		return nil, err
	}
	now := s.Now()
	out := []*idlegrid.Challenge{}
	for i := len(open) - 1; i >= 0; i-- {
		if now.Before(open[i].Deadline) {
			out = append(out, open[i])
		}
	}
	return &idlegrid.ChallengesResponse{Challenges: out}, nil
}

// AnswerChallenge judges the calling node's answer to one of its
// challenges, records the outcome and quarantines the node on failure.
func (s *Server) AnswerChallenge(ctx context.Context, id string, ans idlegrid.ChallengeAnswer) (*idlegrid.Challenge, error) {
	caller, err := node(ctx)
	if err != nil {
		return nil, err
	}
	if err := validAnswer(&ans); err != nil {
		return nil, err
	}
	s.attest.mu.Lock()
	defer s.attest.mu.Unlock()
	c, err := s.store.FindChallenge(ctx, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND || (err == nil && c.NodeID != caller.NodeID) {
		return nil, notFound("challenge", id)
	} else if err != nil {
		return nil, err
	}
	if c.State != idlegrid.ChallengeIssued {
		return nil, idlegrid.Errorf(idlegrid.ECONFLICT, "challenge %s is already %s", id, c.State)
	}
	now := s.Now()
	if !now.Before(c.Deadline) {
		if err := s.expire(ctx, c, now); err != nil {
			return nil, err
		}
		return nil, idlegrid.Errorf(idlegrid.ECONFLICT, "challenge %s expired at %s; answer challenges before their deadline", id, c.Deadline.Format(time.RFC3339))
	}
	kept := ans
	kept.RowHashes = nil // checked below; the digest stands for them in the record
	c.Answer, c.ResolvedAt = &kept, &now
	var q *idlegrid.Quarantine
	switch {
	case ans.Unsupported != "":
		c.State, c.Findings = idlegrid.ChallengeUnsupported, []string{"unsupported: " + ans.Unsupported}
	default:
		t, err := challenge.TaskOf(c)
		if err != nil {
			return nil, err
		}
		v := challenge.Judge(c, &ans, s.attest.rows(t.Size, challenge.SpotRows))
		c.State, c.Findings = idlegrid.ChallengePassed, v.Findings
		if !v.Passed {
			c.State = idlegrid.ChallengeFailed
			if q, err = quarantineFor(c, v.Failures, now); err != nil {
				return nil, err
			}
		}
	}
	var f *idlegrid.FollowUp
	if q != nil { // the conviction, done again by the reaper if not done here (followup.go)
		f = challengeFollowUp(c, now)
	}
	quarantined, err := s.store.ResolveChallenge(ctx, c, q, f)
	if err != nil {
		return nil, err
	}
	if q != nil && !quarantined && s.convictedInQuarantine(ctx, c.NodeID) {
		q = nil // convicted already of fake hardware in this quarantine: one offence, one penalty
	}
	s.afterChallenge(ctx, c, q, quarantined, f)
	return c, nil
}

func validAnswer(a *idlegrid.ChallengeAnswer) error {
	switch {
	case a.Unsupported != "":
		if len(a.Unsupported) > 500 {
			return idlegrid.Invalid("answer.unsupported", "at most 500 characters")
		}
	case !idlegrid.IsHexSHA256(a.Digest):
		return idlegrid.Invalid("answer.digest", "must be a SHA-256 in lowercase hex (64 characters)")
	case a.ElapsedNanos <= 0:
		return idlegrid.Invalid("answer.elapsed_nanos", "must be positive")
	case a.VRAMMB < 0:
		return idlegrid.Invalid("answer.vram_mb", "must not be negative")
	case len(a.RowHashes)%32 != 0 || len(a.RowHashes) > 32*maxChallengeSize:
		return idlegrid.Invalid("answer.row_hashes", "must be one 32-byte hash per row")
	}
	return nil
}

// quarantineFor is the quarantine a failed challenge puts its node in,
// with the challenge, its answer and its findings as the evidence.
func quarantineFor(c *idlegrid.Challenge, failures []string, now time.Time) (*idlegrid.Quarantine, error) {
	evidence, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	reason := fmt.Sprintf("failed hardware challenge %s on GPU %s (claims %s): %s", c.ID, c.GPUUUID, c.Model, strings.Join(failures, "; "))
	return &idlegrid.Quarantine{ID: idlegrid.NewID("qua"), NodeID: c.NodeID, Reason: reason, Evidence: evidence, Since: now}, nil
}

// convictedInQuarantine reports whether the node, in quarantine, was
// convicted of fake hardware since its quarantine began: a node whose
// several GPUs fail is one offence, whoever quarantined it (a failed
// challenge, or an operator for something else, in which case the first
// failure is convicted). On a store error it says yes: no penalty rather
// than a second one.
func (s *Server) convictedInQuarantine(ctx context.Context, nodeID string) bool {
	q, err := s.store.FindQuarantine(ctx, nodeID)
	if err != nil {
		s.log.Error("find quarantine", "node", nodeID, "err", err)
		return true
	}
	ds, err := s.store.ListDisputes(ctx, idlegrid.DisputeFilter{ProviderID: q.ProviderID, States: []idlegrid.DisputeState{idlegrid.DisputeUpheld}})
	if err != nil {
		s.log.Error("list disputes", "node", nodeID, "err", err)
		return true
	}
	return slices.ContainsFunc(ds, func(d *idlegrid.Dispute) bool {
		return d.NodeID == nodeID && d.Offence == string(trustpolicy.OffenceFakeHardware) && !d.CreatedAt.Before(q.Since)
	})
}

// afterChallenge logs an outcome (the store logged it to the audit log), lets
// the engine drop a quarantined node and records the outcome in the
// node's reputation. An unsupported answer is no fact either way, but the
// node's level is assessed again: enough of them in a row leave its
// hardware unverified (hardwareDoubt), a demotion recorded like any other.
// It runs to the end whether or not the request that resolved the
// challenge is still there (followUp). The conviction's follow-up f, when
// given, is removed once the conviction is done, or was not called for.
func (s *Server) afterChallenge(ctx context.Context, c *idlegrid.Challenge, q *idlegrid.Quarantine, quarantined bool, f *idlegrid.FollowUp) {
	ctx, cancel := followUp(ctx)
	defer cancel()
	s.log.Info("hardware challenge resolved", "node", c.NodeID, "challenge", c.ID, "state", c.State)
	if q != nil && quarantined {
		s.log.Warn("node quarantined", "node", c.NodeID, "reason", q.Reason)
		s.markNode(c.NodeID)
	}
	var convicted error
	if q != nil && c.State == idlegrid.ChallengeFailed {
		convicted = s.fakeHardware(ctx, c, q.Reason) // dispute.go
	}
	s.followed(ctx, f, convicted)
	fact := func(kind reputation.FactKind) []idlegrid.ReputationFact {
		return []idlegrid.ReputationFact{storedFact(c.NodeID, "challenge:"+c.ID, c.ID, reputation.Fact{Kind: kind, At: *c.ResolvedAt}, 1)}
	}
	var facts []idlegrid.ReputationFact
	switch c.State {
	case idlegrid.ChallengePassed:
		facts = fact(reputation.FactChallengePassed)
	case idlegrid.ChallengeFailed, idlegrid.ChallengeExpired:
		facts = fact(reputation.FactChallengeFailed)
	case idlegrid.ChallengeUnsupported: // no evidence either way; the level is assessed again
	default:
		return
	}
	if err := s.recordFacts(ctx, c.NodeID, facts, standingDelta{}); err != nil {
		s.log.Error("record challenge fact", "node", c.NodeID, "challenge", c.ID, "err", err)
	}
}

// expire closes a challenge that got no answer in time: a failed
// challenge in the node's reputation, without quarantine (the node may
// simply have gone away).
func (s *Server) expire(ctx context.Context, c *idlegrid.Challenge, now time.Time) error {
	c.State, c.ResolvedAt = idlegrid.ChallengeExpired, &now
	c.Findings = []string{fmt.Sprintf("no answer by the deadline, %s after it was issued", c.Deadline.Sub(c.IssuedAt))}
	if _, err := s.store.ResolveChallenge(ctx, c, nil, nil); err != nil {
		return err
	}
	s.afterChallenge(ctx, c, nil, false, nil)
	return nil
}

// runChallenges runs ChallengePass every challenge period until ctx is done.
func (s *Server) runChallenges(ctx context.Context) {
	s.every(ctx, s.attest.period, "challenge pass", s.ChallengePass)
}

// ChallengePass expires the challenges past their deadline and issues
// random ones: each online, unquarantined node that has attested is due
// one with the trust policy's Poisson chance for the time since the last
// pass, on one of its offered GPUs that no live lease holds, picked at
// random. A node drawn while every GPU it offers runs a lease is owed its
// challenge until one is idle: the agent answers a challenge of a busy GPU
// unsupported, and enough of those in a row leave the node's hardware
// unverified (hardwareDoubt).
func (s *Server) ChallengePass(ctx context.Context) error {
	s.attest.mu.Lock()
	defer s.attest.mu.Unlock()
	now := s.Now()
	open, err := s.store.ListChallenges(ctx, idlegrid.ChallengeFilter{States: []idlegrid.ChallengeState{idlegrid.ChallengeIssued}, Limit: math.MaxInt32})
	if err != nil {
		return err
	}
	for _, c := range open {
		if !now.Before(c.Deadline) {
			if err := s.expire(ctx, c, now); err != nil && idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
				return err
			}
		}
	}
	since := s.attest.period
	if !s.attest.lastPass.IsZero() {
		since = now.Sub(s.attest.lastPass)
	}
	s.attest.lastPass = now
	if err := s.retryOwed(ctx, now); err != nil {
		return err
	}
	chance := s.trust.policy.Challenges.Chance(since)
	if chance <= 0 {
		return nil
	}
	// The draw comes first, on the online nodes' IDs alone, so that a pass
	// reads only the few nodes drawn and not every node's offer.
	online, err := s.store.OnlineHeartbeats(ctx)
	if err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(online)) {
		if _, owed := s.attest.owed.of(id); owed || s.attest.float() >= chance {
			continue
		}
		_, owed, err := s.challengeAtRandom(ctx, id)
		if err != nil {
			return err
		}
		if owed {
			s.attest.owed.add(id, now)
		}
	}
	return nil
}

// retryOwed tries each owed challenge again. A node that has owed its
// challenge for the policy's MaxOwed takes no new leases until it is
// issued and has run: the next of its GPUs to free up is challenged, not
// rented again. s.attest.mu must be held.
func (s *Server) retryOwed(ctx context.Context, now time.Time) error {
	maxOwed := s.trust.policy.Challenges.MaxOwed
	for _, id := range s.attest.owed.owing() {
		ch, owed, err := s.challengeAtRandom(ctx, id)
		if err != nil {
			return err
		}
		c, _ := s.attest.owed.of(id)
		switch {
		case !owed:
			s.reopen(id, s.attest.owed.paid(id, challengeID(ch)))
		case maxOwed > 0 && now.Sub(c.since) >= maxOwed && s.attest.owed.close(id):
			s.markNode(id) // the scheduler takes it out of the market
			s.log.Info("node takes no new leases until a GPU is idle for the hardware challenge it owes", "node", id, "owed_since", c.since)
		}
	}
	for id, chID := range s.attest.owed.running() {
		c, err := s.store.FindChallenge(ctx, chID)
		if err != nil && idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			return err
		}
		if c == nil || c.State != idlegrid.ChallengeIssued {
			s.reopen(id, s.attest.owed.paid(id, ""))
		}
	}
	return nil
}

// reopen tells the scheduler that node id takes leases again, when it
// does.
func (s *Server) reopen(id string, opened bool) {
	if opened {
		s.markNode(id)
		s.log.Info("node takes leases again: the hardware challenge it owed has run", "node", id)
	}
}

// challengeID is c's ID, or "" for none.
func challengeID(c *idlegrid.Challenge) string {
	if c == nil {
		return ""
	}
	return c.ID
}

// challengeAtRandom challenges one of node id's offered GPUs that no live
// lease holds, picked at random, unless the node is no longer online, is
// quarantined, offers no GPU or has never attested (its hardware is not
// verified meanwhile: hardwareDoubt). It returns the challenge issued, if
// any: none when the GPU picked has one waiting already. When every GPU
// it offers is held, it issues nothing and says the challenge is still
// owed. s.attest.mu must be held.
func (s *Server) challengeAtRandom(ctx context.Context, id string) (issued *idlegrid.Challenge, owed bool, err error) {
	n, err := s.store.FindNode(ctx, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, false, nil // gone since the read
	} else if err != nil {
		return nil, false, err
	}
	if n.State != idlegrid.NodeOnline || n.Quarantined || len(n.GPUs) == 0 {
		return nil, false, nil
	}
	att, err := s.store.LatestAttestation(ctx, n.ID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, false, nil // an agent that does not attest cannot answer either
	} else if err != nil {
		return nil, false, err
	}
	idle, err := s.idleGPUs(ctx, n)
	if err != nil {
		return nil, false, err
	}
	if len(idle) == 0 {
		return nil, true, nil
	}
	g := idle[s.attest.uint64()%uint64(len(idle))]
	cs, err := s.challengeGPUs(ctx, n, []idlegrid.GPU{g}, idlegrid.ChallengeAtRandom, att.ChallengeRunner)
	if len(cs) > 0 {
		issued = cs[0]
	}
	return issued, false, err
}

// idleGPUs are the GPUs n offers that none of its live leases holds.
func (s *Server) idleGPUs(ctx context.Context, n *idlegrid.Node) ([]idlegrid.GPU, error) {
	leases, err := s.store.ListLeases(ctx, idlegrid.LeaseFilter{NodeID: n.ID, States: liveLeaseStates})
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for _, l := range leases {
		for _, u := range l.GPUUUIDs {
			held[u] = true
		}
	}
	var out []idlegrid.GPU
	for _, g := range n.GPUs {
		if !held[g.UUID] {
			out = append(out, g)
		}
	}
	return out, nil
}

// ChallengeNode issues a challenge to every GPU a node offers, at an
// admin's request.
func (s *Server) ChallengeNode(ctx context.Context, nodeID string) ([]*idlegrid.Challenge, error) {
	if _, err := requireUse(ctx, idlegrid.RoleAdmin); err != nil {
		return nil, err
	}
	n, err := s.store.FindNode(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	runner := idlegrid.RunnerUnknown
	if att, err := s.store.LatestAttestation(ctx, n.ID); err == nil {
		runner = att.ChallengeRunner
	} else if idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		return nil, err
	}
	s.attest.mu.Lock()
	defer s.attest.mu.Unlock()
	return s.challengeGPUs(ctx, n, n.GPUs, idlegrid.ChallengeByAdmin, runner)
}

// NodeAttestation shows a node's hardware record to its owner or an admin:
// its fingerprints, their changes, its challenges and its quarantines.
func (s *Server) NodeAttestation(ctx context.Context, nodeID string) (*idlegrid.NodeAttestationView, error) {
	n, err := s.ownNode(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	v := &idlegrid.NodeAttestationView{NodeID: n.ID}
	if c, ok := s.attest.owed.of(n.ID); ok {
		v.ChallengeOwed = &idlegrid.OwedChallenge{Since: c.since, NoNewLeases: c.closed, ChallengeID: c.issued}
	}
	if v.History, err = s.store.ListAttestations(ctx, n.ID, viewAttestations); err != nil {
		return nil, err
	}
	if len(v.History) > 0 {
		v.Current = v.History[0]
	}
	if v.Changes, err = s.store.ListHardwareChanges(ctx, n.ID, viewHardwareChanges); err != nil {
		return nil, err
	}
	// One read serves both the view and the hardware's judgement, which
	// looks further back.
	recent, err := s.store.ListChallenges(ctx, idlegrid.ChallengeFilter{NodeID: n.ID, Limit: hardwareWindow})
	if err != nil {
		return nil, err
	}
	v.Challenges = recent[:min(len(recent), viewChallenges)]
	if v.Quarantines, err = s.store.ListQuarantines(ctx, idlegrid.QuarantineFilter{NodeID: n.ID}); err != nil {
		return nil, err
	}
	for _, q := range v.Quarantines {
		if q.Active() {
			v.Quarantine = q
		}
	}
	// The note follows the rule the node's levels and badge follow.
	var ev reputation.Evidence
	rep, err := s.store.FindReputation(ctx, idlegrid.SubjectNode, n.ID)
	if err == nil {
		ev = s.trust.policy.Reputation.DecayedTo(reputation.EvidenceOf(rep), s.Now())
	} else if idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		return nil, err
	}
	chk := levelChecks{quarantined: n.Quarantined, hardwareDoubt: hardwareDoubt(s.trust.policy.Challenges, n.GPUs, recent)}
	v.VerifiedNote = verifiedNote(v, hardwareUnverified(ev, chk))
	return v, nil
}

// verifiedNote says in words where the node's hardware stands; why is why
// its hardware is not verified (hardwareUnverified), or "".
func verifiedNote(v *idlegrid.NodeAttestationView, why string) string {
	if v.Quarantine != nil {
		return "quarantined: " + v.Quarantine.Reason + "; an admin can lift it (idlegrid node quarantine lift " + v.NodeID + ")"
	}
	if v.Current == nil {
		return "not attested: the node's agent has not signed its hardware fingerprint; upgrade the agent"
	}
	if why != "" {
		return "hardware not verified: " + why
	}
	for _, c := range v.Challenges {
		if c.State == idlegrid.ChallengePassed {
			return fmt.Sprintf("hardware verified: challenge %s passed at %s", c.ID, c.ResolvedAt.Format(time.RFC3339))
		}
	}
	return "hardware verified"
}

// QuarantineNode puts a node in quarantine at an admin's word, with the
// reason as its evidence.
func (s *Server) QuarantineNode(ctx context.Context, nodeID, reason string) (*idlegrid.Quarantine, error) {
	c, err := requireManage(ctx, idlegrid.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(reason) == "" || len(reason) > 1000 {
		return nil, idlegrid.Invalid("reason", "required, at most 1000 characters: say why, for the provider to read")
	}
	evidence, err := json.Marshal(map[string]string{"by": c.AccountID, "reason": reason})
	if err != nil {
		return nil, err
	}
	q := &idlegrid.Quarantine{ID: idlegrid.NewID("qua"), NodeID: nodeID, Reason: reason, Evidence: evidence, Since: s.Now()}
	if err := s.store.QuarantineNode(ctx, q); err != nil {
		return nil, err
	}
	s.log.Warn("node quarantined", "node", nodeID, "by", c.AccountID, "reason", reason)
	s.markNode(nodeID)
	return q, nil
}

// LiftQuarantine ends a node's quarantine at an admin's word.
func (s *Server) LiftQuarantine(ctx context.Context, nodeID, note string) (*idlegrid.Quarantine, error) {
	c, err := requireManage(ctx, idlegrid.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if len(note) > 1000 {
		return nil, idlegrid.Invalid("note", "at most 1000 characters")
	}
	if _, err := s.store.FindNode(ctx, nodeID); err != nil {
		return nil, err
	}
	q, err := s.store.LiftQuarantine(ctx, nodeID, c.AccountID, note, s.Now())
	if err != nil {
		return nil, err
	}
	s.log.Info("quarantine lifted", "node", nodeID, "by", c.AccountID)
	s.markNode(nodeID)
	return q, nil
}

// ListQuarantines lists the quarantines f selects, newest first: every
// node's for an admin, a provider's own nodes' for a provider.
func (s *Server) ListQuarantines(ctx context.Context, f idlegrid.QuarantineFilter) ([]*idlegrid.Quarantine, error) {
	c, err := requireRole(ctx, idlegrid.RoleProvider, idlegrid.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if !c.IsAdmin() {
		f.ProviderID = c.AccountID
	}
	if err := checkLimit(f.Limit); err != nil {
		return nil, err
	}
	return s.store.ListQuarantines(ctx, f)
}

// ListChallenges lists the hardware challenges of node nodeID that f
// selects, newest first, to its owner or an admin: the whole history,
// where the attestation view shows only the newest.
func (s *Server) ListChallenges(ctx context.Context, nodeID string, f idlegrid.ChallengeFilter) ([]*idlegrid.Challenge, error) {
	n, err := s.ownNode(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	if err := checkLimit(f.Limit); err != nil {
		return nil, err
	}
	f.NodeID = n.ID
	return s.store.ListChallenges(ctx, f)
}
