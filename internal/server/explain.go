package server

import (
	"context"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/market"
)

// Explain says why a queued job has not started: what ruled nodes out, the
// asks it would need to beat, and when it may start. The explanation is at
// most explainTTL old. A job that is not queued has no wait to explain:
// ECONFLICT, naming its state. A job the engine would place now but whose
// renter cannot pay for the placement waits for money, and is explained
// so (explain).
func (s *Server) Explain(ctx context.Context, jobID string) (*market.Explanation, error) {
	j, err := s.FindJob(ctx, jobID)
	if err != nil {
		return nil, err
	}
	if j.State != idlegrid.JobQueued {
		return nil, notQueued(j)
	}
	return s.explains.get(ctx, j.ID, s.Now(), func(ctx context.Context) (*market.Explanation, error) { return s.explain(ctx, j) })
}

// engineExplain is the engine's explanation of j, and the escrow hold of
// the placement it would make now, as storePlacement reckons it. When wait
// is set and a pass is placing j right now (its placement waits in the
// batch being stored), it explains nothing and returns what closes once
// the batch is stored (stored; nil otherwise).
func (s *Server) engineExplain(ctx context.Context, j *idlegrid.Job, wait bool) (x *market.Explanation, hold idlegrid.Micros, stored <-chan struct{}, err error) {
	x = &market.Explanation{}
	err = s.askScan(ctx, "explains", func(e *market.Engine) {
		if wait && s.placing[j.ID] {
			stored = s.stored
			return
		}
		now := s.Now()
		*x = e.Explain(j, now)
		if picks := x.Picks(); len(picks) > 0 {
			hold = holdOf(s.placement(e, j, picks, now))
		}
	})
	return x, hold, stored, err
}

// maxExplainWaits is how many batches an explanation waits for, while the
// job's placement is being stored in each, before it answers as it is.
const maxExplainWaits = 3

// afterStored waits until stored is closed, the batch that places job id
// stored, and returns the job as it then stands, or notQueued when it is
// placed or ended. It waits for that batch alone: the rest of a pass of
// thousands of jobs may take seconds more.
func (s *Server) afterStored(ctx context.Context, id string, stored <-chan struct{}) (*idlegrid.Job, error) {
	select {
	case <-stored:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.stopped:
		return nil, errShuttingDown()
	}
	j, err := s.store.FindJob(ctx, id)
	if err != nil {
		return nil, err
	}
	if j.State != idlegrid.JobQueued {
		return nil, notQueued(j)
	}
	return j, nil
}

// notQueued is the ECONFLICT of explaining j, which is not queued: it runs,
// or it ended.
func notQueued(j *idlegrid.Job) error {
	const rest = "; only a queued job has a wait to explain"
	at := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return " " + t.UTC().Format(time.RFC3339)
	}
	why := ""
	if j.Reason != "" {
		why = " (" + j.Reason + ")"
	}
	if j.State.Terminal() {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "job %s is not queued: it ended%s, %s%s%s", j.ID, at(j.EndedAt), j.State, why, rest)
	}
	since := ""
	if j.StartedAt != nil {
		since = " since" + at(j.StartedAt)
	}
	return idlegrid.Errorf(idlegrid.ECONFLICT, "job %s is not queued: it has been %s%s%s%s", j.ID, j.State, since, why, rest)
}

// explain is the engine's explanation of the queued job j. Where the
// engine would place j now, which it decides without weighing money, it
// also checks what the scheduler and the store check before they place
// it: that the renter can pay the placement's escrow hold, and that no
// spend limit would be passed. A job that cannot pay waits for money, and
// the explanation says so.
//
// A job whose placement a pass is storing right now holds its own GPUs in
// the engine (its claim): explained then, it would wait for itself. It is
// explained once that batch is stored, as it then stands.
func (s *Server) explain(ctx context.Context, j *idlegrid.Job) (*market.Explanation, error) {
	x, hold, stored, err := s.engineExplain(ctx, j, true)
	for try := 1; err == nil && stored != nil; try++ {
		if j, err = s.afterStored(ctx, j.ID, stored); err != nil {
			return nil, err
		}
		x, hold, stored, err = s.engineExplain(ctx, j, try < maxExplainWaits)
	}
	if err != nil || len(x.Picks()) == 0 {
		return x, err
	}
	shorts, err := s.moneyShort(ctx, j, hold)
	if err != nil {
		return nil, err
	}
	if len(shorts) > 0 {
		waitForMoney(x, hold, shorts)
	}
	return x, nil
}
