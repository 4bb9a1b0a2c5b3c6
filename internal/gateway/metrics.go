package gateway

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
)

// metrics are the gateway's measures for an operator's Prometheus (the
// server's GET /metrics): per model, what it served, how fast and for how
// much; providers that failed and breakers that tripped; requests running
// and waiting; and the meter's writes. The HTTP layer counts the routes'
// requests by status.
type metrics struct {
	latency, ttft *prometheus.HistogramVec // by model
	tokens        *prometheus.CounterVec   // by model, kind (input, output)
	charged       *prometheus.CounterVec   // by model
	usageCapped   *prometheus.CounterVec   // by model, kind (input, output)
	chargesCapped *prometheus.CounterVec   // by reason (capBalance, capSpendLimit)
	failures      *prometheus.CounterVec   // by reason (busy, not_served, request, large_prompt, large_answer, failed)
	meterWrites   prometheus.Histogram
	chargesLost   prometheus.Counter
	notKept       prometheus.Counter
	orphans       prometheus.Counter     // background responses recorded failed for want of their run
	runsLost      prometheus.Counter     // background runs stopped by another server's write
	convRefusals  *prometheus.CounterVec // by reason (locked, quota)

	mu      sync.Mutex
	byModel map[string]*modelMetrics
}

// modelMetrics are one model's series, looked up once per request.
type modelMetrics struct {
	latency, ttft prometheus.Observer
	input, output prometheus.Counter
	chargedMicros prometheus.Counter
}

// latencyBuckets run from 1 ms to about 4.4 minutes.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 4, 10)

func newMetrics() *metrics {
	return &metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "idlegrid_inference_latency_seconds", Help: "Answered inference requests, by model: from the request in to the answer's last byte out.",
			Buckets: latencyBuckets,
		}, []string{"model"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "idlegrid_inference_ttft_seconds", Help: "Answered streamed inference requests, by model: from the request in to the stream's first byte out.",
			Buckets: latencyBuckets,
		}, []string{"model"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idlegrid_inference_tokens_total", Help: "Tokens metered, by model and kind (input, output).",
		}, []string{"model", "kind"}),
		charged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idlegrid_inference_charged_micros_total", Help: "What renters were charged for inference, by model, in micro-dollars.",
		}, []string{"model"}),
		usageCapped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idlegrid_inference_usage_capped_total", Help: "Answers whose model server reported more tokens than the request or the answer relayed could have used, by model and kind (input, output); the renter was charged the most they could have used, and each is logged with its request and node.",
		}, []string{"model", "kind"}),
		chargesCapped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idlegrid_inference_charges_capped_total", Help: "Charges cut to what the renter had left, by reason: balance (the renter's available balance when the charge was written) or spend_limit (what the account's or the key's monthly spend limit left the request); each is logged with its request.",
		}, []string{"reason"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idlegrid_inference_provider_failures_total", Help: "Attempts a provider failed before the renter had a byte, by reason: busy (it answered 429), not_served (it answered 404 to /v1/completions, which a model server need not serve; not held against it), request (it answered 500, or no first byte in time, to a request no provider answered, which may be the request's fault: not held against it, unless it is the model's only provider), large_prompt (no first byte in time for a prompt over LargePromptTokens, not held against the provider), large_answer (no whole answer in time for one asked to be long: max_tokens of at least LargeAnswerTokens; not held against it either) or failed; the next provider was tried.",
		}, []string{"reason"}),
		meterWrites: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "idlegrid_inference_meter_write_seconds", Help: "How long the meter took to write a batch of charges to the ledger.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 0.1 ms to 26 s
		}),
		chargesLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idlegrid_inference_charges_failed_total", Help: "Charges the store refused, or could not take by the time the gateway closed (each is logged with its request); the renter was not charged, unless the meter journal kept the charge for the next start.",
		}),
		notKept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idlegrid_inference_responses_not_kept_total", Help: "Responses of the Responses API asked to be kept that the store could not keep, whose state as they ran in the background it could not record, or whose items it could not add to their conversation (each is logged with its request): the renter cannot continue or read back what the store lacks.",
		}),
		orphans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idlegrid_inference_background_orphans_total", Help: "Background responses found still queued or in progress after their run's hold ran out (the server running them stopped, or could not renew it), and recorded failed.",
		}),
		runsLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "idlegrid_inference_background_runs_lost_total", Help: "Background runs of this server that stopped, keeping nothing more, because their response was changed (cancelled through another server, or recorded failed by one that found their hold run out) or deleted meanwhile.",
		}),
		convRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idlegrid_inference_conversation_refusals_total", Help: "Requests refused for their conversation, by reason: locked (another response ran in it, past the wait) or quota (the renter's conversations held all they may).",
		}, []string{"reason"}),
		byModel: map[string]*modelMetrics{},
	}
}

// of returns model's series.
func (m *metrics) of(model string) *modelMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	mm, ok := m.byModel[model]
	if !ok {
		mm = &modelMetrics{
			latency: m.latency.WithLabelValues(model), ttft: m.ttft.WithLabelValues(model),
			input: m.tokens.WithLabelValues(model, "input"), output: m.tokens.WithLabelValues(model, "output"),
			chargedMicros: m.charged.WithLabelValues(model),
		}
		m.byModel[model] = mm
	}
	return mm
}

// served records one answered request; its time to first byte only when
// it streamed, since a whole answer's first byte comes with its last.
func (m *metrics) served(model string, latency, ttft time.Duration, streamed bool, in, out int64, charge idlegrid.Micros) {
	mm := m.of(model)
	mm.latency.Observe(latency.Seconds())
	if streamed {
		mm.ttft.Observe(ttft.Seconds())
	}
	mm.input.Add(float64(in))
	mm.output.Add(float64(out))
	mm.chargedMicros.Add(float64(charge))
}

// capped records an answer whose usage was capped: its input, its output
// or both.
func (m *metrics) capped(model string, in, out bool) {
	if in {
		m.usageCapped.WithLabelValues(model, "input").Inc()
	}
	if out {
		m.usageCapped.WithLabelValues(model, "output").Inc()
	}
}

// Why a charge was capped, the reason label of chargesCapped.
const (
	capBalance    = "balance"
	capSpendLimit = "spend_limit"
)

// chargeCapped counts a charge cut to what the renter had left, for
// reason.
func (m *metrics) chargeCapped(reason string) { m.chargesCapped.WithLabelValues(reason).Inc() }

// register adds the gateway's metrics to reg, with gauges and counters
// read from g when scraped.
func (m *metrics) register(reg prometheus.Registerer, g *Gateway) error {
	cs := []prometheus.Collector{m.latency, m.ttft, m.tokens, m.charged, m.usageCapped, m.chargesCapped, m.failures, m.meterWrites, m.chargesLost, m.notKept,
		m.orphans, m.runsLost, m.convRefusals,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "idlegrid_inference_background_running", Help: "Background responses this server runs now (queued for a provider or in progress).",
		}, func() float64 { return float64(g.background.n()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "idlegrid_inference_background_stream_logs", Help: "Streamed background responses whose events this server holds to be resumed: running, or ended within 5 minutes.",
		}, func() float64 { n, _ := g.streams.held(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "idlegrid_inference_background_stream_log_bytes", Help: "The bytes of the events of idlegrid_inference_background_stream_logs.",
		}, func() float64 { _, b := g.streams.held(); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "idlegrid_inference_in_flight", Help: "Inference requests running now.",
		}, func() float64 { return float64(g.active.N()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "idlegrid_inference_waiting", Help: "Inference requests waiting now for a provider with room (every one they may use is at its max_concurrency).",
		}, func() float64 { return float64(g.waiting.waiters.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "idlegrid_inference_charges_retrying", Help: "Charges the store could not take (it could not be reached, say), waiting to be written again; their reservations hold meanwhile.",
		}, func() float64 { return float64(g.meter.retries.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "idlegrid_inference_breaker_trips_total", Help: "Times a provider's circuit breaker opened after it kept failing.",
		}, func() float64 { trips, _ := g.health.totals(); return float64(trips) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "idlegrid_inference_breakers_open", Help: "Providers' circuit breakers open now (their model on their node gets no requests until a trial).",
		}, func() float64 { _, open := g.health.totals(); return float64(open) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
