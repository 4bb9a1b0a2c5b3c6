package sim

import (
	"strconv"
	"time"

	"github.com/idlegrid/idlegrid"
)

// checkProbes refuses a probe sent more often than once a second: the
// replay's clock counts whole seconds.
func checkProbes(ps []Probe) error {
	for _, p := range ps {
		if p.Every > 0 && p.Every < time.Second {
			return idlegrid.Invalid("probes.every", "must be at least a second (0: every 6 hours), got %s", p.Every)
		}
	}
	return nil
}

// addProbes adds the estimator's probe jobs: each probe every Every from
// half an interval after the start, with its own tier and cap (from
// on-demand prices when the probe gives none).
func (w *world) addProbes(setIdx, regIdx map[string]uint16) {
	for pi, p := range w.cfg.Probes {
		every := int64(p.Every / time.Second)
		if every <= 0 {
			every = 6 * 3600
		}
		src := int32(len(w.jobIDs))
		id := p.Job.ID
		if id == "" {
			id = "probe-" + strconv.Itoa(pi)
		}
		w.jobIDs = append(w.jobIDs, id)
		base := w.spec(&p.Job, setIdx, regIdx)
		base.src, base.probe = src, true
		k := int32(0)
		for t := w.start + every/2; t < w.end; t += every {
			js := base
			js.submit, js.copy = t, k
			k++
			w.jobs = append(w.jobs, js)
		}
	}
}
