package cli

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// TestDevCommand runs the whole demo market in-process: server, eight
// agents over HTTP, the demo renter. It checks that the admin key is
// written privately, that the CLI against it sees jobs succeed, and that
// cancelling stops everything cleanly with a final summary.
func TestDevCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a whole market; skipped with -short")
	}
	dir := t.TempDir()
	b := startMain(t, "dev", "--addr", "127.0.0.1:0", "--data", dir, "--speed", "20", "--jobs-per-minute", "60")
	url := b.waitForMatch(t, regexp.MustCompile(`(?m)^  API +(http://127\.0\.0\.1:\d+)$`))

	keyFile := filepath.Join(dir, "admin.key")
	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("admin.key has mode %v, want 0600", fi.Mode().Perm())
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if want := "export IDLEGRID_ADDR=" + url + " IDLEGRID_KEY=$(cat " + keyFile + ")"; !strings.Contains(b.out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.out.String())
	}
	admin := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": strings.TrimSpace(string(key))}

	var nodes []*idlegrid.Node
	eventually(t, "every node joins", func() error {
		mustJSON(t, admin, &nodes, "node", "ls")
		if len(nodes) != 8 {
			return fmt.Errorf("%d of 8 nodes joined", len(nodes))
		}
		return nil
	})
	var jobs []*idlegrid.Job
	eventually(t, "a job succeeds", func() error {
		mustJSON(t, admin, &jobs, "job", "ls")
		for _, j := range jobs {
			if j.State == idlegrid.JobSucceeded && j.ChargedMicros > 0 {
				return nil
			}
		}
		return fmt.Errorf("none of %d jobs has succeeded with a charge", len(jobs))
	})
	devInference(t, url, dir)
	devPull(t, url, dir)
	devMetrics(t, url, admin["IDLEGRID_KEY"])
	if b.stop(t) != 0 {
		t.Fatalf("dev exited non-zero:\n%s", b.err.String())
	}
	out := b.out.String()
	for _, want := range []string{" placed on ", " succeeded, charged $", "\nfinal summary\n", "data kept in " + dir} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "renter.key")); err != nil {
		t.Errorf("no renter.key: %v", err)
	}
}

// devInference checks the dev market's inference: two nodes serve the demo
// model from simulated model servers, the renter calls it through the
// gateway, and the request is metered and charged.
// devRenter is the environment that runs the CLI as dev's demo renter,
// whose key dev wrote to dir.
func devRenter(t *testing.T, url, dir string) map[string]string {
	t.Helper()
	key, err := os.ReadFile(filepath.Join(dir, "renter.key"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": strings.TrimSpace(string(key))}
}

// devPull submits, as dev's renter, a job whose simulated image takes 200
// s to pull (10 s at dev's speed): through the real agent, its heartbeats
// and the API, the job's lease shows the pull while its node starts it,
// and the job then runs to its end.
func devPull(t *testing.T, url, dir string) {
	t.Helper()
	renter := devRenter(t, url, dir)
	var job idlegrid.Job
	mustJSON(t, renter, &job, "job", "submit", "--name", "large-image", "--kind", "training", "--image", "ghcr.io/acme/large:1",
		"--gpus", "1", "--tier", "silver", "--max-price", "5", "--duration", "1m", "--env", "FAKE_PULL_SECONDS=200", "--env", "FAKE_IMAGE_MB=8192")
	eventually(t, "the lease to show its image's pull", func() error {
		var leases []*idlegrid.Lease
		mustJSON(t, renter, &leases, "job", "leases", job.ID)
		for _, l := range leases {
			if p := l.Pull; l.State == idlegrid.LeaseAssigned && p != nil && p.ImageBytes == 8<<30 && p.PulledBytes < p.ImageBytes {
				return nil
			}
		}
		return fmt.Errorf("leases %+v", leases)
	})
	eventually(t, "the job to succeed after its pull", func() error {
		var j idlegrid.Job
		if mustJSON(t, renter, &j, "job", "get", job.ID); j.State != idlegrid.JobSucceeded {
			return fmt.Errorf("job %s is %s: %s", j.ID, j.State, j.Reason)
		}
		return nil
	})
}

func devInference(t *testing.T, url, dir string) {
	t.Helper()
	renter := devRenter(t, url, dir)
	eventually(t, "both nodes serve the demo model", func() error {
		var models []openai.Model
		mustJSON(t, renter, &models, "inference", "models")
		if len(models) != 1 || models[0].ID != devModelName || models[0].Providers != 2 {
			return fmt.Errorf("models served: %+v", models)
		}
		return nil
	})
	body := `{"model":"` + devModelName + `","messages":[{"role":"user","content":"Hello there"}],"max_tokens":8}`
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+renter["IDLEGRID_KEY"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), `"completion_tokens":8`) {
		t.Fatalf("chat completion: %s %s", resp.Status, answer)
	}
	eventually(t, "the request is metered", func() error {
		var us []*idlegrid.InferenceUsage
		mustJSON(t, renter, &us, "inference", "usage")
		for _, u := range us { // the demo renter's own calls are there too
			if u.OutputTokens == 8 && u.Model == devModelName && u.ChargeMicros > 0 {
				return nil
			}
		}
		return fmt.Errorf("usage: %+v", us)
	})
	// A page of one ends with the command for the next, which lists the
	// request before it.
	var first []*idlegrid.InferenceUsage
	mustJSON(t, renter, &first, "inference", "usage", "--limit", "1", "--json")
	if r := run(t, renter, "inference", "usage", "--limit", "1"); len(first) != 1 || r.code != 0 ||
		!strings.Contains(r.out, "more may follow: idlegrid inference usage --limit 1 --before ") ||
		!strings.Contains(r.out, "  ENDPOINT  ") || !strings.Contains(r.out, "  chat/completions  ") {
		t.Errorf("a page of one request: %v; %s", first, r)
	}
	var next []*idlegrid.InferenceUsage
	mustJSON(t, renter, &next, "inference", "usage", "--limit", "1", "--before", first[0].ID, "--json")
	if len(next) == 1 && (next[0].ID == first[0].ID || next[0].CreatedAt.After(first[0].CreatedAt)) {
		t.Errorf("the page before %s: %+v, want an older request", first[0].ID, next[0])
	}
	// The gateway names the field at fault as OpenAI does (param): the
	// flag typed, a mistake in the command line.
	if r := run(t, renter, "inference", "usage", "--before", "req_missing"); r.code != 2 || !strings.Contains(r.err, `idlegrid: --before: "req_missing" is not one of the requests listed`) {
		t.Errorf("inference usage --before a request that is not there: %s", r)
	}
	eventually(t, "a model server's queue is known", func() error {
		var st wire.InferenceStats
		mustJSON(t, renter, &st, "inference", "stats", "--json")
		for _, p := range st.Providers {
			if p.Model == devModelName && p.Queued != nil && *p.Queued == 0 {
				return nil
			}
		}
		return fmt.Errorf("providers: %+v", st.Providers)
	})
}

// devMetrics checks that GET /metrics carries every part's metrics: the
// store's, the agents' sessions, the gateway's and its routes'.
func devMetrics(t *testing.T, url, adminKey string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s %s", resp.Status, body)
	}
	for _, want := range []string{
		`idlegrid_agent_sessions 8`,
		`idlegrid_agent_sessions_opened_total [1-9]`,
		`idlegrid_http_requests_total\{code="200",route="POST /v1/chat/completions"\} [1-9]`,
		`idlegrid_http_requests_total\{code="200",route="GET /v1/inference/usage"\} [1-9]`,
		`idlegrid_inference_latency_seconds_count\{model="` + devModelName + `"\} [1-9]`,
		`idlegrid_inference_tokens_total\{kind="output",model="` + devModelName + `"\} [1-9]`,
		`idlegrid_inference_meter_write_seconds_count [1-9]`,
		`idlegrid_inference_breakers_open 0`,
		`idlegrid_store_transaction_seconds_count\{kind="read"\} [1-9]`,
		`idlegrid_store_transaction_seconds_count\{kind="write"\} [1-9]`,
		`idlegrid_store_writer_wait_seconds_count [1-9]`,
		`go_sql_open_connections\{db_name="idlegrid"\} [1-9]`,
		`idlegrid_placements_total [1-9]`,
	} {
		if !regexp.MustCompile(`(?m)^` + want).Match(body) {
			t.Errorf("GET /metrics lacks a line matching %q", want)
		}
	}
}

func TestDevHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		speed  float64
		every  time.Duration
		missed int
	}{
		{0.5, 10 * time.Second, 3},
		{1, 10 * time.Second, 3},
		{4, 2 * time.Second, 15},
		{30, time.Second, 30},
		{1000, time.Second, 30},
	} {
		every, missed := devHeartbeat(tc.speed)
		if every != tc.every || missed != tc.missed {
			t.Errorf("devHeartbeat(%g) = %s, %d; want %s, %d", tc.speed, every, missed, tc.every, tc.missed)
		}
	}
}
