package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the coordinator's own measures, for an operator's Prometheus
// (GET /metrics): how much it places, how long its passes take, and how
// long a request that asks the engine waits for the scheduler.
type metrics struct {
	placements prometheus.Counter
	rebuilds   prometheus.Counter
	passes     prometheus.Histogram
	askWait    prometheus.Histogram
	scans      prometheus.Histogram
	expired    *prometheus.CounterVec // by what (expiry.go)
	redone     *prometheus.CounterVec // by kind and outcome (followup.go)
}

// newMetrics registers the coordinator's metrics on reg.
func newMetrics(reg prometheus.Registerer, s *Server) (*metrics, error) {
	m := &metrics{
		placements: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idlegrid_placements_total", Help: "Jobs placed and stored.",
		}),
		rebuilds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idlegrid_engine_rebuilds_total",
			Help: "Times the engine was rebuilt from the store whole on the scheduler's goroutine, placements waiting meanwhile, because the store refused a placement for what the engine held (a GPU or node that moved on; not a job that did).",
		}),
		passes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "idlegrid_schedule_pass_seconds", Help: "How long a placement pass took, queue read and writes included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10), // 0.5 ms to 131 s
		}),
		askWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "idlegrid_engine_ask_wait_seconds", Help: "How long a request waited for the scheduler to read the engine for it (node lists, explain, market).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 0.1 ms to 26 s
		}),
		scans: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "idlegrid_engine_scan_seconds", Help: "How long the scheduler spent on a read of every node for someone (explain, the market view, a search for free GPUs), which placements waited for.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 0.1 ms to 26 s
		}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idlegrid_expired_total", Help: "Rows freed because they expired: job submissions' idempotency keys past their retention (job_idempotency_key), idle registry logins deleted (registry_login), the inference gateway's kept responses past their retention (kept_response).",
		}, []string{"what"}),
	}
	m.redone = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idlegrid_follow_ups_redone_total",
		Help: "Follow-ups the reaper did again from their rows, because the live path failed or the coordinator stopped after the commit, by kind (lease_ended, challenge_failed, provider_held) and outcome (done; failed, tried again later, each try counted).",
	}, []string{"kind", "outcome"})
	watches := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "idlegrid_job_watches", Help: "Jobs that watches (GET /v1/jobs/{id}/watch) wait on now.",
	}, func() float64 { return float64(s.watches.len()) })
	restands := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "idlegrid_offence_hold_restands_queued", Help: "Upheld disputes whose providers' nodes wait for the restander to take their offence hold (offencehold.go).",
	}, func() float64 { return float64(len(s.restands)) })
	for _, c := range []prometheus.Collector{m.placements, m.rebuilds, m.passes, m.askWait, m.scans, m.expired, m.redone, watches, restands} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// timePass records how long a placement pass took since start.
func (m *metrics) timePass(start time.Time) { m.passes.Observe(time.Since(start).Seconds()) }
