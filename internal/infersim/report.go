package infersim

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Report is what a replay measured. Times are in milliseconds of wall
// clock; money is in micros, read from the ledger.
type Report struct {
	Requests       int     `json:"requests"`
	Streamed       int     `json:"streamed"`
	TraceSeconds   float64 `json:"trace_seconds"` // the span of the trace replayed, before Speedup
	Speedup        float64 `json:"speedup"`
	ServiceSpeedup float64 `json:"service_speedup"`
	Seed           uint64  `json:"seed"`
	WallSeconds    float64 `json:"wall_seconds"`
	OfferedRPS     float64 `json:"offered_rps"` // Requests / (TraceSeconds / Speedup)

	Served int            `json:"served"` // complete answers, with usage
	Errors map[string]int `json:"errors"` // requests not served in full (broken streams included), by status and error type

	// Latency is of every served request, sent to last byte; TTFT of the
	// streamed ones, sent to first event (a whole answer's first byte is
	// its last).
	Latency Percentiles `json:"latency_ms"`
	TTFT    Percentiles `json:"ttft_ms"`
	// Added is each served request's latency less what its provider's
	// model server took by the speed model: the gateway, the agent, the
	// session, and the failed attempts before it.
	Added Percentiles `json:"added_ms"`

	// Failovers are served requests that took more than one provider;
	// ExtraAttempts the providers tried beyond the first, over those.
	Failovers     int `json:"failovers"`
	ExtraAttempts int `json:"extra_attempts"`
	// BrokenStreams broke off after their first byte, when failover is no
	// longer possible.
	BrokenStreams int `json:"broken_streams"`
	// BreakerTrips is how often the gateway opened the providers' circuit
	// breakers, by its own count (gateway.Gateway.Breakers), over all
	// providers and models; ProviderReport.BreakerTrips is each provider's.
	BreakerTrips int64 `json:"breaker_trips"`

	Services  []ServiceReport  `json:"services"`
	Providers []ProviderReport `json:"providers"`

	// Money, from the ledger: what the renters were charged, what the
	// providers earned, and the platform's fee, the difference.
	ChargedMicros    idlegrid.Micros `json:"charged_micros"`
	EarnedMicros     idlegrid.Micros `json:"earned_micros"`
	FeeMicros        idlegrid.Micros `json:"fee_micros"`
	MicrosPerMTokens idlegrid.Micros `json:"micros_per_mtokens"` // charged per million metered tokens, prompt and completion
	// UsageChargedMicros is the sum of the gateway's usage records'
	// charges, which must equal ChargedMicros.
	UsageChargedMicros idlegrid.Micros `json:"usage_charged_micros"`
	UsageFeeMicros     idlegrid.Micros `json:"usage_fee_micros"` // the records' fees, which must equal FeeMicros
	MeteredInput       int64           `json:"metered_input_tokens"`
	MeteredOutput      int64           `json:"metered_output_tokens"`
}

// Percentiles are nearest-rank percentiles in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// ServiceReport is one trace file's requests and its renter's bill.
type ServiceReport struct {
	Service          string          `json:"service"`
	Model            string          `json:"model"`
	Requests         int             `json:"requests"`
	Served           int             `json:"served"`
	Latency          Percentiles     `json:"latency_ms"`
	TTFT             Percentiles     `json:"ttft_ms"`
	InputTokens      int64           `json:"input_tokens"` // metered, from the usage records
	OutputTokens     int64           `json:"output_tokens"`
	ChargedMicros    idlegrid.Micros `json:"charged_micros"` // the renter's spend, from the ledger
	MicrosPerMTokens idlegrid.Micros `json:"micros_per_mtokens"`
}

// ProviderReport is one simulated provider: its speed, what it was
// asked, what it failed on purpose, and what it earned.
type ProviderReport struct {
	Name                   string          `json:"name"`
	GPU                    string          `json:"gpu"`
	Region                 string          `json:"region"`
	InputPrice             string          `json:"input_price"`
	OutputPrice            string          `json:"output_price"`
	PrefillTokensPerSecond float64         `json:"prefill_tokens_per_second"`
	DecodeTokensPerSecond  float64         `json:"decode_tokens_per_second"`
	Calls                  int             `json:"calls"`  // requests that reached its model server
	Served                 int             `json:"served"` // answered in full
	Faults                 map[string]int  `json:"faults"` // drawn, by kind
	BreakerTrips           int64           `json:"breaker_trips"`
	InputTokens            int64           `json:"input_tokens"`
	OutputTokens           int64           `json:"output_tokens"`
	EarnedMicros           idlegrid.Micros `json:"earned_micros"` // pending and payable, from the ledger
}

func (m *market) report(ctx context.Context, results []result, wall time.Duration) (*Report, error) {
	reqs := m.cfg.Requests
	rep := &Report{Requests: len(reqs), Speedup: m.cfg.Speedup, ServiceSpeedup: m.cfg.ServiceSpeedup, Seed: m.cfg.Seed,
		WallSeconds: wall.Seconds(), Errors: map[string]int{}}
	rep.TraceSeconds = reqs[len(reqs)-1].Offset.Seconds()
	if rep.TraceSeconds > 0 {
		rep.OfferedRPS = float64(len(reqs)) / (rep.TraceSeconds / m.cfg.Speedup)
	}
	attempts, err := m.attempts(ctx)
	if err != nil {
		return nil, err
	}
	var lat, ttft, added []float64
	for _, r := range results {
		if r.stream {
			rep.Streamed++
		}
		if a := attempts[r.requestID]; a > 1 {
			rep.Failovers++
			rep.ExtraAttempts += a - 1
		}
		switch {
		case r.complete:
			rep.Served++
			lat = append(lat, ms(r.latency))
			if r.stream {
				ttft = append(ttft, ms(r.ttft))
			}
			if p := m.byNode[r.nodeID]; p != nil {
				t1, t2 := p.gpu.Timing(int(r.inTokens), int(r.outTokens))
				added = append(added, ms(r.latency-p.scaled(t1+t2)))
			}
		case r.status == http.StatusOK:
			rep.BrokenStreams++
			rep.Errors[fmt.Sprintf("200 %s", r.errType)]++
		default:
			rep.Errors[fmt.Sprintf("%d %s", r.status, r.errType)]++
		}
	}
	rep.Latency, rep.TTFT, rep.Added = percentiles(lat), percentiles(ttft), percentiles(added)
	if err := m.money(ctx, rep, results); err != nil {
		return nil, err
	}
	return rep, nil
}

// attempts reads every usage record's providers tried, by request ID.
func (m *market) attempts(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	for _, r := range m.renters {
		us, err := m.store.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: r.id, Limit: len(m.cfg.Requests) + 1})
		if err != nil {
			return nil, err
		}
		for _, u := range us {
			out[u.ID] = u.Attempts
		}
	}
	return out, nil
}

// money reads the renters' spend and the providers' earnings from the
// ledger, and the metered tokens from the usage records.
func (m *market) money(ctx context.Context, rep *Report, results []result) error {
	bySvc := map[string][]float64{}
	ttftBySvc := map[string][]float64{}
	counts := map[string][2]int{}
	for _, r := range results {
		c := counts[r.req.Service]
		c[0]++
		if r.complete {
			c[1]++
			bySvc[r.req.Service] = append(bySvc[r.req.Service], ms(r.latency))
			if r.stream {
				ttftBySvc[r.req.Service] = append(ttftBySvc[r.req.Service], ms(r.ttft))
			}
		}
		counts[r.req.Service] = c
	}
	services := make([]string, 0, len(m.renters))
	for svc := range m.renters {
		services = append(services, svc)
	}
	sort.Strings(services)
	for _, svc := range services {
		r := m.renters[svc]
		bal, err := m.admin.Balance(ctx, r.id)
		if err != nil {
			return err
		}
		us, err := m.store.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: r.id, Limit: len(m.cfg.Requests) + 1})
		if err != nil {
			return err
		}
		sr := ServiceReport{Service: svc, Model: ModelFor(svc), Requests: counts[svc][0], Served: counts[svc][1],
			Latency: percentiles(bySvc[svc]), TTFT: percentiles(ttftBySvc[svc]), ChargedMicros: topUp - bal.Available - bal.Held}
		for _, u := range us {
			sr.InputTokens += u.InputTokens
			sr.OutputTokens += u.OutputTokens
			rep.UsageChargedMicros += u.ChargeMicros
			rep.UsageFeeMicros += u.FeeMicros
		}
		sr.MicrosPerMTokens = idlegrid.PerMTokens(sr.ChargedMicros, sr.InputTokens+sr.OutputTokens)
		rep.Services = append(rep.Services, sr)
		rep.ChargedMicros += sr.ChargedMicros
		rep.MeteredInput += sr.InputTokens
		rep.MeteredOutput += sr.OutputTokens
	}
	rep.MicrosPerMTokens = idlegrid.PerMTokens(rep.ChargedMicros, rep.MeteredInput+rep.MeteredOutput)
	trips := m.breakerTrips()
	for _, p := range m.providers {
		pr := p.report()
		pr.BreakerTrips = trips[p]
		bal, err := m.admin.Balance(ctx, m.accounts[p])
		if err != nil {
			return err
		}
		pr.EarnedMicros = bal.Pending + bal.Payable
		rep.EarnedMicros += pr.EarnedMicros
		rep.BreakerTrips += pr.BreakerTrips
		rep.Providers = append(rep.Providers, pr)
	}
	rep.FeeMicros = rep.ChargedMicros - rep.EarnedMicros
	return nil
}

// breakerTrips reads the gateway's count of circuit breaker trips, by
// provider, over the models its node serves.
func (m *market) breakerTrips() map[*provider]int64 {
	out := map[*provider]int64{}
	for _, b := range m.gw.Breakers() {
		if p := m.byNode[b.NodeID]; p != nil {
			out[p] += b.Trips
		}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentiles are the nearest-rank percentiles of xs, which it sorts.
func percentiles(xs []float64) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	slices.Sort(xs)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(xs)))) - 1
		return xs[min(max(i, 0), len(xs)-1)]
	}
	return Percentiles{P50: at(0.50), P95: at(0.95), P99: at(0.99)}
}

// WriteTable prints the report for people.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "replayed %d requests (%d streamed) of %.0fs of trace at speedup %g: %.1f req/s offered, %.0fs wall\n",
		r.Requests, r.Streamed, r.TraceSeconds, r.Speedup, r.OfferedRPS, r.WallSeconds)
	fmt.Fprintf(tw, "served %d; failed %d %s\n", r.Served, r.Requests-r.Served, errorList(r.Errors))
	fmt.Fprintf(tw, "failovers %d (%d extra attempts); breaker trips %d\n\n", r.Failovers, r.ExtraAttempts, r.BreakerTrips)
	fmt.Fprintln(tw, "\tp50 ms\tp95 ms\tp99 ms")
	for _, row := range []struct {
		name string
		p    Percentiles
	}{{"latency", r.Latency}, {"time to first token", r.TTFT}, {"added over the model server", r.Added}} {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\n", row.name, row.p.P50, row.p.P95, row.p.P99)
	}
	fmt.Fprintln(tw, "\nservice\tmodel\trequests\tserved\tlatency p50/p95 ms\tTTFT p50/p95 ms\ttokens in/out\tcharged $\t$ per 1M tokens")
	for _, s := range r.Services {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f / %.0f\t%.0f / %.0f\t%d / %d\t%s\t%s\n", s.Service, s.Model, s.Requests, s.Served,
			s.Latency.P50, s.Latency.P95, s.TTFT.P50, s.TTFT.P95, s.InputTokens, s.OutputTokens, s.ChargedMicros, s.MicrosPerMTokens)
	}
	fmt.Fprintf(tw, "all\t\t%d\t%d\t\t\t%d / %d\t%s\t%s\n", r.Requests, r.Served, r.MeteredInput, r.MeteredOutput, r.ChargedMicros, r.MicrosPerMTokens)
	fmt.Fprintln(tw, "\nprovider\tGPU\tregion\t$ in/out per 1M\tprefill/decode tok/s\tcalls\tserved\tfaults drawn\tbreaker trips\tearned $")
	for _, p := range r.Providers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s / %s\t%.0f / %.0f\t%d\t%d\t%s\t%d\t%s\n", p.Name, p.GPU, p.Region, p.InputPrice, p.OutputPrice,
			p.PrefillTokensPerSecond, p.DecodeTokensPerSecond, p.Calls, p.Served, errorList(p.Faults), p.BreakerTrips, p.EarnedMicros)
	}
	fmt.Fprintf(tw, "\nledger: renters charged %s = providers earned %s + platform fee %s; usage records charge %s\n",
		r.ChargedMicros, r.EarnedMicros, r.FeeMicros, r.UsageChargedMicros)
	return tw.Flush()
}

func errorList(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
