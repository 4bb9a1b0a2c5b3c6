package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"

	"github.com/idlegrid/idlegrid"
	idlegridclient "github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/registrytest"
	idlegriddocker "github.com/idlegrid/idlegrid/internal/runtime/docker"
)

// TestAgentCommand_DockerPrivateImage runs a job whose image is in a
// private registry, end to end: the renter keeps its login with 'idlegrid
// registry login', the server hands it to the node with the start, and
// 'idlegrid agent --runtime docker' pulls with it, and the job succeeds.
// Another renter's job naming the same image, now cached on the node, is
// refused it, as the renter's fault and not the node's.
func TestAgentCommand_DockerPrivateImage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a server, an agent, a registry and a container; skipped with -short")
	}
	cli := mustDocker(t)
	ctx := context.Background()
	reg := registrytest.New(t, "acme-bot", "pull-token-0123")
	ref := mustPrivateImage(t, cli, reg, "acme/workload:1")

	url, adminKey := mustServer(t)
	admin := idlegridclient.New(url, adminKey)
	renter, renterKey := fundedRenter(t, admin, url, "renter")
	stranger, _ := fundedRenter(t, admin, url, "stranger")
	agent := startAgentProcess(t, selfBinary(t), "agent", "--config", dockerAgentConfig(t, admin, url, reg.Host))
	defer func() {
		agent.cmd.Process.Signal(os.Interrupt)
		agent.cmd.Wait()
	}()

	login := runStdin(t, map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": renterKey}, reg.Login.Password+"\n",
		"registry", "login", reg.Host, "-u", reg.Login.Username, "--password-stdin")
	if login.code != 0 {
		t.Fatalf("registry login: %s", login)
	}
	spec := idlegrid.JobSpec{Name: "private", Kind: idlegrid.KindTraining, Image: ref, GPUs: 1, Nodes: 1, Tier: idlegrid.TierSilver,
		MaxPriceMicrosPerGPUHour: idlegrid.MicrosPerUnit, DurationSeconds: 300, Env: map[string]string{"DEMO_STEPS": "3", "DEMO_STEP_MS": "10"}}
	job, err := renter.SubmitJob(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, renter, job.ID, idlegrid.JobSucceeded)

	theirs, err := stranger.SubmitJob(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, stranger, theirs.ID, idlegrid.JobFailed)
	leases, err := stranger.ListLeases(ctx, idlegrid.LeaseFilter{JobID: theirs.ID})
	if err != nil || len(leases) != 1 {
		t.Fatalf("the stranger's leases: %+v, %v; want one", leases, err)
	}
	if l := leases[0]; l.Fault != idlegrid.FaultWorkload || !strings.Contains(l.Reason, "came to this node from a private registry") ||
		!strings.Contains(l.Reason, "idlegrid registry login "+reg.Host) {
		t.Errorf("the stranger's lease ended %s (%s): %q; want the workload's fault, saying how to add a login", l.State, l.Fault, l.Reason)
	}
}

// dockerAgentConfig writes the config of an agent on the Docker runtime
// with a fake T4, joining url with a token of a new provider's, that may
// pull from the local registries listed, and returns its path.
func dockerAgentConfig(t *testing.T, admin *idlegridclient.Client, url string, localRegistries ...string) string {
	t.Helper()
	_, _, providerKey, err := admin.CreateAccount(context.Background(), "provider", idlegrid.RoleProvider)
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := idlegridclient.New(url, providerKey).CreateJoinToken(context.Background(), "fleet", 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	config := "fake_gpus: 1xT4\nruntime: docker\njoin_token: " + token + "\ntelemetry_interval: 1s\n"
	if len(localRegistries) > 0 {
		config += "sandbox:\n  local_registries: [" + strings.Join(localRegistries, ", ") + "]\n"
	}
	path, _ := mustCheckConfig(t, url, config)
	return path
}

// selfBinary is the test binary under the name idlegrid, which runs Main
// (see TestMain), for commands run as processes of their own.
func selfBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "idlegrid")
	exe, _ := os.Executable()
	if err := os.Symlink(exe, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// fundedRenter is a renter account with money, and its key.
func fundedRenter(t *testing.T, admin *idlegridclient.Client, url, name string) (*idlegridclient.Client, string) {
	t.Helper()
	acct, _, key, err := admin.CreateAccount(context.Background(), name, idlegrid.RoleRenter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.TopUp(context.Background(), acct.ID, 100*idlegrid.MicrosPerUnit, "topup-"+acct.ID); err != nil {
		t.Fatal(err)
	}
	return idlegridclient.New(url, key), key
}

func waitJob(t *testing.T, c *idlegridclient.Client, id string, want idlegrid.JobState) {
	t.Helper()
	eventually(t, "job "+id+" to be "+string(want), func() error {
		j, err := c.FindJob(context.Background(), id)
		if err != nil || j.State != want {
			return fmt.Errorf("job: %+v, %v", j, err)
		}
		return nil
	})
}

// mustPrivateImage pushes an image of the demo workload, with an ID of its
// own (a pull with a login marks the image private on the node, which must
// not touch other tests' image), to reg as repo, and removes it from the
// node, so that only a pull brings it back. The image goes, mark and all,
// when the test ends.
func mustPrivateImage(t *testing.T, cli *client.Client, reg *registrytest.Registry, repo string) string {
	t.Helper()
	ctx := context.Background()
	base := mustSelfImage(t, cli, "idlegrid-test/agent-workload", "dev", "workload")
	built := fmt.Sprintf("idlegrid-test/private-workload:%d", time.Now().UnixNano())
	buildCtx, err := tarContext(fmt.Sprintf("FROM %s\nLABEL idlegrid.test=%q\n", base, built), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cli.ImageBuild(ctx, buildCtx, build.ImageBuildOptions{Tags: []string{built}, Remove: true})
	if err == nil {
		err = idlegriddocker.StreamError(res.Body)
		res.Body.Close()
	}
	if err != nil {
		t.Fatalf("build %s: %v", built, err)
	}
	img, err := cli.ImageInspect(ctx, built)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ImageRemove(context.Background(), img.ID, image.RemoveOptions{Force: true}) })
	ref := reg.Host + "/" + repo
	if err := cli.ImageTag(ctx, img.ID, ref); err != nil {
		t.Fatal(err)
	}
	auth, err := registry.EncodeAuthConfig(registry.AuthConfig{Username: reg.Login.Username, Password: reg.Login.Password, ServerAddress: reg.Host})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cli.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: auth})
	if err == nil {
		err = idlegriddocker.StreamError(rc)
		rc.Close()
	}
	if err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	for _, tag := range []string{ref, built} {
		if _, err := cli.ImageRemove(ctx, tag, image.RemoveOptions{}); err != nil {
			t.Fatalf("remove %s: %v", tag, err)
		}
	}
	return ref
}
