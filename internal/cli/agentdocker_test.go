package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

func TestOpenRuntime(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	cfg := &agent.Config{Server: "http://x", DataDir: t.TempDir(), FakeGPUs: "1xT4"}
	t.Run("Fake", func(t *testing.T) {
		rt, err := openRuntime(context.Background(), cfg, key, func(string) string { return "" }, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		if !strings.HasPrefix(rt.about, "fake") {
			t.Errorf("about = %q, want the fake runtime", rt.about)
		}
	})
	t.Run("DockerUnreachable", func(t *testing.T) {
		c := *cfg
		c.Runtime = agent.RuntimeDocker
		sock := "unix://" + filepath.Join(t.TempDir(), "docker.sock")
		_, err := openRuntime(context.Background(), &c, key, func(k string) string { return map[string]string{"DOCKER_HOST": sock}[k] }, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), "cannot reach the Docker engine at "+sock) || !strings.Contains(hintFor(err), "runtime: fake") {
			t.Errorf("got %v (hint %q), want the engine unreachable and what to do", err, hintFor(err))
		}
	})
	t.Run("Docker", func(t *testing.T) {
		mustDocker(t)
		c := *cfg
		c.Runtime = agent.RuntimeDocker
		rt, err := openRuntime(context.Background(), &c, key, os.Getenv, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		// The agent finds what it needs of the runtime by these interfaces,
		// through whatever wraps it.
		if _, ok := rt.Runtime.(runtime.Adopter); !ok {
			t.Error("the docker runtime given to the agent is not a runtime.Adopter")
		}
		if _, ok := rt.Runtime.(agent.ProcessOwner); !ok {
			t.Error("the docker runtime given to the agent is not an agent.ProcessOwner")
		}
		if _, ok := rt.Runtime.(interface{ LeaseGPUs(string) []string }); !ok {
			t.Error("the docker runtime given to the agent cannot say an adopted lease's GPUs")
		}
		if want := "idlegrid.node=" + dockerNodeID(key); !strings.Contains(rt.about, want) {
			t.Errorf("about = %q, want it to name %s", rt.about, want)
		}
	})
}

// agentProcess is 'idlegrid agent' run as a process of its own (the test
// binary, named idlegrid, runs Main: see TestMain), so that it can be
// killed as a crash would.
type agentProcess struct {
	cmd    *exec.Cmd
	out    syncBuffer
	config string // its --config
}

func startAgentProcess(t *testing.T, bin string, args ...string) *agentProcess {
	t.Helper()
	p := &agentProcess{cmd: exec.Command(bin, args...)}
	if i := slices.Index(args, "--config"); i >= 0 && i+1 < len(args) {
		p.config = args[i+1]
	}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	eventually(t, "the agent to serve", func() error {
		if strings.Contains(p.out.String(), "workloads in docker at") {
			return nil
		}
		return fmt.Errorf("agent says:\n%s", p.out.String())
	})
	return p
}

// TestAgentCommand_DockerAdopts runs a job in a Docker container through
// 'idlegrid agent --runtime docker', ends the agent leaving the container
// running, and starts it again: the new agent takes the container back,
// and the job succeeds with all its output after the restart. The agent
// is ended either way an upgrade in place may end it: killed as a crash
// would (SIGKILL), or handed over (SIGUSR2), when it exits with
// ExitHandedOver and tells the server nothing, so the node stays online.
// Each way runs beside the others, with a server, agents and a container
// of its own: most of each is waiting for the workload's 15 s.
func TestAgentCommand_DockerAdopts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server, an agent twice and a container; skipped with -short")
	}
	cli := mustDocker(t)
	img := mustSelfImage(t, cli, "idlegrid-test/agent-workload", "dev", "workload") // removed once every way is done
	t.Run("killed", func(t *testing.T) {
		t.Parallel()
		dockerAdopts(t, cli, img, "the node agent restarted and took the workload back", func(t *testing.T, first *agentProcess) {
			first.cmd.Process.Signal(syscall.SIGKILL) // a crash: nothing is stopped or reported
			first.cmd.Wait()
		})
	})
	t.Run("handed-over", func(t *testing.T) {
		t.Parallel()
		dockerAdopts(t, cli, img, "the node agent handed the workload over", func(t *testing.T, first *agentProcess) {
			first.cmd.Process.Signal(syscall.SIGUSR2)
			first.wantHandedOver(t)
		})
	})
	t.Run("handed-over-at-stop", func(t *testing.T) {
		t.Parallel()
		dockerAdopts(t, cli, img, "the node agent handed the workload over", func(t *testing.T, first *agentProcess) {
			// As a Kubernetes rolling update ends it: asked first, then
			// SIGTERM, which without the ask stops the workloads.
			ask := run(t, nil, "agent", "hand-over", "--config", first.config)
			if ask.code != 0 || !strings.Contains(ask.out, "hands its workloads over") {
				t.Fatalf("idlegrid agent hand-over: %s", ask)
			}
			first.cmd.Process.Signal(syscall.SIGTERM)
			first.wantHandedOver(t)
			if !strings.Contains(first.out.String(), "asked to hand over at this stop") {
				t.Errorf("the agent does not say it hands over at the stop:\n%s", first.out.String())
			}
		})
	})
}

// wantHandedOver waits for the agent to exit, and checks that it handed
// its workloads over: its exit status, and what it says.
func (p *agentProcess) wantHandedOver(t *testing.T) {
	t.Helper()
	err := p.cmd.Wait()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != ExitHandedOver {
		t.Errorf("the agent handing over exited with %v, want status %d:\n%s", err, ExitHandedOver, p.out.String())
	}
	if !strings.Contains(p.out.String(), "left the lease's workload running for the next agent") {
		t.Errorf("the agent does not say it left the lease running:\n%s", p.out.String())
	}
}

// dockerAdopts is TestAgentCommand_DockerAdopts with the first agent
// ended by leave, after which the lease's log has note. The job runs img
// on cli's engine. After a hand-over the log is whole: every step, once.
func dockerAdopts(t *testing.T, cli *dockerclient.Client, img, note string, leave func(*testing.T, *agentProcess)) {
	ctx := context.Background()
	url, adminKey := mustServer(t)
	admin := client.New(url, adminKey)
	renter, _ := fundedRenter(t, admin, url, "renter")
	cfgPath := dockerAgentConfig(t, admin, url)
	bin := selfBinary(t)

	first := startAgentProcess(t, bin, "agent", "--config", cfgPath)
	job, err := renter.SubmitJob(ctx, idlegrid.JobSpec{
		Name: "adoptee", Kind: idlegrid.KindTraining, Image: img, GPUs: 1, Nodes: 1, Tier: idlegrid.TierSilver,
		MaxPriceMicrosPerGPUHour: idlegrid.MicrosPerUnit, DurationSeconds: 300,
		Env: map[string]string{"DEMO_STEPS": "60", "DEMO_STEP_MS": "250"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var lease *idlegrid.Lease
	eventually(t, "the lease to run and log its steps", func() error {
		ls, err := renter.ListLeases(ctx, idlegrid.LeaseFilter{JobID: job.ID})
		if err != nil || len(ls) == 0 {
			return fmt.Errorf("leases: %v, %v", ls, err)
		} else if ls[0].State != idlegrid.LeaseRunning {
			return fmt.Errorf("lease %s is %s", ls[0].ID, ls[0].State)
		}
		lease = ls[0]
		lines, err := renter.LeaseLogs(ctx, lease.ID, 0, 1000)
		if err != nil || len(lines) == 0 || !strings.Contains(lines[len(lines)-1].Text, "step ") {
			return fmt.Errorf("logs %v, %v", lines, err)
		}
		return nil
	})

	leave(t, first)
	running, err := cli.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "idlegrid.lease="+lease.ID))})
	if err != nil || len(running) != 1 {
		t.Fatalf("after the first agent ended, %d containers run the lease (%v), want 1", len(running), err)
	}
	if n, err := admin.FindNode(ctx, lease.NodeID); err != nil || n.State != idlegrid.NodeOnline {
		t.Errorf("between the agents the node is %v (%v), want online: no goodbye", n, err)
	}

	second := startAgentProcess(t, bin, "agent", "--config", cfgPath)
	eventually(t, "the job to succeed", func() error {
		j, err := renter.FindJob(ctx, job.ID)
		if err != nil || j.State != idlegrid.JobSucceeded {
			return fmt.Errorf("job: %+v, %v", j, err)
		}
		return nil
	})
	lines, err := renter.LeaseLogs(ctx, lease.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, l := range lines {
		text.WriteString(l.Text + "\n")
	}
	for _, want := range []string{note, "training complete: 60 steps"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("lease logs lack %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(note, "handed") {
		steps := regexp.MustCompile(`step (\d+)/60`).FindAllStringSubmatch(text.String(), -1)
		for i, m := range steps {
			if m[1] != strconv.Itoa(i+1) {
				t.Fatalf("step %s is the %d-th step in the lease's log; want every step once, in order:\n%s", m[1], i+1, text.String())
			}
		}
		if len(steps) != 60 {
			t.Errorf("%d steps in the lease's log, want 60:\n%s", len(steps), text.String())
		}
	}
	if ls, _ := renter.ListLeases(ctx, idlegrid.LeaseFilter{JobID: job.ID}); len(ls) != 1 || ls[0].Attempt != 1 || ls[0].ChargedMicros <= 0 {
		t.Errorf("job has leases %+v, want 1: the adopted one, at its first attempt, charged", ls)
	}
	// Paid for its whole run, across both agents: the second goes on
	// with the receipt state the first kept, so the lease's receipts
	// verify as one chain signed by the node's key and bill the run (60
	// steps of 250 ms), the time before the first agent ended included,
	// give or take the workload's start before the first agent's meter
	// began.
	rs, err := renter.ListReceipts(ctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	if checked := checkReceipts(rs, lease.ID); !checked.Verified || checked.GPUSeconds < 12 {
		t.Errorf("the lease's receipts, as 'idlegrid lease receipts' checks them: %+v; want every one verified, about the 15 s the workload ran billed", checked)
	}
	if !regexp.MustCompile(`took back a workload a previous agent left.*lease=` + lease.ID).MatchString(second.out.String()) {
		t.Errorf("the second agent does not say it took the lease back:\n%s", second.out.String())
	}
	second.cmd.Process.Signal(os.Interrupt)
	if err := second.cmd.Wait(); err != nil {
		t.Errorf("agent exited with %v after Ctrl-C:\n%s", err, second.out.String())
	}
}
