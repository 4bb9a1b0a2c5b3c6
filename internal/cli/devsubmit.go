package cli

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// submitter is the demo renter: it submits a stream of jobs, and gives up
// on (cancels) jobs of its own that have waited too long for a first
// placement, as renters do.
type submitter struct {
	renter        *client.Client
	jobsPerMinute float64
	giveUpAfter   time.Duration
	rand          *rand.Rand
	report        func(msg string) // tells the summary what happened
	n             int              // jobs submitted so far
	// mine are the jobs it submitted: the only ones it gives up on. The
	// banner hands its key to whoever runs the demo, so the account's other
	// jobs are a person's, theirs to cancel.
	mine map[string]bool
	// image, when set, replaces every job's image and command: the demo
	// workload, run for the job's duration divided by speed.
	image string
	speed float64
}

// initialBurst is how many jobs the renter submits at once when the demo
// starts, so that something happens right away.
const initialBurst = 6

// run submits jobs until ctx is done.
func (s *submitter) run(ctx context.Context) {
	for i := 0; i < initialBurst && ctx.Err() == nil; i++ {
		s.submitOne(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.nextGap()):
		}
		s.submitOne(ctx)
		s.giveUp(ctx)
	}
}

// nextGap is the wait before the next submission: exponential around the
// mean rate, like independent renters arriving, bounded to keep it lively.
func (s *submitter) nextGap() time.Duration {
	mean := time.Duration(float64(time.Minute) / s.jobsPerMinute)
	gap := time.Duration(s.rand.ExpFloat64() * float64(mean))
	return min(max(gap, mean/10), 4*mean)
}

// pick chooses the next job: one in ten cannot be placed anywhere, and the
// second job of the initial burst is one of those, to show a queued reason.
func (s *submitter) pick() devJob {
	var possible, impossible []devJob
	for _, j := range devJobs {
		if j.impossible {
			impossible = append(impossible, j)
		} else {
			possible = append(possible, j)
		}
	}
	if s.n == 1 || (s.n > initialBurst && s.rand.IntN(10) == 0) {
		return impossible[s.rand.IntN(len(impossible))]
	}
	return possible[s.rand.IntN(len(possible))]
}

func (s *submitter) submitOne(ctx context.Context) {
	j := s.pick()
	s.n++
	secs := j.minSeconds
	if j.maxSeconds > j.minSeconds {
		secs += s.rand.Int64N(j.maxSeconds - j.minSeconds + 1)
	}
	spec := idlegrid.JobSpec{
		Name: fmt.Sprintf("%s-%03d", j.name, s.n), Kind: j.kind, Image: j.image, Command: j.command,
		Env:  map[string]string{"RUN_ID": fmt.Sprint(s.n)},
		GPUs: j.gpus, Nodes: 1, GPUModels: j.models, Tier: j.tier, MaxPriceMicrosPerGPUHour: j.maxPrice,
		Region: j.region, Residency: j.residency, DurationSeconds: secs, CheckpointEverySeconds: j.checkpointEvery,
	}
	if j.pullSeconds > 0 && s.image == "" { // the fake runtime's simulated pull
		spec.Env["FAKE_PULL_SECONDS"], spec.Env["FAKE_IMAGE_MB"] = fmt.Sprint(j.pullSeconds), fmt.Sprint(j.imageMB)
	}
	if s.image != "" {
		spec.Image, spec.Command = s.image, nil
		spec.Env["DEMO_STEPS"] = fmt.Sprint(secs)
		spec.Env["DEMO_STEP_MS"] = fmt.Sprint(max(1, int(1000/max(s.speed, 1e-3))))
		spec.CheckpointEverySeconds = 1 // the demo workload checkpoints after every step, a second of its run
	}
	job, err := s.renter.SubmitJob(ctx, spec)
	if err != nil {
		if ctx.Err() == nil {
			s.report(fmt.Sprintf("renter could not submit %s: %s", spec.Name, errorText(err)))
		}
		return
	}
	if s.mine == nil {
		s.mine = map[string]bool{}
	}
	s.mine[job.ID] = true
	s.report(fmt.Sprintf("%s submitted: %s, %dx GPU for %s, cap %s", jobLabel(job), job.Tier, job.GPUs,
		seconds(job.DurationSeconds), perGPUHour(job.MaxPriceMicrosPerGPUHour)))
}

// giveUp cancels the jobs it submitted that have been queued for too long
// without ever being placed. A job that ran and is queued again (a
// preempted bronze job, requeued with its checkpoint) is not given up on:
// it waits to resume.
func (s *submitter) giveUp(ctx context.Context) {
	jobs, err := s.renter.ListJobs(ctx, idlegrid.JobFilter{States: []idlegrid.JobState{idlegrid.JobQueued}, Limit: 100})
	if err != nil {
		return
	}
	for _, j := range jobs {
		if s.mine[j.ID] && j.StartedAt == nil && time.Since(j.CreatedAt) > s.giveUpAfter {
			s.renter.CancelJob(ctx, j.ID) // the summary reports the cancellation
		}
	}
}

// jobLabel names a job in events: "job_x (llama3-8b-finetune-001)".
func jobLabel(j *idlegrid.Job) string {
	if j.Name == "" {
		return j.ID
	}
	return j.ID + " (" + j.Name + ")"
}
