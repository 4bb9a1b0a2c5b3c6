package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/backoff"
	"github.com/idlegrid/idlegrid/internal/challenge"
	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/gpu/cuda"
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

// GPUChallenger runs the challenge workload on a real GPU; *cuda.Runner
// is one. Its result is checked by the agent before it is sent
// (checkGPUResult).
type GPUChallenger interface {
	Run(ctx context.Context, gpuUUID string, t challenge.Task) (*cuda.Result, error)
}

// SelfCheckRows is how many rows of a GPU's product the agent recomputes
// on the CPU before it answers: a broken kernel, library or operand
// layout gets every row wrong, and is caught here as unsupported rather
// than failed by the coordinator, which would quarantine an honest node.
const SelfCheckRows = 2

// attestation is what the agent attests, for its loop, which owns it.
type attestation struct {
	hash string // of the fingerprint last accepted
	// How the node runs challenges, settled at the first attestation.
	settled bool
	runner  idlegrid.ChallengeRunner
	gpu     GPUChallenger // for RunnerCUDA
	why     string        // why there is no runner, for the answers
	closer  io.Closer     // a CUDA runner this agent opened
}

// settleRunner decides once how the node runs challenges: on the CPU for
// simulated GPUs, else with the GPUChallenger given or CUDA if it loads.
func (a *Agent) settleRunner(last *attestation) {
	if last.settled {
		return
	}
	last.settled = true
	if _, ok := a.det.(simulatedGPUs); ok {
		last.runner = idlegrid.RunnerSimulated
		return
	}
	if a.challenger != nil {
		last.runner, last.gpu = idlegrid.RunnerCUDA, a.challenger
		return
	}
	r, err := cuda.Open()
	if err != nil {
		last.why = err.Error()
		a.log.Info("hardware challenges cannot run on this node's GPUs; they will be answered unsupported", "err", err)
		return
	}
	last.runner, last.gpu, last.closer = idlegrid.RunnerCUDA, r, r
	a.log.Info("hardware challenges run on the GPUs with CUDA", "cublas", r.BLAS())
}

// close releases a runner the agent opened.
func (last *attestation) close() {
	if last.closer != nil {
		last.closer.Close()
		last.closer, last.gpu = nil, nil
	}
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
	a.settleRunner(last)
	att := idlegrid.Attestation{NodeID: a.NodeID(), Fingerprint: idlegrid.FingerprintOf(gpus), SignedAt: a.clock.Now(),
		ChallengeRunner: last.runner}
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
	defer last.close()
	for {
		a.attest(ctx, last)
		a.answerChallenges(ctx, as, last)
		if !backoff.Sleep(ctx, ChallengePoll) {
			return
		}
	}
}

// answerChallenges runs each waiting challenge and sends its answer.
func (a *Agent) answerChallenges(ctx context.Context, as AttestServer, last *attestation) {
	cs, err := as.PendingChallenges(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("challenges: cannot list them", "err", err)
		}
		return
	}
	for _, c := range cs {
		ans := a.runChallenge(ctx, c, last)
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
// allocate. On real GPUs it runs it with CUDA (runOnGPU), or answers
// unsupported, saying why, where it cannot.
func (a *Agent) runChallenge(ctx context.Context, c *idlegrid.Challenge, last *attestation) idlegrid.ChallengeAnswer {
	a.settleRunner(last)
	sim, ok := a.det.(simulatedGPUs)
	if !ok {
		return a.runOnGPU(ctx, c, last)
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

// runOnGPU runs c on a real GPU and answers only what it can stand by:
// any error, a busy GPU, or a result that fails the agent's own check is
// answered unsupported with the reason, never sent to be judged, so that
// a fault here cannot get an honest node quarantined.
func (a *Agent) runOnGPU(ctx context.Context, c *idlegrid.Challenge, last *attestation) idlegrid.ChallengeAnswer {
	unsupported := func(format string, args ...any) idlegrid.ChallengeAnswer {
		why := fmt.Sprintf(format, args...)
		if len(why) > 500 { // the server's limit
			why = why[:497] + "..."
		}
		return idlegrid.ChallengeAnswer{Unsupported: why}
	}
	if last.gpu == nil {
		return unsupported("this agent cannot run the challenge workload on a real GPU: %s (docs/trust.md)", last.why)
	}
	t, err := challenge.TaskOf(c)
	if err != nil {
		return unsupported("%v", err)
	}
	if busy := a.gpuBusy(ctx, c.GPUUUID); busy != "" {
		return unsupported("%s; its time and memory now would not be its own", busy)
	}
	res, err := last.gpu.Run(ctx, c.GPUUUID, t)
	if err != nil {
		return unsupported("the GPU could not run the challenge: %v", err)
	}
	if err := checkGPUResult(t, res, SelfCheckRows); err != nil {
		a.log.Error("hardware challenge: the GPU's result failed the agent's own check; answering unsupported", "challenge", c.ID, "gpu", c.GPUUUID, "err", err)
		return unsupported("the GPU result failed the agent's own self-check: %v", err)
	}
	need := int(math.Ceil(challenge.VRAMShare * float64(c.VRAMMB)))
	if others := res.TotalMB - res.FreeMBAtRun; res.VRAMMB < need && res.VRAMMB+others >= need {
		return unsupported("%d MB of the GPU's memory were in use by others when the challenge ran; it could allocate %d MB of the %d MB needed", others, res.VRAMMB, need)
	}
	a.log.Info("hardware challenge computed on the GPU", "challenge", c.ID, "gpu", c.GPUUUID, "device", res.Device, "size", t.Size, "elapsed", res.Elapsed, "vram_mb", res.VRAMMB)
	return idlegrid.ChallengeAnswer{RowHashes: res.RowHashes, Digest: challenge.Digest(res.RowHashes),
		ElapsedNanos: max(int64(res.Elapsed), 1), VRAMMB: res.VRAMMB}
}

// A GPU that drives a display always has graphics processes on it: the
// display server and the compositor. A challenge runs beside them when
// between them they hold at most DisplayMaxVRAMPercent of the GPU's
// memory and the GPU is at most DisplayMaxUtilPct busy, a desktop at rest:
// they then take neither the memory the challenge needs (runOnGPU checks
// what others held when it ran) nor time enough to leave the model's band.
// A compute process, or graphics ones beyond these bounds (a game), make
// the GPU busy (docs/trust.md).
const (
	DisplayMaxVRAMPercent = 10
	DisplayMaxUtilPct     = 10
)

// gpuBusy says why the GPU is not free to run a challenge, or "" when it
// is (busyWith).
func (a *Agent) gpuBusy(ctx context.Context, uuid string) string {
	devs, err := a.det.Detect(ctx)
	if err != nil {
		return fmt.Sprintf("cannot tell whether GPU %s is busy: %v", uuid, err)
	}
	for _, d := range devs {
		if d.UUID == uuid {
			return busyWith(d, os.Getpid())
		}
	}
	return fmt.Sprintf("GPU %s is not on this node now", uuid)
}

// busyWith says which processes other than self keep d busy, or "" when
// none does: another compute workload would slow the product and hold
// memory; a display's graphics processes do not while they stay within
// DisplayMaxVRAMPercent and DisplayMaxUtilPct. A process of unknown kind
// counts as compute.
func busyWith(d gpu.Device, self int) string {
	var compute, graphics []int
	graphicsMB, unknownMB := 0, false
	for _, p := range d.Processes {
		switch {
		case p.PID == self:
		case p.GraphicsOnly():
			graphics = append(graphics, p.PID)
			graphicsMB += p.UsedMB
			unknownMB = unknownMB || p.UsedMB <= 0
		default:
			compute = append(compute, p.PID)
		}
	}
	switch {
	case len(compute) > 0:
		return fmt.Sprintf("GPU %s is in use by %d other processes (PIDs %v)", d.UUID, len(compute), compute)
	case len(graphics) == 0:
		return ""
	}
	if unknownMB { // the driver does not say what each holds: all that is in use bounds it
		graphicsMB = max(graphicsMB, d.MemUsedMB)
	}
	if d.VRAMMB <= 0 || 100*graphicsMB > DisplayMaxVRAMPercent*d.VRAMMB {
		return fmt.Sprintf("GPU %s is in use by %d graphics processes (PIDs %v) holding %d MB, more than %d%% of its %d MB",
			d.UUID, len(graphics), graphics, graphicsMB, DisplayMaxVRAMPercent, d.VRAMMB)
	}
	if d.UtilPct > DisplayMaxUtilPct {
		return fmt.Sprintf("GPU %s is %d%% busy drawing for %d graphics processes (PIDs %v), more than %d%%",
			d.UUID, d.UtilPct, len(graphics), graphics, DisplayMaxUtilPct)
	}
	return ""
}

// errShape is a GPU result of the wrong size.
var errShape = errors.New("not one 32-byte row hash per row")

// checkGPUResult recomputes rows of the product picked at random on the
// CPU (challenge.Task.Row) and compares their hashes with the GPU's.
func checkGPUResult(t challenge.Task, res *cuda.Result, rows int) error {
	if len(res.RowHashes) != 32*t.Size {
		return fmt.Errorf("%d bytes of row hashes for N=%d: %w", len(res.RowHashes), t.Size, errShape)
	}
	if res.Elapsed <= 0 {
		return fmt.Errorf("the product took %v by the GPU's clock", res.Elapsed)
	}
	for _, i := range rand.Perm(t.Size)[:min(rows, t.Size)] {
		want := t.RowHash(i, t.Row(i))
		if !bytes.Equal(res.RowHashes[32*i:32*i+32], want[:]) {
			return fmt.Errorf("row %d of the product differs from the CPU's", i)
		}
	}
	return nil
}
