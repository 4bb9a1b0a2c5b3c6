package cli

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
)

// runDemo runs the demo workload with env until it ends, or until stopAfter
// (virtual time) when it is not zero, and returns its output and error.
func runDemo(t *testing.T, env map[string]string, stopAfter time.Duration) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	w := &devWorkload{out: &out, errOut: &errOut, getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if stopAfter > 0 {
		time.AfterFunc(stopAfter, cancel)
	}
	err := w.run(ctx)
	return out.String(), errOut.String(), err
}

func TestDevWorkload(t *testing.T) {
	t.Run("CheckpointsAndResumes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			dir := t.TempDir()
			env := map[string]string{"DEMO_STEPS": "10", "DEMO_STEP_MS": "1000", "IDLEGRID_CHECKPOINT_DIR": dir, "IDLEGRID_JOB_ID": "job_a"}
			out, errOut, err := runDemo(t, env, 3500*time.Millisecond)
			if !errors.Is(err, errDemoStopped) {
				t.Fatalf("stopped run: %v, want errDemoStopped", err)
			}
			if !strings.Contains(out, "demo workload: job job_a") || !strings.Contains(out, "step 3/10 loss=") || !strings.HasSuffix(out, "checkpoint saved: step 3\n") {
				t.Errorf("stopped run printed:\n%s", out)
			}
			if !strings.Contains(errOut, "received SIGTERM at step 3") {
				t.Errorf("stopped run's stderr: %q", errOut)
			}
			began := time.Now()
			out, _, err = runDemo(t, env, 0)
			if err != nil {
				t.Fatalf("resumed run: %v", err)
			}
			if took := time.Since(began); took != 7*time.Second {
				t.Errorf("resumed run took %v, want 7s for the 7 steps left", took)
			}
			if n := strings.Count(out, "idlegrid:checkpoint\n"); n != 7 {
				t.Errorf("resumed run said it checkpointed %d times, want once a step, 7:\n%s", n, out)
			}
			for _, want := range []string{"resuming from step 3, checkpointed in " + dir, "step 4/10", "idlegrid:progress=0.4000", "idlegrid:progress=1.0000", "training complete: 10 steps"} {
				if !strings.Contains(out, want) {
					t.Errorf("resumed run lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "step 3/10") {
				t.Errorf("resumed run redid step 3:\n%s", out)
			}
		})
	})
	t.Run("FailsHalfWay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, _, err := runDemo(t, map[string]string{"DEMO_STEPS": "10", "DEMO_FAIL_AT": "0.5", "IDLEGRID_CHECKPOINT_DIR": t.TempDir()}, 0)
			if err == nil || !strings.Contains(err.Error(), "step 5") {
				t.Errorf("got %v, want a failure at step 5", err)
			}
		})
	})
	t.Run("NoCheckpointDir", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			out, errOut, err := runDemo(t, map[string]string{"DEMO_STEPS": "3", "IDLEGRID_CHECKPOINT_DIR": filepath.Join(t.TempDir(), "none")}, 0)
			if err != nil || strings.Count(errOut, "cannot checkpoint") != 1 || strings.Contains(out, "idlegrid:checkpoint") {
				t.Errorf("got %v, stdout %q and stderr %q; want success, no checkpoint said and one note", err, out, errOut)
			}
		})
	})
	for _, tt := range []struct{ key, value string }{{"DEMO_STEPS", "many"}, {"DEMO_STEP_MS", "0"}, {"DEMO_FAIL_AT", "2"}} {
		t.Run("Bad"+tt.key, func(t *testing.T) {
			_, _, err := runDemo(t, map[string]string{tt.key: tt.value}, 0)
			if err == nil || !strings.Contains(err.Error(), tt.key) {
				t.Errorf("got %v, want an error naming %s", err, tt.key)
			}
		})
	}
}

// TestDevCommand_Docker runs the demo market with the docker runtime: its
// jobs run the demo workload in containers of the machine's engine.
func TestDevCommand_Docker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a whole market; skipped with -short")
	}
	cli := mustDocker(t)
	b := startMain(t, "dev", "--runtime", "docker", "--addr", "127.0.0.1:0", "--speed", "20", "--jobs-per-minute", "60")
	ref := b.waitForMatch(t, regexp.MustCompile(`(?m)^  runtime   docker at \S+: jobs run (idlegrid/dev-workload:[0-9a-f]+) in containers$`))
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	b.waitForMatch(t, regexp.MustCompile(`(job_\w+) \([^)]*\) succeeded, charged \$`))
	if b.stop(t) != 0 {
		t.Fatalf("dev exited non-zero:\n%s", b.err.String())
	}
	out := b.out.String()
	jobs := regexp.MustCompile(`(job_\w+) \([^)]*\) submitted`).FindAllStringSubmatch(out, -1)
	ctx := context.Background()
	for _, j := range jobs {
		left, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "idlegrid.job="+j[1]))})
		if err != nil || len(left) != 0 {
			t.Errorf("job %s left %d containers (%v), want none", j[1], len(left), err)
		}
		if _, err := cli.VolumeInspect(ctx, "idlegrid-ckpt-"+j[1]); err == nil {
			t.Errorf("job %s left its checkpoint volume after a temporary demo", j[1])
		}
	}
	if len(jobs) == 0 {
		t.Errorf("no job submitted:\n%s", out)
	}
}

func TestDevCommand_DockerUnreachable(t *testing.T) {
	sock := "unix://" + filepath.Join(t.TempDir(), "docker.sock")
	r := run(t, map[string]string{"DOCKER_HOST": sock}, "dev", "--runtime", "docker", "--addr", "127.0.0.1:0")
	if r.code != 1 || !strings.Contains(r.err, "idlegrid dev --runtime docker needs a Docker engine, and none answers at "+sock) ||
		!strings.Contains(r.err, "leave out --runtime docker") {
		t.Errorf("got %s, want a failure saying Docker is unreachable and what to do", r)
	}
	if r := run(t, nil, "dev", "--runtime", "podman"); r.code != 2 || !strings.Contains(r.err, "--runtime must be fake or docker") {
		t.Errorf("got %s, want a usage error", r)
	}
}
