package cli

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	igclient "github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/gpu/cuda"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// mustCheckServer runs the real server (store, coordinator, HTTP API) on a
// free port and returns its URL, and a provider's client there.
func mustCheckServer(tb testing.TB) (string, *igclient.Client) {
	tb.Helper()
	rs, err := startServer(context.Background(), serveConfig{
		listen: "127.0.0.1:0", dsn: filepath.Join(tb.TempDir(), "idlegrid.db"),
		adminKeyFile: filepath.Join(tb.TempDir(), "admin.key"), logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { rs.stop() })
	_, _, secret, err := igclient.New(rs.url, rs.adminKey).CreateAccount(context.Background(), "check-provider", idlegrid.RoleProvider)
	if err != nil {
		tb.Fatal(err)
	}
	return rs.url, igclient.New(rs.url, secret)
}

// mustJoinToken makes one of provider's join tokens, for uses nodes, and
// returns its secret.
func mustJoinToken(tb testing.TB, provider *igclient.Client, uses int) string {
	tb.Helper()
	_, secret, err := provider.CreateJoinToken(context.Background(), "check", uses, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	return secret
}

// mustCheckConfig writes an agent config for server with extra lines and
// a fresh data dir, and returns its path and data dir.
func mustCheckConfig(tb testing.TB, server, extra string) (path, dataDir string) {
	tb.Helper()
	dir := tb.TempDir()
	dataDir = filepath.Join(dir, "data")
	path = filepath.Join(dir, "agent.yaml")
	cfg := fmt.Sprintf("server: %s\ndata_dir: %s\nregion: eu-west\nresidency: EU\nname: check-node\nask:\n  floor: {silver: \"0.40\"}\n%s", server, dataDir, extra)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path, dataDir
}

// checkLineRE reads a line of the check's text output.
var checkLineRE = regexp.MustCompile(`^  (ok|warn|FAIL) +(\S+(?: \S+)*?)  +(.*)$`)

// checkedLines maps each check to its status and detail, in the text
// output, and its hint when one follows.
func checkedLines(tb testing.TB, out string) map[string]checkLine {
	tb.Helper()
	got := map[string]checkLine{}
	last := ""
	for _, line := range strings.Split(out, "\n") {
		if m := checkLineRE.FindStringSubmatch(line); m != nil {
			got[m[2]] = checkLine{Check: m[2], Status: m[1], Detail: m[3]}
			last = m[2]
		} else if _, hint, ok := strings.Cut(line, "  fix: "); ok && last != "" {
			l := got[last]
			l.Hint = hint
			got[last] = l
		}
	}
	return got
}

// want checks one line: its status, and that its detail (or hint) says
// each of mentions.
func want(tb testing.TB, lines map[string]checkLine, check, status string, mentions ...string) {
	tb.Helper()
	l, ok := lines[check]
	if !ok {
		tb.Errorf("no %q line", check)
		return
	}
	if l.Status != status {
		tb.Errorf("%s: %s %q (hint %q), want %s", check, l.Status, l.Detail, l.Hint, status)
	}
	for _, m := range mentions {
		if !strings.Contains(l.Detail+" | "+l.Hint, m) {
			tb.Errorf("%s: %q (hint %q) does not say %q", check, l.Detail, l.Hint, m)
		}
	}
}

func TestAgentCheck(t *testing.T) {
	url, provider := mustCheckServer(t)
	token := mustJoinToken(t, provider, 3)
	t.Run("FakeNodeReady", func(t *testing.T) {
		path, dataDir := mustCheckConfig(t, url, "fake_gpus: 2xRTX4090\njoin_token: "+token+"\n")
		r := run(t, nil, "agent", "--check", "--config", path)
		if r.code != 0 {
			t.Fatalf("got %s, want exit 0", r)
		}
		lines := checkedLines(t, r.out)
		want(t, lines, "config", checkOK, path+" is valid", "node check-node in eu-west (EU)", "runtime fake (the default with fake_gpus)")
		want(t, lines, "gpu driver", checkWarn, "simulated (fake_gpus: 2xRTX4090)", "remove fake_gpus")
		want(t, lines, "gpus", checkOK, "2 detected, 2 offered now")
		want(t, lines, "gpu 0", checkOK, "RTX4090, 24564 MB, GPU-fake-", ": offered")
		want(t, lines, "gpu 1", checkOK, "RTX4090")
		want(t, lines, "challenges", checkOK, "simulated: the agent computes them on the CPU")
		want(t, lines, "schedule", checkOK, "always offered")
		want(t, lines, "docker", checkOK, "not needed")
		want(t, lines, "nvidia toolkit", checkOK, "not needed")
		want(t, lines, "gpus in containers", checkOK, "not needed")
		want(t, lines, "workload network", checkOK, "not needed")
		want(t, lines, "server", checkOK, url+" answers, agent protocol 1")
		want(t, lines, "clock", checkOK, "from the server's")
		want(t, lines, "identity", checkOK, "no key yet", "not joined yet: the agent joins with its join token", `(token "check" of provider acct_`, "3 uses left")
		if len(lines) != 14 {
			t.Errorf("%d lines, want 14:\n%s", len(lines), r.out)
		}
		if !strings.HasSuffix(r.out, "\n13 ok, 1 warn, 0 FAIL\n") {
			t.Errorf("output does not end with the tally:\n%s", r.out)
		}
		if _, err := os.Stat(filepath.Join(dataDir, "node.key")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the check made a node key (stat: %v); it must change nothing", err)
		}
		if toks, err := provider.ListJoinTokens(context.Background()); err != nil || len(toks) != 1 || toks[0].Uses != 0 {
			t.Errorf("join tokens = %+v, %v; want the one, unused: the check must change nothing", toks, err)
		}
	})
	t.Run("TokenRefused", func(t *testing.T) {
		path, _ := mustCheckConfig(t, url, "fake_gpus: 1xT4\njoin_token: igj_nosuch\n")
		r := run(t, nil, "agent", "--check", "--config", path)
		lines := checkedLines(t, r.out)
		want(t, lines, "identity", checkFail, "the server refuses the join token: unknown join token", "idlegrid token create")
		if r.code != 1 {
			t.Errorf("got %s, want exit 1", r)
		}
	})
	t.Run("JSON", func(t *testing.T) {
		path, _ := mustCheckConfig(t, url, "fake_gpus: 1xT4\nruntime: docker\n")
		r := run(t, map[string]string{"DOCKER_HOST": "unix://" + filepath.Join(t.TempDir(), "docker.sock")}, "agent", "--check", "--json", "--config", path)
		if r.code != 1 || !strings.Contains(r.err, "checks failed") {
			t.Fatalf("got %s, want exit 1: no Docker engine and no join token", r)
		}
		var rep checkReport
		if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, r.out)
		}
		lines := map[string]checkLine{}
		for _, l := range rep.Checks {
			lines[l.Check] = l
		}
		if rep.OK || rep.Config != path {
			t.Errorf("ok %v, config %q; want false, %q", rep.OK, rep.Config, path)
		}
		want(t, lines, "config", checkOK, "runtime docker")
		want(t, lines, "docker", checkFail, "no Docker engine answers at unix://", "systemctl enable --now docker")
		want(t, lines, "nvidia toolkit", checkWarn, "skipped: no Docker engine")
		want(t, lines, "gpus in containers", checkWarn, "skipped: no Docker engine")
		want(t, lines, "identity", checkFail, "not joined yet, and no join token", agent.EnvJoinToken)
	})
	t.Run("ServerDown", func(t *testing.T) {
		path, _ := mustCheckConfig(t, "http://127.0.0.1:1", "fake_gpus: 1xT4\njoin_token: igj_test\n")
		r := run(t, nil, "agent", "--check", "--config", path)
		lines := checkedLines(t, r.out)
		want(t, lines, "server", checkFail, "cannot reach http://127.0.0.1:1/v1/healthz", "connection refused", "only outbound")
		want(t, lines, "clock", checkWarn, "skipped")
		if r.code != 1 || !strings.HasPrefix(r.err, "idlegrid: 1 of 13 checks failed") {
			t.Errorf("got %s, want exit 1 and one failure", r)
		}
	})
	t.Run("BadConfig", func(t *testing.T) {
		path, _ := mustCheckConfig(t, url, "fake_gpus: 1xT4\ngpus: 4\n")
		r := run(t, nil, "agent", "--check", "--config", path)
		lines := checkedLines(t, r.out)
		want(t, lines, "config", checkFail, "gpus", "unknown key", "idlegrid agent init")
		for _, skipped := range []string{"gpu driver", "server", "identity"} {
			want(t, lines, skipped, checkWarn, "skipped: the config is not valid")
		}
		if r.code != 1 {
			t.Errorf("got %s, want exit 1", r)
		}
	})
	t.Run("BadConfigInPlaces", func(t *testing.T) {
		path, _ := mustCheckConfig(t, url, "fake_gpus: 1xT4\nram_mb: -1\nruntime: podman\n")
		r := run(t, nil, "agent", "--check", "--config", path)
		lines := checkedLines(t, r.out)
		want(t, lines, "config", checkFail, "ram_mb: must not be negative")
		// Each fault on a line of its own, under the first.
		if !regexp.MustCompile(`(?m)^  FAIL  config +ram_mb: must not be negative.*\n {28}runtime: must be docker or fake, got "podman"\n {28}fix: `).MatchString(r.out) {
			t.Errorf("agent --check printed:\n%s\nwant each fault of the config on a line of its own", r.out)
		}
	})
	t.Run("NoDriver", func(t *testing.T) {
		old := checkDetector
		t.Cleanup(func() { checkDetector = old })
		checkDetector = func(context.Context) (gpu.Detector, string, error) {
			return nil, "", idlegrid.Errorf(idlegrid.EUNAVAILABLE, "cannot see any NVIDIA GPU: NVML: libnvidia-ml.so.1 not found")
		}
		path, _ := mustCheckConfig(t, url, "runtime: fake\njoin_token: "+token+"\n")
		r := run(t, nil, "agent", "--check", "--config", path)
		lines := checkedLines(t, r.out)
		want(t, lines, "gpu driver", checkFail, "no NVIDIA driver found", "libnvidia-ml.so.1", "install the NVIDIA driver")
		if _, ok := lines["gpus"]; ok {
			t.Errorf("a gpus line without a driver:\n%s", r.out)
		}
		if r.code != 1 {
			t.Errorf("got %s, want exit 1", r)
		}
	})
	t.Run("PolicyWithdraws", func(t *testing.T) {
		old := checkDetector
		t.Cleanup(func() { checkDetector = old })
		det := &fakeDetector{devs: []gpu.Device{
			{GPU: idlegrid.GPU{UUID: "GPU-aaaa", Model: "RTX4090", VRAMMB: 24564}, Index: 0, Driver: "550.54.15", CUDA: "12.4", TempC: 41},
			{GPU: idlegrid.GPU{UUID: "GPU-bbbb", Model: "RTX4090", VRAMMB: 24564}, Index: 1, Driver: "550.54.15", CUDA: "12.4", TempC: 60,
				Processes: []gpu.Process{{PID: 4242, Name: "/usr/bin/blender"}}},
		}}
		checkDetector = func(context.Context) (gpu.Detector, string, error) { return det, "NVML, driver 550.54.15", nil }
		mustChallengeRunner(t, &fakeChallengeRunner{devs: []string{"GPU-AAAA", "GPU-bbbb"}}, nil)
		path, _ := mustCheckConfig(t, url, "runtime: fake\njoin_token: "+token+"\nmode: when-idle\nidle:\n  for: 15m\n")
		r := run(t, nil, "agent", "--check", "--config", path)
		lines := checkedLines(t, r.out)
		want(t, lines, "gpu driver", checkOK, "NVML, driver 550.54.15, CUDA 12.4")
		want(t, lines, "gpus", checkOK, "2 detected, 1 offered now", "offered after 15m0s")
		want(t, lines, "gpu 0", checkOK, "RTX4090, 24564 MB, GPU-aaaa, 41°C: offered")
		want(t, lines, "gpu 1", checkWarn, "withdrawn now: the owner is using it: process 4242 (/usr/bin/blender)", "left it alone for 15m0s")
		want(t, lines, "challenges", checkOK, "CUDA with libcublas.so.13 sees every GPU")
		if r.code != 0 {
			t.Errorf("got %s, want exit 0: a withdrawn GPU is a warning", r)
		}
	})
	t.Run("Challenges", func(t *testing.T) {
		old := checkDetector
		t.Cleanup(func() { checkDetector = old })
		det := &fakeDetector{devs: []gpu.Device{
			{GPU: idlegrid.GPU{UUID: "GPU-aaaa", Model: "H200-141GB", VRAMMB: 143771}, Index: 0, Driver: "580.159.04", CUDA: "13.0"},
			{GPU: idlegrid.GPU{UUID: "GPU-bbbb", Model: "H200-141GB", VRAMMB: 143771}, Index: 1, Driver: "580.159.04", CUDA: "13.0"},
		}}
		checkDetector = func(context.Context) (gpu.Detector, string, error) { return det, "NVML, driver 580.159.04", nil }
		path, _ := mustCheckConfig(t, url, "runtime: fake\njoin_token: "+token+"\n")
		tests := []struct {
			name   string
			runner *fakeChallengeRunner
			err    error
			want   []string
		}{
			{"NoCuBLAS", nil, fmt.Errorf("%w: no cuBLAS library found (tried libcublas.so.13)", cuda.ErrUnavailable),
				[]string{"cannot run on this node's GPUs", "no cuBLAS library found", "set IDLEGRID_CUBLAS to its path", "answered unsupported"}},
			{"OneUnseen", &fakeChallengeRunner{devs: []string{"GPU-aaaa"}}, nil,
				[]string{"CUDA (with libcublas.so.13) does not see GPU-bbbb", "unset CUDA_VISIBLE_DEVICES"}},
			{"CannotList", &fakeChallengeRunner{err: errors.New("cuDeviceGetCount: CUDA_ERROR_UNKNOWN (999)")}, nil,
				[]string{"CUDA cannot list the GPUs: cuDeviceGetCount", "run nvidia-smi"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				mustChallengeRunner(t, tt.runner, tt.err)
				r := run(t, nil, "agent", "--check", "--config", path)
				want(t, checkedLines(t, r.out), "challenges", checkWarn, tt.want...)
				if r.code != 0 {
					t.Errorf("got %s, want exit 0: the node serves without challenges", r)
				}
				if tt.runner != nil && !tt.runner.closed {
					t.Error("the check left CUDA loaded")
				}
			})
		}
	})
	t.Run("Joined", func(t *testing.T) {
		path, dataDir := mustCheckConfig(t, url, "fake_gpus: 1xT4\n")
		key, err := nodekey.LoadOrCreate(filepath.Join(dataDir, "node.key"))
		if err != nil {
			t.Fatal(err)
		}
		joined := mustJoin(t, url, key, mustJoinToken(t, provider, 1))
		mustState(t, dataDir, agent.State{NodeID: joined.NodeID, ProviderID: joined.ProviderID, Server: url, JoinedAt: time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)})
		lines := checkedLines(t, run(t, nil, "agent", "--check", "--config", path).out)
		want(t, lines, "identity", checkOK, "key "+filepath.Join(dataDir, "node.key")+" ("+dockerNodeID(key)+")",
			"joined as "+joined.NodeID+" (provider "+joined.ProviderID+") on 2030-01-02", "the server knows it (offline)")

		mustState(t, dataDir, agent.State{NodeID: "node_abc", ProviderID: "acct_p", Server: url})
		lines = checkedLines(t, run(t, nil, "agent", "--check", "--config", path).out)
		want(t, lines, "identity", checkFail, "joined as node_abc", "the server does not know it", "move "+filepath.Join(dataDir, "node.json")+" away")

		other := mustJoin(t, url, mustAgentKey(t), mustJoinToken(t, provider, 1)) // a node this key is not
		mustState(t, dataDir, agent.State{NodeID: other.NodeID, ProviderID: other.ProviderID, Server: url})
		r := run(t, nil, "agent", "--check", "--config", path)
		want(t, checkedLines(t, r.out), "identity", checkFail, "the server knows the node by another key", "put the node's own key back")
		if r.code != 1 {
			t.Errorf("another node's ID: got %s, want exit 1", r)
		}

		mustState(t, dataDir, agent.State{NodeID: joined.NodeID, ProviderID: joined.ProviderID, Server: url})
		if _, err := provider.DrainNode(context.Background(), joined.NodeID, true); err != nil {
			t.Fatal(err)
		}
		lines = checkedLines(t, run(t, nil, "agent", "--check", "--config", path).out)
		want(t, lines, "identity", checkWarn, "the server knows it", "it is draining since", "idlegrid node drain "+joined.NodeID+" --undo")

		mustState(t, dataDir, agent.State{NodeID: "node_abc", ProviderID: "acct_p", Server: "http://elsewhere:7070"})
		lines = checkedLines(t, run(t, nil, "agent", "--check", "--config", path).out)
		want(t, lines, "identity", checkFail, "joined http://elsewhere:7070 as node_abc", "move "+filepath.Join(dataDir, "node.json")+" away")
	})
}

// mustJoin joins the node whose key is key to the server at url with
// token, as its agent would.
func mustJoin(tb testing.TB, url string, key ed25519.PrivateKey, token string) *idlegrid.JoinResponse {
	tb.Helper()
	offer := idlegrid.Offer{Name: "check-node", GPUs: []idlegrid.GPU{{UUID: "GPU-check-0", Model: "T4", VRAMMB: 15360}},
		Region: "eu-west", Residency: "EU", Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways},
		Ask: idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 400_000}}}
	resp, err := igclient.NewAgent(url, key).Join(context.Background(), idlegrid.JoinRequest{
		Token: token, PublicKey: nodekey.PublicString(key.Public().(ed25519.PublicKey)), Offer: offer, AgentVersion: "test"})
	if err != nil {
		tb.Fatal(err)
	}
	return resp
}

// mustAgentKey is a new node key.
func mustAgentKey(tb testing.TB) ed25519.PrivateKey {
	tb.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

// TestAgentCheck_Server checks the server and clock lines against servers
// that answer wrong.
func TestAgentCheck_Server(t *testing.T) {
	serve := func(protocol int, skew time.Duration) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/healthz" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Date", time.Now().Add(skew).UTC().Format(http.TimeFormat))
			json.NewEncoder(w).Encode(wire.Health{OK: true, Protocol: protocol})
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	tests := []struct {
		name          string
		url           string
		server, clock string
		mentions      []string
	}{
		{"InStep", serve(idlegrid.ProtocolVersion, 0), checkOK, checkOK, []string{"agent protocol 1"}},
		{"ClockAhead", serve(idlegrid.ProtocolVersion, -5*time.Minute), checkOK, checkFail, []string{"5m0s from the server's", "timedatectl set-ntp true"}},
		{"ClockBehind", serve(idlegrid.ProtocolVersion, time.Minute), checkOK, checkWarn, []string{"-1m0s from the server's"}},
		{"OtherProtocol", serve(idlegrid.ProtocolVersion+1, 0), checkFail, checkOK, []string{"speaks agent protocol 2, this agent 1", "upgrade"}},
		{"NotIdlegrid", serve(idlegrid.ProtocolVersion, 0) + "/nope", checkFail, checkOK, []string{"404 Not Found", "is that an idlegrid server"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, _ := mustCheckConfig(t, tt.url, "fake_gpus: 1xT4\njoin_token: igj_test\n")
			r := run(t, nil, "agent", "--check", "--config", path)
			lines := checkedLines(t, r.out)
			want(t, lines, "server", tt.server)
			want(t, lines, "clock", tt.clock)
			got := lines["server"].Detail + lines["server"].Hint + lines["clock"].Detail + lines["clock"].Hint
			for _, m := range tt.mentions {
				if !strings.Contains(got, m) {
					t.Errorf("server and clock lines do not say %q:\n%s", m, r.out)
				}
			}
		})
	}
}

// TestAgentCheck_Models checks a line per model: its server answers and
// lists it, with the queue depth its metrics give; metrics it cannot read
// are a warning; a server that does not answer fails the check.
func TestAgentCheck_Models(t *testing.T) {
	vllm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model"}]}`)
		case "/metrics":
			io.WriteString(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"meta-llama/Llama-3.1-8B-Instruct\"} 3.0\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(vllm.Close)
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r) // no /metrics
			return
		}
		io.WriteString(w, `{"object":"list","data":[{"id":"llama3.1:8b","object":"model"}]}`)
	}))
	t.Cleanup(ollama.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	model := func(name, upstream, upstreamModel, extra string) string {
		return fmt.Sprintf("  - {name: %s, upstream: %s/v1, upstream_model: %q, input_price: \"0.10\", output_price: \"0.20\", max_concurrency: 4%s}\n",
			name, upstream, upstreamModel, extra)
	}
	path, _ := mustCheckConfig(t, "http://127.0.0.1:1", "fake_gpus: 1xT4\nmodels:\n"+
		model("llama", vllm.URL, "meta-llama/Llama-3.1-8B-Instruct", "")+
		model("llama-ollama", ollama.URL, "llama3.1:8b", "")+
		model("llama-quiet", ollama.URL, "llama3.1:8b", ", metrics_url: \"off\"")+
		model("llama-down", down.URL, "x", ""))
	r := run(t, nil, "agent", "--check", "--config", path)
	lines := checkedLines(t, r.out)
	want(t, lines, "model llama", checkOK, vllm.URL+"/v1 serves it", "3 waiting", "vllm:num_requests_waiting")
	want(t, lines, "model llama-ollama", checkWarn, "queue depth cannot be read", "404 Not Found", "metrics_url: off")
	want(t, lines, "model llama-quiet", checkOK, "metrics_url: off")
	want(t, lines, "model llama-down", checkFail, "will not offer it", "start the model server")
}

// TestAgentCheck_Docker checks the Docker lines against the machine's
// engine, where there is one.
func TestAgentCheck_Docker(t *testing.T) {
	mustDocker(t)
	path, _ := mustCheckConfig(t, "http://127.0.0.1:1", "fake_gpus: 1xT4\nruntime: docker\n")
	lines := checkedLines(t, run(t, nil, "agent", "--check", "--config", path).out)
	want(t, lines, "docker", checkOK, "Docker ", "(API 1.")
	want(t, lines, "gpus in containers", checkOK, "not needed: simulated GPUs")
}

func mustState(tb testing.TB, dataDir string, st agent.State) {
	tb.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(agent.StatePath(dataDir), b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// fakeDetector reports fixed devices, as a real detector would.
type fakeDetector struct{ devs []gpu.Device }

func (d *fakeDetector) Detect(context.Context) ([]gpu.Device, error) { return d.devs, nil }

// fakeChallengeRunner plays CUDA and cuBLAS for the challenges check.
type fakeChallengeRunner struct {
	devs   []string
	err    error
	closed bool
}

func (f *fakeChallengeRunner) BLAS() string               { return "libcublas.so.13" }
func (f *fakeChallengeRunner) Devices() ([]string, error) { return f.devs, f.err }
func (f *fakeChallengeRunner) Close() error               { f.closed = true; return nil }

// mustChallengeRunner makes the challenges check load r, or fail with err,
// for the rest of the test.
func mustChallengeRunner(t *testing.T, r *fakeChallengeRunner, err error) {
	old := checkChallengeRunner
	t.Cleanup(func() { checkChallengeRunner = old })
	checkChallengeRunner = func() (challengeRunner, error) {
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}
