package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// devWorkload is the demo workload that 'idlegrid dev --runtime docker'
// runs in containers, as 'idlegrid dev workload' in an image of the
// idlegrid binary (see selfImage). It pretends to train: it prints a step
// line and a progress report ("idlegrid:progress=0.42", which the docker
// runtime turns into the lease's progress) per step, checkpoints its step
// to $IDLEGRID_CHECKPOINT_DIR after each and says so ("idlegrid:checkpoint"),
// resumes from a checkpoint it finds there, and when stopped (SIGTERM)
// saves its checkpoint and exits.
//
// Its env steers it:
//
//	DEMO_STEPS=30      steps in all (a resumed run does the rest)
//	DEMO_STEP_MS=1000  milliseconds per step
//	DEMO_FAIL_AT=0.5   fail half way, as a crashing trainer does
type devWorkload struct {
	out, errOut io.Writer
	getenv      func(string) string
	noCkpt      bool // a checkpoint failed: the run goes on without
}

var devWorkloadHelp = help{
	usage: "idlegrid dev workload",
	about: `The demo workload that 'idlegrid dev --runtime docker' runs in its
containers. It pretends to train: each step it prints a line and a progress
report, and saves a checkpoint to $IDLEGRID_CHECKPOINT_DIR (default
/checkpoint), from which a later run resumes; on SIGTERM it saves and exits.
Its environment steers it: DEMO_STEPS (default 30), DEMO_STEP_MS (default
1000) and DEMO_FAIL_AT (a fraction of the steps, to fail part way). It
takes no flags, and ignores its arguments.`,
	examples: "DEMO_STEPS=5 DEMO_STEP_MS=200 IDLEGRID_CHECKPOINT_DIR=/tmp/ckpt idlegrid dev workload",
}

// Defaults of the demo workload.
const (
	devWorkloadSteps  = 30
	devWorkloadStepMS = 1000
	devWorkloadCkpt   = "/checkpoint"
)

var errDemoStopped = errors.New("demo workload stopped; its checkpoint is saved")

func (w *devWorkload) run(ctx context.Context) error {
	steps, err := w.envInt("DEMO_STEPS", devWorkloadSteps, 1, 1_000_000)
	if err != nil {
		return err
	}
	stepMS, err := w.envInt("DEMO_STEP_MS", devWorkloadStepMS, 1, 3_600_000)
	if err != nil {
		return err
	}
	failAt := math.Inf(1)
	if v := w.getenv("DEMO_FAIL_AT"); v != "" {
		if failAt, err = strconv.ParseFloat(v, 64); err != nil || failAt <= 0 || failAt > 1 {
			return fmt.Errorf("DEMO_FAIL_AT must be a fraction in (0, 1], got %q", v)
		}
	}
	dir := cmpOr(w.getenv("IDLEGRID_CHECKPOINT_DIR"), devWorkloadCkpt)
	fmt.Fprintf(w.out, "demo workload: job %s, lease %s, GPUs %s: %d steps of %d ms\n",
		cmpOr(w.getenv("IDLEGRID_JOB_ID"), "-"), cmpOr(w.getenv("IDLEGRID_LEASE_ID"), "-"), cmpOr(w.getenv("IDLEGRID_GPUS"), "none"), steps, stepMS)
	step := w.loadStep(dir)
	if step > 0 {
		fmt.Fprintf(w.out, "resuming from step %d, checkpointed in %s\n", step, dir)
	}
	tick := time.NewTicker(time.Duration(stepMS) * time.Millisecond)
	defer tick.Stop()
	for step < steps {
		select {
		case <-ctx.Done():
			fmt.Fprintf(w.errOut, "received SIGTERM at step %d, checkpointing\n", step)
			w.saveStep(dir, step)
			if w.noCkpt {
				return errors.New("demo workload stopped without a checkpoint")
			}
			fmt.Fprintf(w.out, "checkpoint saved: step %d\n", step)
			return errDemoStopped
		case <-tick.C:
		}
		step++
		frac := float64(step) / float64(steps)
		if frac >= failAt {
			return fmt.Errorf("RuntimeError: CUDA error: an illegal memory access was encountered (step %d, DEMO_FAIL_AT)", step)
		}
		w.saveStep(dir, step)
		if !w.noCkpt {
			fmt.Fprintln(w.out, "idlegrid:checkpoint") // the runtime tells the market: a preemption now loses no work
		}
		fmt.Fprintf(w.out, "step %d/%d loss=%.4f\n", step, steps, 2.5*math.Exp(-3*frac)+0.1)
		fmt.Fprintf(w.out, "idlegrid:progress=%.4f\n", frac)
	}
	fmt.Fprintf(w.out, "training complete: %d steps\n", steps)
	return nil
}

func (w *devWorkload) envInt(key string, def, lo, hi int) (int, error) {
	v := w.getenv(key)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s must be a whole number from %d to %d, got %q", key, lo, hi, v)
	}
	return n, nil
}

func (w *devWorkload) loadStep(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "step"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	} else if err != nil {
		fmt.Fprintf(w.errOut, "cannot read the checkpoint: %v\n", err)
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// saveStep writes the checkpoint atomically: a kill mid-write leaves the
// previous one. A checkpoint that cannot be written is noted once, not
// fatal.
func (w *devWorkload) saveStep(dir string, step int) {
	if w.noCkpt {
		return
	}
	tmp := filepath.Join(dir, "step.tmp")
	err := os.WriteFile(tmp, []byte(strconv.Itoa(step)+"\n"), 0o644)
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, "step"))
	}
	if err != nil {
		fmt.Fprintf(w.errOut, "cannot checkpoint, going on without: %v\n", err)
		w.noCkpt = true
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
