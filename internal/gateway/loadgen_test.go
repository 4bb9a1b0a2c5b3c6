package gateway_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// benchOutside runs BenchmarkGatewayOverhead's load generator in a process
// of its own, as a client from outside would be, rather than beside the
// gateway in the test process, where it shares the gateway's scheduler and
// collector.
var benchOutside = flag.Bool("gateway.outside", false, "BenchmarkGatewayOverhead: run the load generator as a separate process")

// loadSpec is what the load generator process is asked to send.
type loadSpec struct {
	URL, Key string
	Body     []byte
	Rate, N  int
	Warm     int    // requests sent first, at the same rate, and not measured
	Pacer    string // -gateway.pacer
}

// loadEnv carries a loadSpec, as JSON, to the load generator process.
const loadEnv = "IDLEGRID_GATEWAY_LOADGEN"

// TestLoadGenerator is the load generator process: BenchmarkGatewayOverhead
// runs this test binary again with loadEnv set (-gateway.outside). Run
// without it, it skips.
func TestLoadGenerator(t *testing.T) {
	spec := os.Getenv(loadEnv)
	if spec == "" {
		t.Skip("the load generator process of BenchmarkGatewayOverhead -gateway.outside")
	}
	var s loadSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		t.Fatalf("%s: %v", loadEnv, err)
	}
	*benchPacer = s.Pacer
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: time.Minute}}
	defer client.CloseIdleConnections()
	load(t, client, s.URL, s.Key, s.Body, s.Rate, s.Warm)
	lat := load(t, client, s.URL, s.Key, s.Body, s.Rate, s.N)
	w := bufio.NewWriter(os.Stdout)
	for _, d := range lat {
		fmt.Fprintf(w, "latency-ns %d\n", d.Nanoseconds())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// loadOutside runs s in a load generator process and returns each
// request's latency.
func loadOutside(tb testing.TB, s loadSpec) []time.Duration {
	tb.Helper()
	spec, err := json.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadGenerator$", "-test.count=1", "-test.bench=^$")
	cmd.Env = append(os.Environ(), loadEnv+"="+string(spec))
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("load generator process: %v\n%s", err, out)
	}
	var lat []time.Duration
	for line := range bytes.Lines(out) {
		if v, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("latency-ns ")); ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				tb.Fatalf("load generator process: %q: %v", line, err)
			}
			lat = append(lat, time.Duration(n))
		}
	}
	if len(lat) != s.N {
		tb.Fatalf("load generator process: %d latencies, want %d\n%s", len(lat), s.N, out)
	}
	return lat
}
