package agent

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/idlegrid/idlegrid"
)

// A model server's queue (docs/gateway.md). The gateway counts the
// requests it has in flight at each provider, but not those the model
// server takes from elsewhere (the owner's own use of it, or another
// gateway), nor the ones it holds back in its own queue. So the agent
// reads the server's queue depth from its Prometheus metrics every
// model_load_interval, and tells the gateway on every answer it passes on
// (idlegrid.ModelQueueHeader), which ranks a queued provider as loaded.

// DefaultModelLoadInterval is how often each model server's metrics are
// read when model_load_interval is not set.
const DefaultModelLoadInterval = 2 * time.Second

// MetricsOff, as a model's metrics_url, reads no metrics: the model's
// queue depth stays unknown to the gateway.
const MetricsOff = "off"

// queueGauges are the gauges that count the requests a model server holds
// waiting, by server.
var queueGauges = []string{
	"vllm:num_requests_waiting",  // vLLM
	"sglang:num_queue_reqs",      // SGLang
	"tgi_queue_size",             // TGI
	"llamacpp:requests_deferred", // llama.cpp's server, run with --metrics
}

// maxMetricsPage bounds the metrics page the agent reads; vLLM's, with its
// histograms, is some tens of KiB.
const maxMetricsPage = 4 << 20

// metricsURL is where m's server serves its metrics: metrics_url, or
// /metrics at the upstream's host, where vLLM, SGLang, TGI and llama.cpp's
// server all serve them; "" for none.
func (m *ModelConfig) metricsURL() string {
	switch m.MetricsURL {
	case MetricsOff:
		return ""
	case "":
		u, err := url.Parse(m.Upstream)
		if err != nil {
			return ""
		}
		return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/metrics"}).String()
	}
	return m.MetricsURL
}

// keyFor is the API key to send with a request to u: m's own, but only to
// its upstream's host, so that it never goes elsewhere.
func (m *ModelConfig) keyFor(u string) string {
	up, err1 := url.Parse(m.Upstream)
	to, err2 := url.Parse(u)
	if m.APIKey == "" || err1 != nil || err2 != nil || up.Scheme != to.Scheme || up.Host != to.Host {
		return ""
	}
	return m.APIKey
}

// validateMetricsURL checks a model's metrics_url, naming field.
func (m *ModelConfig) validateMetricsURL(field string) error {
	if m.MetricsURL == "" || m.MetricsURL == MetricsOff {
		return nil
	}
	u, err := url.Parse(m.MetricsURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return idlegrid.Invalid(field+".metrics_url", "want the model server's Prometheus metrics URL, e.g. http://127.0.0.1:8000/metrics, or %q; got %q", MetricsOff, m.MetricsURL)
	}
	return nil
}

// queueDepth is what the agent knows of one model's queue at its server.
type queueDepth struct {
	n atomic.Int64 // requests waiting; -1: unknown
}

func newQueueDepth() *queueDepth {
	q := &queueDepth{}
	q.n.Store(-1)
	return q
}

// header is the value of ModelQueueHeader, or "" when unknown.
func (q *queueDepth) header() string {
	if n := q.n.Load(); n >= 0 {
		return strconv.FormatInt(n, 10)
	}
	return ""
}

// queues lists the healthy models whose queues the agent knows, for its
// heartbeat, in config order.
func (ms *models) queues() []idlegrid.ModelQueue {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var out []idlegrid.ModelQueue
	for _, name := range ms.names {
		if n := ms.byName[name].queue.n.Load(); n >= 0 && ms.healthy[name] {
			out = append(out, idlegrid.ModelQueue{Model: name, Queued: n})
		}
	}
	return out
}

// metricsPage is one model server's metrics page and the models read
// from it.
type metricsPage struct {
	url    string
	apiKey string // sent as a bearer token: the first model's api_key, when the page is on its upstream's host
	models []*servedModel
	failed string // why the last read failed; "" when it did not
}

// loadPages groups the models by metrics page, so that models served by
// one server cost one read.
func loadPages(ms []*servedModel) []*metricsPage {
	byURL := map[string]*metricsPage{}
	var pages []*metricsPage
	for _, m := range ms {
		u := m.cfg.metricsURL()
		if u == "" {
			continue
		}
		if byURL[u] == nil {
			byURL[u] = &metricsPage{url: u, apiKey: m.cfg.keyFor(u)}
			pages = append(pages, byURL[u])
		}
		byURL[u].models = append(byURL[u].models, m)
	}
	return pages
}

// loadLoop reads every metrics page each interval until ctx is done.
func (ms *models) loadLoop(ctx context.Context, log func(msg string, args ...any)) {
	if len(ms.pages) == 0 {
		return
	}
	t := time.NewTicker(ms.loadEvery)
	defer t.Stop()
	for {
		ms.readPages(ctx, log)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readPages reads every metrics page at once.
func (ms *models) readPages(ctx context.Context, log func(msg string, args ...any)) {
	var wg sync.WaitGroup
	for _, p := range ms.pages {
		wg.Go(func() { ms.readPage(ctx, p, log) })
	}
	wg.Wait()
}

// readPage reads one metrics page and sets its models' queue depths; when
// the page cannot be read they become unknown. A change of whether it can
// be read is logged.
func (ms *models) readPage(ctx context.Context, p *metricsPage, log func(msg string, args ...any)) {
	families, err := ms.fetchMetrics(ctx, p)
	if ctx.Err() != nil {
		return
	}
	failed := ""
	if err != nil {
		failed = err.Error()
	}
	for _, m := range p.models {
		n := int64(-1)
		if err == nil {
			n, _ = queuedFor(families, m.cfg.UpstreamModel)
		}
		m.queue.n.Store(n)
	}
	if failed != p.failed {
		if failed != "" {
			log("model server metrics unreadable; its queue depth is unknown to the gateway", "url", p.url, "reason", failed)
		} else {
			log("model server metrics readable again", "url", p.url)
		}
		p.failed = failed
	}
}

// fetchMetrics reads and parses a Prometheus text metrics page.
func (ms *models) fetchMetrics(ctx context.Context, p *metricsPage) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, modelCheckTimeout)
	defer cancel()
	u := p.url
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if p.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+p.apiKey)
	}
	resp, err := ms.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s answered %s", u, resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, maxMetricsPage))
	if err != nil {
		return nil, fmt.Errorf("GET %s: not Prometheus text metrics: %w", u, err)
	}
	return families, nil
}

// queuedFor is how many requests for model wait at the server, by the
// first of queueGauges the page has (which it returns): the sum of its
// series whose model_name label, where they have one, names the model. It
// is -1 when the page has none of them.
func queuedFor(families map[string]*dto.MetricFamily, upstreamModel string) (int64, string) {
	for _, name := range queueGauges {
		f := families[name]
		if f == nil {
			continue
		}
		var sum float64
		for _, s := range f.GetMetric() {
			if !namesModel(s, upstreamModel) {
				continue
			}
			switch {
			case s.GetGauge() != nil:
				sum += s.GetGauge().GetValue()
			case s.GetUntyped() != nil:
				sum += s.GetUntyped().GetValue()
			}
		}
		if math.IsNaN(sum) || sum < 0 {
			return -1, name
		}
		return int64(math.Round(sum)), name
	}
	return -1, ""
}

// namesModel reports whether a series is the model's: it has no
// model_name label, or that label names the model.
func namesModel(s *dto.Metric, upstreamModel string) bool {
	for _, l := range s.GetLabel() {
		if l.GetName() == "model_name" {
			return l.GetValue() == upstreamModel
		}
	}
	return true
}

// ModelCheck is what one check of a configured model found, for
// 'idlegrid agent --check'.
type ModelCheck struct {
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	// Problem says why the server is not healthy, as the running agent
	// would find it; "" when it is, and the model would be offered.
	Problem string `json:"problem,omitempty"`
	// MetricsURL is the page read for the queue depth; "" when
	// metrics_url is off. Queued is the depth it gave (-1: none), from
	// the gauge Gauge; MetricsProblem says why there is none.
	MetricsURL     string `json:"metrics_url,omitempty"`
	Queued         int64  `json:"queued"`
	Gauge          string `json:"gauge,omitempty"`
	MetricsProblem string `json:"metrics_problem,omitempty"`
}

// CheckModels checks each configured model's server once, as the running
// agent does, and reads its queue depth, in config order.
func (c *Config) CheckModels(ctx context.Context) []ModelCheck {
	ms := newModels(c)
	defer ms.client.CloseIdleConnections()
	out := make([]ModelCheck, 0, len(ms.names))
	for _, name := range ms.names {
		m := ms.byName[name]
		mc := ModelCheck{Name: name, Upstream: m.cfg.Upstream, Problem: ms.check(ctx, m), MetricsURL: m.cfg.metricsURL(), Queued: -1}
		if mc.MetricsURL != "" {
			families, err := ms.fetchMetrics(ctx, &metricsPage{url: mc.MetricsURL, apiKey: m.cfg.keyFor(mc.MetricsURL)})
			if err != nil {
				mc.MetricsProblem = err.Error()
			} else if mc.Queued, mc.Gauge = queuedFor(families, m.cfg.UpstreamModel); mc.Gauge == "" {
				mc.MetricsProblem = "the page has none of the queue gauges idlegrid reads (" + strings.Join(queueGauges, ", ") + ")"
			}
		}
		out = append(out, mc)
	}
	return out
}
