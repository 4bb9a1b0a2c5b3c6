package gateway_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/cputime"
	"github.com/idlegrid/idlegrid/internal/gateway"
	"github.com/idlegrid/idlegrid/internal/gcfloor"
)

// BenchmarkGatewayOverhead measures the latency the gateway adds over
// calling the model server directly, in the same run: an open-loop load
// generator sends chat completions at a fixed rate, first straight to the
// mock model server, then through two bare reverse proxies in front of it
// (bareProxies: the floor of any path with two HTTP hops, as the server
// and the agent are), then through the gateway (API key, routing, budget,
// the agent's session, the agent, metering into the ledger), and reports
// the 50th and 99th percentiles of each and of each one's difference from
// direct (added-… for the gateway, proxies-added-… for the floor). Latency is
// measured from when each request was due to its last byte, so a
// generator that falls behind counts against the system, not for it.
// Failed requests are counted (-failed-%), not timed; -done-req/s is the
// rate the path answered at, from the first due time to the last answer,
// which falls below the rate asked for when the path saturates.
//
//	go test ./internal/gateway -run '^$' -bench GatewayOverhead -benchtime 1x -cpu 2
//
// -gateway.rates sets the rates, e.g. -gateway.rates 200,1000: on a
// machine too busy for 1,000 a second both paths only queue, and a lower
// rate still shows what the gateway itself adds. -gateway.pacer=sleep
// paces with time.Sleep instead of nanosleep (see preciseSleep), to show
// what a generator that sends in bursts measures. The process keeps the
// collector's heap goal at least -gateway.gcfloor-mib (256), as idlegrid
// server does (internal/gcfloor); 0 runs at Go's default. -gateway.outside
// runs the load generator in a process of its own (this test binary
// again, as TestLoadGenerator), so that it shares neither the gateway's
// goroutine scheduler nor its garbage collector. -gateway.conns (512)
// bounds the generator's connections to each target. Before the first
// rate the process is warmed up (-gateway.warm-heap, see warmHeap). The
// meter journals each charge, as idlegrid server does
// (-gateway.journal=false: no journal).
func BenchmarkGatewayOverhead(b *testing.B) {
	rates, err := parseRates(*benchRates)
	if err != nil {
		b.Fatal(err)
	}
	keepGCFloor(b)
	f := mustFixture(b, benchConfig(b))
	up := mustMock(b, "alpha")
	f.startAgent(b, "alpha", "eu-west", "EU", up.model(testModel, "0.10", "0.20", 100000))
	f.waitProviders(b, testModel, 1)
	f.waitChallenges(b)
	client := loadClient(*benchConns)
	b.Cleanup(client.CloseIdleConnections)
	proxies := bareProxies(b, up.URL, *benchConns)
	warmBody := []byte(fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Hi"}],"max_tokens":16}`, testModel))
	warmHeap(b, func() error { return post(client, f.URL+"/v1/chat/completions", f.RenterKey, warmBody) })
	for _, rate := range rates {
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("rate=%d/stream=%v", rate, stream)
			b.Run(name, func(b *testing.B) {
				body := []byte(fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Hi"}],"stream":%v,"max_tokens":16}`, testModel, stream))
				direct := []byte(fmt.Sprintf(`{"model":"upstream-model","messages":[{"role":"user","content":"Hi"}],"stream":%v,"stream_options":{"include_usage":true},"max_tokens":16}`, stream))
				const seconds = 2
				n := rate * seconds
				run := func(what, url, key string, body []byte) []time.Duration {
					var r loadResult
					if *benchOutside {
						r = loadOutside(b, loadSpec{URL: url, Key: key, Body: body, Rate: rate, N: n, Warm: rate / 4, Pacer: *benchPacer, Conns: *benchConns})
					} else {
						load(b, client, url, key, body, rate, rate/4) // warm up
						r = load(b, client, url, key, body, rate, n)
					}
					b.ReportMetric(100*float64(r.Failed)/float64(n), what+"-failed-%")
					b.ReportMetric(r.Done, what+"-done-req/s")
					if r.Failed > 0 {
						b.Logf("%s: %d of %d requests failed, the first: %s", what, r.Failed, n, r.FirstError)
					}
					if len(r.Latency) == 0 {
						b.Fatalf("%s: every request failed, the first: %s", what, r.FirstError)
					}
					return r.Latency
				}
				d := run("direct", up.URL+"/v1/chat/completions", "", direct)
				p := run("proxies", proxies+"/v1/chat/completions", "", direct)
				g := run("gateway", f.URL+"/v1/chat/completions", f.RenterKey, body)
				dp50, dp99 := pct(d, 0.50), pct(d, 0.99)
				pp50, pp99 := pct(p, 0.50), pct(p, 0.99)
				gp50, gp99 := pct(g, 0.50), pct(g, 0.99)
				b.ReportMetric(us(dp50), "direct-p50-µs")
				b.ReportMetric(us(dp99), "direct-p99-µs")
				b.ReportMetric(us(pp50), "proxies-p50-µs")
				b.ReportMetric(us(pp99), "proxies-p99-µs")
				b.ReportMetric(us(gp50), "gateway-p50-µs")
				b.ReportMetric(us(gp99), "gateway-p99-µs")
				b.ReportMetric(us(pp50-dp50), "proxies-added-p50-µs")
				b.ReportMetric(us(pp99-dp99), "proxies-added-p99-µs")
				b.ReportMetric(us(gp50-dp50), "added-p50-µs")
				b.ReportMetric(us(gp99-dp99), "added-p99-µs")
				if err := f.GW.Sync(b.Context()); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

var benchRates = flag.String("gateway.rates", "1000,5000", "BenchmarkGatewayOverhead's request rates a second, comma-separated")

// benchConns bounds the load generator's connections to each target, as
// a real client's pool would: beyond it a request waits for a connection,
// and the wait counts in its latency. Unbounded, a rate the system cannot
// carry opens a connection per waiting request until the process runs out
// of file descriptors, and nothing is measured.
var benchConns = flag.Int("gateway.conns", 512, "BenchmarkGatewayOverhead: the most connections the load generator opens to each target")

// loadClient is the load generator's HTTP client, with at most conns
// connections to a host.
func loadClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxConnsPerHost: conns, MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}}
}

func parseRates(s string) ([]int, error) {
	var rates []int
	for _, f := range strings.Split(s, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("-gateway.rates: want positive integers such as 1000,5000, got %q", s)
		}
		rates = append(rates, r)
	}
	return rates, nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

func pct(xs []time.Duration, q float64) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

// loadResult is what a load run measured: the latency of each request
// that succeeded, from its due time to its last byte, and the failures.
type loadResult struct {
	Latency    []time.Duration
	Failed     int
	FirstError string
	Done       float64 // requests that succeeded a second, from the first due time to the last answer
}

// load sends n requests at rate a second, each in its own goroutine at its
// due time, and returns what it measured. A failed request (an error
// status, or no answer) is counted, not timed: a quick refusal would
// otherwise pass for a quick answer.
func load(tb testing.TB, c *http.Client, url, key string, body []byte, rate, n int) loadResult {
	tb.Helper()
	lat := make([]time.Duration, n)
	ok := make([]bool, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var r loadResult
	var first, last time.Time
	err := pace(n, rate, func(i int, due time.Time) {
		if i == 0 {
			first = due
		}
		wg.Go(func() {
			err := post(c, url, key, body)
			done := time.Now()
			lat[i], ok[i] = done.Sub(due), err == nil
			mu.Lock()
			defer mu.Unlock()
			if done.After(last) {
				last = done
			}
			if err != nil {
				if r.Failed++; r.FirstError == "" {
					r.FirstError = err.Error()
				}
			}
		})
	})
	if err != nil {
		tb.Fatal(err)
	}
	wg.Wait()
	for i, d := range lat {
		if ok[i] {
			r.Latency = append(r.Latency, d)
		}
	}
	if span := last.Sub(first); span > 0 {
		r.Done = float64(len(r.Latency)) / span.Seconds()
	}
	return r
}

// post sends one chat completion and reads its whole answer.
func post(c *http.Client, url, key string, body []byte) error {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %v", url, resp.StatusCode, err)
	}
	return nil
}

// benchGCFloor is the heap goal the benchmarks keep at least, in MiB.
var benchJournal = flag.Bool("gateway.journal", true, "the gateway benchmarks: journal each charge (Config.Journal), as idlegrid server does; false: no journal")

// benchConfig is the gateway's configuration in the benchmarks: the
// defaults of idlegrid server, with the meter's journal in a temporary
// directory (mustFixture's) unless -gateway.journal=false.
func benchConfig(b *testing.B) func(*gateway.Config) {
	return func(c *gateway.Config) {
		c.CatalogTTL, c.BudgetTTL = gateway.DefaultCatalogTTL, gateway.DefaultBudgetTTL
		if !*benchJournal {
			c.Journal = ""
		}
	}
}

var benchGCFloor = flag.Int("gateway.gcfloor-mib", gcfloor.DefaultFloor>>20, "the gateway benchmarks' heap goal floor in MiB, as idlegrid server keeps it (--gc-floor-mib); 0: Go's default")

// keepGCFloor keeps the process's heap goal at -gateway.gcfloor-mib, as
// idlegrid server does, until tb ends: the gateway runs in this process.
func keepGCFloor(tb testing.TB) {
	tb.Cleanup(gcfloor.Start(context.Background(), uint64(*benchGCFloor)<<20, gcfloor.DefaultInterval))
}

// benchWarmHeap says whether the gateway benchmarks warm the heap first.
var benchWarmHeap = flag.Bool("gateway.warm-heap", true, "the gateway benchmarks: before measuring, send requests through the gateway until the collector has run twice, so that the heap's pages have all been touched once, as in a server that has run a while; false measures a fresh process")

// warmHeapMax bounds the requests warmHeap sends.
const warmHeapMax = 100_000

// warmHeap sends requests with send, one at a time, until the collector
// has finished two cycles, when -gateway.warm-heap is set. Under the
// heap floor a fresh process's heap grows into pages the kernel has never
// given it, and faults each in on its first use: about nine faults a
// request through the gateway, for its first quarter of a gigabyte of
// allocations. A server that has run a while reuses its pages; this is
// its state, and what the benchmarks measure.
func warmHeap(tb testing.TB, send func() error) {
	if !*benchWarmHeap {
		return
	}
	start := gcCycles()
	i := 0
	for ; gcCycles() < start+2; i++ {
		if i == warmHeapMax {
			tb.Logf("the collector ran %d times in %d requests; measuring anyway", gcCycles()-start, i)
			return
		}
		if err := send(); err != nil {
			tb.Fatal(err)
		}
	}
	tb.Logf("warmed the heap with %d requests", i)
}

// gcCycles is how many collection cycles the process has finished.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// benchPacer picks how the load generator waits for each request's due
// time.
var benchPacer = flag.String("gateway.pacer", "precise", "BenchmarkGatewayOverhead: how the load generator waits for each request's time: precise (nanosleep on a thread of its own, Linux) or sleep (Go's time.Sleep, which can wake a millisecond late and so sends in bursts)")

// pace calls send(i, due) for i from 0 to n-1, rate a second, each at its
// due time as closely as -gateway.pacer allows, from a goroutine of its
// own, and returns when the last was sent.
func pace(n, rate int, send func(i int, due time.Time)) error {
	errc := make(chan error, 1)
	go func() {
		sleep := time.Sleep
		switch *benchPacer {
		case "precise":
			s, err := preciseSleep()
			if err != nil {
				errc <- err
				return
			}
			sleep = s
		case "sleep":
		default:
			errc <- fmt.Errorf("-gateway.pacer: want precise or sleep, got %q", *benchPacer)
			return
		}
		interval := time.Second / time.Duration(rate)
		start := time.Now()
		for i := range n {
			due := start.Add(time.Duration(i) * interval)
			if d := time.Until(due); d > 0 {
				sleep(d)
			}
			send(i, due)
		}
		errc <- nil
	}()
	return <-errc
}

// BenchmarkGatewaySequential is one request at a time (non-streamed)
// straight to the model server, through two bare reverse proxies
// (bareProxies, the floor of a path with two HTTP hops), and through the
// gateway: each path's own latency, with no queueing, and the CPU time
// the whole process (client, paths and model server) spent a request,
// cpu-µs/req. The process is warmed up first (-gateway.warm-heap, see
// warmHeap).
func BenchmarkGatewaySequential(b *testing.B) {
	keepGCFloor(b)
	f := mustFixture(b, benchConfig(b))
	up := mustMock(b, "alpha")
	f.startAgent(b, "alpha", "eu-west", "EU", up.model(testModel, "0.10", "0.20", 100000))
	f.waitProviders(b, testModel, 1)
	f.waitChallenges(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	body := []byte(fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Hi"}],"max_tokens":16}`, testModel))
	warmHeap(b, func() error { return post(client, f.URL+"/v1/chat/completions", f.RenterKey, body) })
	proxies := bareProxies(b, up.URL, 16)
	for _, target := range []struct{ name, url, key string }{
		{"direct", up.URL + "/v1/chat/completions", ""},
		{"proxies", proxies + "/v1/chat/completions", ""},
		{"gateway", f.URL + "/v1/chat/completions", f.RenterKey},
	} {
		b.Run(target.name, func(b *testing.B) {
			direct := bytes.Replace(body, []byte(testModel), []byte("upstream-model"), 1)
			cpu0, _ := cputime.Process()
			for b.Loop() {
				bd := body
				if target.key == "" {
					bd = direct
				}
				if err := post(client, target.url, target.key, bd); err != nil {
					b.Fatal(err)
				}
			}
			if cpu1, ok := cputime.Process(); ok {
				b.ReportMetric(us(cpu1-cpu0)/float64(b.N), "cpu-µs/req")
			}
		})
	}
}

// bareProxies starts two reverse proxies (net/http/httputil), each in
// front of the next and the last in front of upstream, and returns the
// first one's URL. They do nothing but pass requests on, each over pooled
// connections (at most conns to its upstream): no key, no routing, no
// metering, no session. Any design with two HTTP hops between a client
// and a model server, as the server and the agent are, pays at least what
// they add; the benchmarks run them beside the gateway as that floor.
//
// Each reads a request's whole body before passing it on, as the gateway
// and the agent do. A proxy handing its inbound body to the transport
// cuts some streamed answers: once the answer's headers are written, the
// server closes the inbound body, the transport's check for bytes past
// Content-Length reads the closed body, and its write loop drops the
// upstream connection mid-answer (the client sees "unexpected EOF").
func bareProxies(tb testing.TB, upstream string, conns int) string {
	tb.Helper()
	for range 2 {
		u, err := url.Parse(upstream)
		if err != nil {
			tb.Fatal(err)
		}
		rp := httputil.NewSingleHostReverseProxy(u)
		tr := &http.Transport{MaxConnsPerHost: conns, MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}
		rp.Transport = tr
		ts := httptest.NewServer(readWholeBody(rp))
		tb.Cleanup(func() { ts.Close(); tr.CloseIdleConnections() })
		upstream = ts.URL
	}
	return upstream
}

// readWholeBody reads a request's body into memory before next sees it.
func readWholeBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		next.ServeHTTP(w, r)
	})
}
