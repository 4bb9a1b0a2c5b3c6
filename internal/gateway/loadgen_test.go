package gateway_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"testing"
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
	Conns    int    // -gateway.conns
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
	client := loadClient(s.Conns)
	defer client.CloseIdleConnections()
	load(t, client, s.URL, s.Key, s.Body, s.Rate, s.Warm)
	if err := json.NewEncoder(os.Stdout).Encode(load(t, client, s.URL, s.Key, s.Body, s.Rate, s.N)); err != nil {
		t.Fatal(err)
	}
}

// loadOutside runs s in a load generator process and returns what it
// measured.
func loadOutside(tb testing.TB, s loadSpec) loadResult {
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
	// Its answer is the first line that is a JSON object; go test adds
	// its own lines after it.
	for line := range bytes.Lines(out) {
		if !bytes.HasPrefix(line, []byte("{")) {
			continue
		}
		var r loadResult
		if err := json.Unmarshal(line, &r); err != nil {
			tb.Fatalf("load generator process: %q: %v", line, err)
		}
		if len(r.Latency)+r.Failed != s.N {
			tb.Fatalf("load generator process: %d latencies and %d failures, want %d requests in all", len(r.Latency), r.Failed, s.N)
		}
		return r
	}
	tb.Fatalf("load generator process: no answer in\n%s", out)
	return loadResult{}
}
