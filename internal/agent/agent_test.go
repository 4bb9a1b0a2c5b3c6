package agent_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/runtime"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// testConfig is a valid config whose data dir is fresh.
func testConfig(tb testing.TB) *agent.Config {
	tb.Helper()
	c := mustParse(tb, minimal+"join_token: igj_test\nname: testnode\n")
	c.FakeGPUs = "2xRTX4090"
	c.DataDir = tb.TempDir()
	return c
}

// running is an agent whose Run goes on in the background.
type running struct {
	a      *agent.Agent
	gpus   []string
	cancel context.CancelFunc
	done   chan error
}

// startAgent runs an agent for cfg against srv and rt until stop.
func startAgent(tb testing.TB, cfg *agent.Config, srv agent.Server, rt runtime.Runtime) *running {
	tb.Helper()
	return startAgentOn(tb, cfg, srv, rt, func(d gpu.Detector) gpu.Detector { return d })
}

// startAgentOn is startAgent with the GPUs cfg describes passed through
// wrap, which may keep them to turn their knobs, or wrap them.
func startAgentOn(tb testing.TB, cfg *agent.Config, srv agent.Server, rt runtime.Runtime, wrap func(gpu.Detector) gpu.Detector) *running {
	tb.Helper()
	return startAgentLogging(tb, cfg, srv, rt, wrap, testOutput(tb))
}

// startAgentLogging is startAgentOn with the agent's log written to logs.
func startAgentLogging(tb testing.TB, cfg *agent.Config, srv agent.Server, rt runtime.Runtime, wrap func(gpu.Detector) gpu.Detector, logs io.Writer) *running {
	tb.Helper()
	key, err := nodekey.LoadOrCreate(cfg.KeyPath())
	if err != nil {
		tb.Fatal(err)
	}
	det, err := cfg.Detector(key)
	if err != nil {
		tb.Fatal(err)
	}
	det = wrap(det)
	a, err := agent.New(agent.Options{
		Config: cfg, Server: srv, Detector: det, Runtime: rt, Key: key,
		Host:    &agent.Host{Name: "host", CPUCores: 8, RAMMB: 32768, DiskGB: 1000},
		Logger:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Version: "test",
	})
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	gpus, _ := det.Detect(context.Background())
	r := &running{a: a, done: make(chan error, 1)}
	for _, g := range gpus {
		r.gpus = append(r.gpus, g.UUID)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- a.Run(ctx) }()
	return r
}

func testOutput(tb testing.TB) interface{ Write([]byte) (int, error) } {
	if t, ok := tb.(*testing.T); ok {
		return t.Output()
	}
	return os.Stderr
}

// stop cancels the agent's context and returns what Run returned.
func (r *running) stop(tb testing.TB) error {
	tb.Helper()
	r.cancel()
	return r.wait(tb)
}

func (r *running) wait(tb testing.TB) error {
	tb.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(time.Hour):
		tb.Fatal("Run did not return within an hour of virtual time")
		return nil
	}
}

// waitFor waits, in virtual time, until cond holds.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(3 * time.Hour)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// job is a fake training job of seconds, with env for the fake runtime.
func job(seconds int64, env map[string]string) idlegrid.JobSpec {
	return idlegrid.JobSpec{
		Name: "ft", Kind: idlegrid.KindFineTune, Image: "ghcr.io/acme/train:1", GPUs: 1, Nodes: 1,
		Tier: idlegrid.TierSilver, MaxPriceMicrosPerGPUHour: 3_000_000, DurationSeconds: seconds, Env: env,
	}
}

// assign places a lease of j on the agent's first GPU.
func (r *running) assign(srv *fakeServer, id string, j idlegrid.JobSpec) {
	srv.assign(idlegrid.Lease{ID: id, JobID: "job_" + id, GPUUUIDs: r.gpus[:1], LimitSeconds: j.DurationSeconds, Tier: j.Tier}, j)
}

func leaseIn(srv *fakeServer, id string, s idlegrid.LeaseState) func() bool {
	return func() bool { return srv.lease(id).State == s }
}

// states lists the states of a lease's reports.
func states(rs []idlegrid.LeaseReport) string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.State))
	}
	return strings.Join(out, ",")
}

func logText(lines []idlegrid.LogLine) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Stream + ": " + l.Text + "\n")
	}
	return b.String()
}

// countingRuntime counts Start calls, and keeps the last one's registry
// login.
type countingRuntime struct {
	runtime.Runtime
	starts atomic.Int32
	auth   atomic.Pointer[idlegrid.RegistryAuth]
}

func (c *countingRuntime) Start(ctx context.Context, w runtime.Workload, events chan<- runtime.Event) error {
	c.starts.Add(1)
	c.auth.Store(w.RegistryAuth)
	return c.Runtime.Start(ctx, w, events)
}

// failingRuntime fails every Start with err.
type failingRuntime struct {
	runtime.Runtime
	err error
}

func (f failingRuntime) Start(context.Context, runtime.Workload, chan<- runtime.Event) error {
	return f.err
}

func TestAgent_Run(t *testing.T) {
	t.Run("JoinsOnceThenRestarts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg, srv, rt := testConfig(t), &fakeServer{}, &rtfake.Runtime{}
			r := startAgent(t, cfg, srv, rt)
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			if got, want := r.a.NodeID(), "node_1"; got != want {
				t.Errorf("NodeID = %q, want %q", got, want)
			}
			if err := r.stop(t); err != nil {
				t.Fatalf("Run: %v", err)
			}
			join := srv.joins[0]
			key, _ := nodekey.LoadOrCreate(cfg.KeyPath())
			if join.Token != "igj_test" || join.AgentVersion != "test" ||
				join.PublicKey != nodekey.PublicString(key.Public().(ed25519.PublicKey)) {
				t.Errorf("join = %+v, want the token, version and the node key's public half", join)
			}
			if o := srv.offers[0].Offer; o.Name != "testnode" || len(o.GPUs) != 2 || o.CPUCores != 8 || o.Region != "us-east" {
				t.Errorf("offer = %+v", o)
			}
			st, err := agent.ReadState(cfg.DataDir)
			if err != nil || st == nil || st.NodeID != "node_1" || st.ProviderID != "acct_provider" || st.Server != cfg.Server || st.HeartbeatSeconds != 5 {
				t.Fatalf("state = %+v, %v; want node_1 of acct_provider at %s", st, err, cfg.Server)
			}

			srv2 := &fakeServer{}
			cfg.JoinToken = "" // not needed any more
			r2 := startAgent(t, cfg, srv2, rt)
			waitFor(t, "the offer after restart", func() bool { _, offers, _ := srv2.counts(); return offers == 1 })
			if err := r2.stop(t); err != nil {
				t.Fatalf("Run after restart: %v", err)
			}
			if joins, _, _ := srv2.counts(); joins != 0 || len(srv2.nodeIDs) != 1 || srv2.nodeIDs[0] != "node_1" {
				t.Errorf("after restart: %d joins, node IDs %v; want none and [node_1]", joins, srv2.nodeIDs)
			}
			if a, b := srv.offers[0].Offer.GPUs, srv2.offers[0].Offer.GPUs; a[0].UUID != b[0].UUID || a[1].UUID != b[1].UUID {
				t.Errorf("GPU UUIDs changed across restart: %v then %v", a, b)
			}
			rt.Close()
		})
	})
	t.Run("NoTokenNoState", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.JoinToken = ""
			err := startAgent(t, cfg, &fakeServer{}, &rtfake.Runtime{}).wait(t)
			if e, ok := err.(*idlegrid.Error); !ok || e.Field != "join_token" || !strings.Contains(err.Error(), agent.EnvJoinToken) {
				t.Errorf("Run = %v, want an error naming join_token and %s", err, agent.EnvJoinToken)
			}
		})
	})
	t.Run("JoinedAnotherServer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg, srv := testConfig(t), &fakeServer{}
			r := startAgent(t, cfg, srv, &rtfake.Runtime{})
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			r.stop(t)
			cfg.Server = "http://elsewhere:7070"
			err := startAgent(t, cfg, &fakeServer{}, &rtfake.Runtime{}).wait(t)
			if err == nil || !strings.Contains(err.Error(), "node.json") || !strings.Contains(err.Error(), "elsewhere") {
				t.Errorf("Run = %v, want an error saying to move node.json away", err)
			}
		})
	})
	t.Run("TokenRefused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			srv.fail("Join", idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "unknown join token"))
			err := startAgent(t, testConfig(t), srv, &rtfake.Runtime{}).wait(t)
			if idlegrid.ErrorCode(err) != idlegrid.EUNAUTHORIZED || !strings.Contains(err.Error(), "unknown join token") {
				t.Errorf("Run = %v, want the server's unauthorized error", err)
			}
			if n := len(srv.callTimes("Join")); n != 1 {
				t.Errorf("joined %d times, want 1: a definite answer is not retried", n)
			}
		})
	})
	t.Run("RetriesWithBackoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			down := errors.New("dial tcp 127.0.0.1:7070: connection refused")
			srv.fail("Join", down, down, down, idlegrid.Errorf(idlegrid.EUNAVAILABLE, "try later"), down, down, down)
			srv.fail("UpdateOffer", idlegrid.Errorf(idlegrid.EINTERNAL, "internal error"))
			r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{})
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			r.stop(t)
			calls := srv.callTimes("Join")
			if len(calls) != 8 {
				t.Fatalf("%d join attempts, want 8", len(calls))
			}
			for i := 1; i < len(calls); i++ {
				gap := calls[i].Sub(calls[i-1])
				ceiling := min(time.Second<<(i-1), 30*time.Second)
				if gap < ceiling/2 || gap > ceiling {
					t.Errorf("attempt %d came %v after the last, want between %v and %v", i+1, gap, ceiling/2, ceiling)
				}
			}
			if n := len(srv.callTimes("UpdateOffer")); n != 2 {
				t.Errorf("%d offer attempts, want 2", n)
			}
		})
	})
	t.Run("ServerDownThenCancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			for range 100 {
				srv.fail("Join", errors.New("connection refused"))
			}
			r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{})
			time.Sleep(5 * time.Minute)
			if err := r.stop(t); err != nil {
				t.Errorf("Run = %v, want nil when cancelled while the server is down", err)
			}
			if n := len(srv.callTimes("Join")); n < 10 || n > 20 {
				t.Errorf("%d join attempts in 5 minutes, want about one per 30s after the first few", n)
			}
		})
	})
	t.Run("Heartbeats", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{})
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			srv.fail("Heartbeat", errors.New("connection reset"))
			time.Sleep(60 * time.Second)
			r.stop(t)
			calls := srv.callTimes("Heartbeat")
			// every 5s as the server says; the failed one at 5s is retried within 1s
			if len(calls) < 12 || len(calls) > 13 {
				t.Errorf("%d heartbeats in a minute, want 12 or 13 at 5s", len(calls))
			}
			if gap := calls[1].Sub(calls[0]); gap > time.Second {
				t.Errorf("a failed heartbeat was retried after %v, want within 1s", gap)
			}
		})
	})
}

func TestAgent_Lease(t *testing.T) {
	t.Run("Succeeds", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv, rt := &fakeServer{}, &rtfake.Runtime{}
			r := startAgent(t, testConfig(t), srv, rt)
			r.assign(srv, "lease_a", job(600, nil))
			waitFor(t, "the lease to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
			started := time.Now()
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			if took := time.Since(started); took < 590*time.Second || took > 610*time.Second {
				t.Errorf("ran %v, want about 600s", took)
			}
			reports := srv.reportsFor("lease_a")
			if got, want := states(reports), "running,succeeded"; got != want {
				t.Fatalf("reports = %s, want %s", got, want)
			}
			if last := reports[1]; last.ExitCode == nil || *last.ExitCode != 0 || last.Progress != 1 || last.Fault != "" {
				t.Errorf("final report = %+v, want exit 0 at progress 1", last)
			}
			logs := srv.logsFor("lease_a")
			for i, l := range logs {
				if l.Seq != int64(i+1) {
					t.Fatalf("line %d has seq %d, want %d", i, l.Seq, i+1)
				}
			}
			for _, want := range []string{"step 500/1000 loss=", "training complete"} {
				if !strings.Contains(logText(logs), want) {
					t.Errorf("logs lack %q:\n%s", want, logText(logs))
				}
			}
			var progress []float64
			for _, hb := range srv.heartbeats() {
				for _, p := range hb.Leases {
					if p.LeaseID == "lease_a" {
						progress = append(progress, p.Progress)
					}
				}
			}
			if len(progress) < 100 || progress[len(progress)-1] < 0.9 || progress[0] > 0.1 {
				t.Errorf("heartbeat progress = %v, want about 120 reports rising to near 1", progress)
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			rt.Close()
		})
	})
	t.Run("ReportsCheckpoints", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv, rt := &fakeServer{}, &rtfake.Runtime{}
			r := startAgent(t, testConfig(t), srv, rt)
			j := job(600, nil)
			j.CheckpointEverySeconds = 120
			r.assign(srv, "lease_a", j)
			began := time.Now()
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			var seen []time.Duration // each new checkpoint the heartbeats carry, from the start
			beatAt := srv.heartbeatTimes()
			for i, hb := range srv.heartbeats() {
				for _, p := range hb.Leases {
					if p.LeaseID == "lease_a" && p.CheckpointAt != nil && (len(seen) == 0 || p.CheckpointAt.Sub(began) != seen[len(seen)-1]) {
						seen = append(seen, p.CheckpointAt.Sub(began))
					}
					// The age says the same as the time, by the clock of the
					// heartbeat: the server places the checkpoint by it.
					if p.CheckpointAt == nil {
						continue
					}
					if p.CheckpointAgeSeconds == nil {
						t.Fatalf("heartbeat %d carries a checkpoint at %v without its age", i, p.CheckpointAt)
					}
					age := time.Duration(*p.CheckpointAgeSeconds * float64(time.Second))
					if off := beatAt[i].Sub(*p.CheckpointAt) - age; off < 0 || off > time.Second {
						t.Errorf("heartbeat %d at %v: checkpoint at %v, age %v; off by %v", i, beatAt[i], *p.CheckpointAt, age, off)
					}
				}
			}
			if len(seen) != 4 || !slices.IsSorted(seen) || seen[0] < 120*time.Second || seen[3] > 600*time.Second {
				t.Errorf("heartbeats carried checkpoints at %v, want 4, every 2 minutes or so", seen)
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			rt.Close()
		})
	})
	t.Run("LogsFlushWithinASecond", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{})
			r.assign(srv, "lease_a", job(3600, nil))
			waitFor(t, "the lease to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
			time.Sleep(1500 * time.Millisecond)
			if got := logText(srv.logsFor("lease_a")); !strings.Contains(got, "visible GPUs: "+r.gpus[0]) {
				t.Errorf("after 1.5s the server has logs:\n%s\nwant the first lines", got)
			}
			r.stop(t)
		})
	})
	t.Run("WorkloadFails", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{Speed: 10})
			r.assign(srv, "lease_a", job(600, map[string]string{"FAKE_FAIL_AT": "0.5", "FAKE_EXIT_CODE": "3"}))
			waitFor(t, "the lease to fail", leaseIn(srv, "lease_a", idlegrid.LeaseFailed))
			reports := srv.reportsFor("lease_a")
			last := reports[len(reports)-1]
			if last.Fault != idlegrid.FaultWorkload || last.ExitCode == nil || *last.ExitCode != 3 ||
				!strings.Contains(last.Message, "exited with code 3: RuntimeError: CUDA error") {
				t.Errorf("final report = %+v, want the workload's fault, code 3 and the last error", last)
			}
			if last.Progress < 0.45 || last.Progress >= 0.5 {
				t.Errorf("progress = %v, want just under 0.5", last.Progress)
			}
			r.stop(t)
		})
	})
	t.Run("PullsWithTheRenterLogin", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			rt := &countingRuntime{Runtime: &rtfake.Runtime{}}
			r := startAgent(t, testConfig(t), srv, rt)
			j := job(60, nil)
			login := &idlegrid.RegistryAuth{Registry: "ghcr.io", Username: "acme-bot", Password: "ghp_secret"}
			srv.assignWithLogin(idlegrid.Lease{ID: "lease_a", JobID: "job_a", GPUUUIDs: r.gpus[:1], LimitSeconds: 60, Tier: j.Tier}, j, login)
			waitFor(t, "the lease to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
			if got := rt.auth.Load(); got == nil || *got != *login {
				t.Errorf("the runtime was given login %v, want the start command's %v", got, login)
			}
			r.stop(t)
		})
	})
	t.Run("ImageRefusedIsTheRenters", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			refused := idlegrid.Errorf(idlegrid.EFORBIDDEN, "the registry ghcr.io refused the image without a login")
			r := startAgent(t, testConfig(t), srv, failingRuntime{Runtime: &rtfake.Runtime{}, err: refused})
			r.assign(srv, "lease_a", job(60, nil))
			waitFor(t, "the lease to fail", leaseIn(srv, "lease_a", idlegrid.LeaseFailed))
			if got := lastReport(srv, "lease_a"); got.Fault != idlegrid.FaultWorkload || !strings.Contains(got.Message, "the job's image could not be pulled: the registry ghcr.io refused") {
				t.Errorf("report = %+v, want the workload's fault, saying the registry refused the image", got)
			}
			r.stop(t)
		})
	})
	t.Run("CommandMissingIsTheRenters", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			missing := idlegrid.Errorf(idlegrid.EINVALID, "the job's command cannot run in its image: exec: \"/nope\": no such file or directory")
			r := startAgent(t, testConfig(t), srv, failingRuntime{Runtime: &rtfake.Runtime{}, err: missing})
			r.assign(srv, "lease_a", job(60, nil))
			waitFor(t, "the lease to fail", leaseIn(srv, "lease_a", idlegrid.LeaseFailed))
			if got := lastReport(srv, "lease_a"); got.Fault != idlegrid.FaultWorkload || !strings.Contains(got.Message, "the job cannot start: the job's command cannot run") {
				t.Errorf("report = %+v, want the workload's fault, saying why", got)
			}
			r.stop(t)
		})
	})
	t.Run("StopCancels", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			rt := &countingRuntime{Runtime: &rtfake.Runtime{}}
			r := startAgent(t, testConfig(t), srv, rt)
			r.assign(srv, "lease_a", job(3600, nil))
			waitFor(t, "the lease to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
			time.Sleep(10 * time.Minute)
			srv.requestStop("lease_a", "cancelled by the renter")
			stopped := time.Now()
			waitFor(t, "the lease to be cancelled", leaseIn(srv, "lease_a", idlegrid.LeaseCancelled))
			if took := time.Since(stopped); took > agent.StopGrace+2*time.Second {
				t.Errorf("cancelled %v after the stop, want within the grace of %v", took, agent.StopGrace)
			}
			reports := srv.reportsFor("lease_a")
			last := reports[len(reports)-1]
			if got, want := states(reports), "running,cancelled"; got != want {
				t.Errorf("reports = %s, want %s", got, want)
			}
			if last.ExitCode == nil || *last.ExitCode != 143 || !strings.Contains(last.Message, "cancelled by the renter") {
				t.Errorf("final report = %+v, want exit 143 and the reason", last)
			}
			if logs := logText(srv.logsFor("lease_a")); !strings.Contains(logs, "stderr: received SIGTERM, checkpointing") {
				t.Errorf("logs lack the checkpoint:\n%s", logs)
			}
			if n := rt.starts.Load(); n != 1 {
				t.Errorf("runtime started %d times, want 1", n)
			}
			r.stop(t)
		})
	})
	t.Run("StopBeforeStart", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			rt := &countingRuntime{Runtime: &rtfake.Runtime{}}
			r := startAgent(t, testConfig(t), srv, rt)
			waitFor(t, "the offer", func() bool { _, offers, _ := srv.counts(); return offers == 1 })
			srv.assign(idlegrid.Lease{ID: "lease_a", GPUUUIDs: r.gpus[:1], StopRequested: "cancelled by the renter"}, job(60, nil))
			waitFor(t, "the lease to be cancelled", leaseIn(srv, "lease_a", idlegrid.LeaseCancelled))
			if n := rt.starts.Load(); n != 0 {
				t.Errorf("runtime started %d times, want 0", n)
			}
			r.stop(t)
		})
	})
	t.Run("StartFailureIsProviderFault", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{})
			r.assign(srv, "lease_a", job(60, map[string]string{"FAKE_START_ERROR": "pull access denied"}))
			waitFor(t, "the lease to fail", leaseIn(srv, "lease_a", idlegrid.LeaseFailed))
			reports := srv.reportsFor("lease_a")
			if len(reports) != 1 || reports[0].Fault != idlegrid.FaultProvider || !strings.Contains(reports[0].Message, "pull access denied") {
				t.Errorf("reports = %+v, want one failed report blaming the node, with the runtime's message", reports)
			}
			r.stop(t)
		})
	})
	t.Run("UnknownGPU", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			rt := &countingRuntime{Runtime: &rtfake.Runtime{}}
			r := startAgent(t, testConfig(t), srv, rt)
			srv.assign(idlegrid.Lease{ID: "lease_a", GPUUUIDs: []string{"GPU-elsewhere"}}, job(60, nil))
			waitFor(t, "the lease to fail", leaseIn(srv, "lease_a", idlegrid.LeaseFailed))
			if l := srv.lease("lease_a"); l.Fault != idlegrid.FaultProvider || !strings.Contains(l.Reason, "GPU-elsewhere") || rt.starts.Load() != 0 {
				t.Errorf("lease = %+v after %d starts, want a provider failure naming the GPU and no start", l, rt.starts.Load())
			}
			r.stop(t)
		})
	})
	t.Run("RepeatedStartIsIdempotent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			unavailable := idlegrid.Errorf(idlegrid.EUNAVAILABLE, "busy")
			srv.fail("ReportLease", unavailable, unavailable, unavailable, unavailable)
			rt := &countingRuntime{Runtime: &rtfake.Runtime{}}
			r := startAgent(t, testConfig(t), srv, rt)
			r.assign(srv, "lease_a", job(60, nil))
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			if polls := len(srv.callTimes("Commands")); polls < 5 {
				t.Errorf("%d polls, want the start command repeated while running was not reported", polls)
			}
			if n := rt.starts.Load(); n != 1 {
				t.Errorf("runtime started %d times, want 1", n)
			}
			r.stop(t)
		})
	})
	t.Run("ReportsRetriedUntilAccepted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			r := startAgent(t, testConfig(t), srv, &rtfake.Runtime{})
			r.assign(srv, "lease_a", job(60, nil))
			waitFor(t, "the lease to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
			down := errors.New("connection refused")
			srv.fail("ReportLease", down, down, down, down, down)
			srv.fail("AppendLogs", down, down, down)
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			if n := len(srv.callTimes("ReportLease")); n != 7 {
				t.Errorf("%d report calls, want 7 (running, 5 failures, succeeded)", n)
			}
			logs := srv.logsFor("lease_a")
			if !strings.Contains(logText(logs), "training complete") || logs[len(logs)-1].Seq != int64(len(logs)) {
				t.Errorf("logs incomplete or out of order despite retries:\n%s", logText(logs))
			}
			r.stop(t)
		})
	})
	t.Run("MootReportNotRetried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := &fakeServer{}
			rt := &rtfake.Runtime{}
			r := startAgent(t, testConfig(t), srv, rt)
			r.assign(srv, "lease_a", job(600, nil))
			waitFor(t, "the lease to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
			srv.fail("ReportLease", idlegrid.Errorf(idlegrid.ECONFLICT, "lease lease_a already lost"))
			waitFor(t, "the workload to end", func() bool { return len(srv.callTimes("ReportLease")) == 2 })
			time.Sleep(time.Minute)
			if n := len(srv.callTimes("ReportLease")); n != 2 {
				t.Errorf("%d report calls, want 2: a conflict makes the report moot", n)
			}
			r.stop(t)
		})
	})
}

func TestAgent_Shutdown(t *testing.T) {
	t.Run("StopsAndReportsLeases", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv, rt := &fakeServer{}, &rtfake.Runtime{}
			r := startAgent(t, testConfig(t), srv, rt)
			r.assign(srv, "lease_a", job(3600, nil))
			waitFor(t, "the lease to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
			time.Sleep(time.Minute)
			began := time.Now()
			if err := r.stop(t); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			if took := time.Since(began); took > agent.StopGrace+time.Second {
				t.Errorf("shutdown took %v, want within the stop grace", took)
			}
			l := srv.lease("lease_a")
			if l.State != idlegrid.LeaseFailed || l.Fault != idlegrid.FaultProvider || !strings.Contains(l.Reason, "shut down") ||
				l.ExitCode == nil || *l.ExitCode != 143 {
				t.Errorf("lease = %+v, want failed by the node's shutdown with exit 143", l)
			}
			if err := rt.Stop("lease_a", 0); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
				t.Errorf("the workload still runs after Run returned (Stop: %v)", err)
			}
			// synctest.Test fails if any goroutine of the agent is left.
		})
	})
	// The operator who stops an agent with leases running is told what
	// becomes of them, and how to stop without it.
	t.Run("SaysWhatBecomesOfTheLeases", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv, rt := &fakeServer{}, &rtfake.Runtime{}
			var logs bytes.Buffer // written by the agent's goroutines, read once Run has returned
			r := startAgentLogging(t, testConfig(t), srv, rt, func(d gpu.Detector) gpu.Detector { return d }, io.MultiWriter(testOutput(t), &logs))
			r.assign(srv, "lease_a", job(3600, nil))
			waitFor(t, "the lease to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
			if err := r.stop(t); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			for _, want := range []string{"their jobs go back to the queue", "their renters pay nothing", "counts against this node's record", "leases=1", "idlegrid node drain " + r.a.NodeID() + " --wait"} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the agent's log lacks %q:\n%s", want, logs.String())
				}
			}
		})
	})
	t.Run("GivesUpWhenServerDown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv, rt := &fakeServer{}, &rtfake.Runtime{}
			r := startAgent(t, testConfig(t), srv, rt)
			r.assign(srv, "lease_a", job(3600, nil))
			waitFor(t, "the lease to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
			for range 1000 {
				srv.fail("ReportLease", errors.New("connection refused"))
				srv.fail("AppendLogs", errors.New("connection refused"))
			}
			began := time.Now()
			if err := r.stop(t); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			if took := time.Since(began); took != agent.ShutdownTimeout {
				t.Errorf("shutdown took %v, want the timeout %v", took, agent.ShutdownTimeout)
			}
		})
	})
}

// TestDependencies keeps the agent away from the coordinator's insides: it
// must reach the server through the public client only.
func TestDependencies(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH:", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/idlegrid/idlegrid/internal/agent").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"/internal/sqlstore", "/internal/server", "/internal/httpapi", "/internal/market", "/internal/ledger"} {
			if strings.HasPrefix(dep, "github.com/idlegrid/idlegrid") && strings.HasSuffix(filepath.ToSlash(dep), banned) {
				t.Errorf("agent depends on %s", dep)
			}
		}
	}
}
