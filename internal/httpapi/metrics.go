package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// httpMetrics count the API's requests by route and status, and time
// them by route: the pattern, not the path, so IDs do not multiply them.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idlegrid_http_requests_total", Help: "API requests answered, by route and status.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "idlegrid_http_request_duration_seconds", Help: "How long the API took to answer, by route (long polls wait by design).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 0.1 ms to 26 s
		}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// observe records one answer; a handler that wrote nothing answered 200.
func (m *httpMetrics) observe(route string, status int, took time.Duration) {
	if status == 0 {
		status = http.StatusOK
	}
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(took.Seconds())
}

// GET /metrics is the server's metrics in Prometheus's text format: the
// API's requests, the coordinator's placements, passes and the engine's
// asks, the Go runtime's. Admins only (a scraper sends an admin's key as a
// bearer token).
func (a *api) metrics(w http.ResponseWriter, r *http.Request) error {
	if err := a.srv.RequireAdmin(r.Context()); err != nil {
		return err
	}
	promhttp.HandlerFor(a.opts.Metrics, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	return nil
}
