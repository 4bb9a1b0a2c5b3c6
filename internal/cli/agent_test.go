package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/agent"
	gpuauto "github.com/idlegrid/idlegrid/internal/gpu/auto"
)

func TestLoadAgentConfig(t *testing.T) {
	const file = `# a gaming PC
name: garage-4090   # its name
region: eu-west
residency: EU
ask:
  floor: {silver: "0.40"}
`
	path := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("FlagsFillTheFile", func(t *testing.T) {
		cfg, err := loadAgentConfig(path, map[string]string{"server": "http://127.0.0.1:9", "data_dir": "/tmp/x", "fake_gpus": "2xRTX4090"})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Server != "http://127.0.0.1:9" || cfg.DataDir != "/tmp/x" || cfg.FakeGPUs != "2xRTX4090" || cfg.Name != "garage-4090" || cfg.Region != "eu-west" {
			t.Errorf("got %+v", cfg)
		}
	})
	t.Run("FlagsOverrideTheFile", func(t *testing.T) {
		p2 := filepath.Join(t.TempDir(), "agent.yaml")
		os.WriteFile(p2, []byte(file+"server: http://old:1\ndata_dir: /old\n"), 0o600)
		cfg, err := loadAgentConfig(p2, map[string]string{"server": "http://new:2"})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Server != "http://new:2" || cfg.DataDir != "/old" {
			t.Errorf("server %q, data dir %q; want http://new:2, /old", cfg.Server, cfg.DataDir)
		}
	})
	t.Run("MissingServer", func(t *testing.T) {
		_, err := loadAgentConfig(path, map[string]string{"data_dir": "/tmp/x"})
		if e, ok := err.(interface{ Unwrap() error }); !ok || idlegrid.ErrorCode(e.Unwrap()) != idlegrid.EINVALID || !strings.Contains(err.Error(), "server: required") {
			t.Errorf("got %v, want an invalid server", err)
		}
	})
	t.Run("UnknownKeyKeepsItsLine", func(t *testing.T) {
		p3 := filepath.Join(t.TempDir(), "agent.yaml")
		os.WriteFile(p3, []byte(file+"gpus: 2\n"), 0o600)
		_, err := loadAgentConfig(p3, map[string]string{"server": "http://a:1", "data_dir": "/x"})
		if err == nil || !strings.Contains(err.Error(), "gpus") || !strings.HasPrefix(err.Error(), p3+": ") {
			t.Errorf("got %v, want an error naming gpus in %s", err, p3)
		}
	})
	t.Run("MissingFile", func(t *testing.T) {
		r := run(t, nil, "agent", "--config", filepath.Join(t.TempDir(), "nope.yaml"))
		if r.code != 1 || !strings.Contains(r.err, "no such file") {
			t.Errorf("got %s", r)
		}
	})
	t.Run("NoConfig", func(t *testing.T) {
		r := run(t, nil, "agent")
		if r.code != 2 || !strings.HasPrefix(r.err, "idlegrid: --config is required") {
			t.Errorf("got %s", r)
		}
	})
}

// TestAgentCommand_secondOnOneDataDir: a second agent on the data dir of
// one that runs (a systemd service and a manual start, say) would be the
// same node; it exits at once saying why, and the first stays the node.
func TestAgentCommand_secondOnOneDataDir(t *testing.T) {
	ctx := context.Background()
	provider, cfgPath, _ := fakeAgentConfig(t, 2)
	startMain(t, "agent", "--config", cfgPath)
	eventually(t, "the first agent to join", func() error {
		if ns, err := provider.ListNodes(ctx, idlegrid.NodeFilter{}); err != nil || len(ns) != 1 {
			return fmt.Errorf("nodes %v, %v", ns, err)
		}
		return nil
	})

	r := runUntil(t, waitLimit, nil, "agent", "--config", cfgPath) // without the refusal it runs until then
	if r.code != 1 || !strings.Contains(r.err, "the data dir is in use by another agent") || !strings.Contains(r.err, "another 'idlegrid agent' running") {
		t.Fatalf("a second agent: %s\nwant exit 1, saying the data dir is in use and what to do", r)
	}
	if ns, err := provider.ListNodes(ctx, idlegrid.NodeFilter{}); err != nil || len(ns) != 1 {
		t.Errorf("nodes after the second agent: %d (%v), want the first one only", len(ns), err)
	}
}

// fakeAgentConfig starts a server and writes the config of an agent with
// a fake GPU that joins it with a token of a new provider's, good for
// uses joins; it returns the provider's client, the config's path and
// the agent's data dir.
func fakeAgentConfig(t *testing.T, uses int) (provider *client.Client, cfgPath, dataDir string) {
	t.Helper()
	url, adminKey := mustServer(t)
	_, _, providerKey, err := client.New(url, adminKey).CreateAccount(context.Background(), "provider", idlegrid.RoleProvider)
	if err != nil {
		t.Fatal(err)
	}
	provider = client.New(url, providerKey)
	_, token, err := provider.CreateJoinToken(context.Background(), "fleet", uses, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath, dataDir = mustCheckConfig(t, url, "fake_gpus: 1xT4\njoin_token: "+token+"\n")
	return provider, cfgPath, dataDir
}

// TestAgentCommand_refusedJoinToken: a join token the server refuses is
// the provider's to replace; the agent says how, not the CLI's advice
// about API keys.
func TestAgentCommand_refusedJoinToken(t *testing.T) {
	url, _ := mustServer(t)
	cfgPath, _ := mustCheckConfig(t, url, "fake_gpus: 1xT4\njoin_token: igj_notarealtoken\n")
	r := runUntil(t, waitLimit, nil, "agent", "--config", cfgPath)
	if r.code != 1 || !strings.Contains(r.err, "unknown join token") {
		t.Fatalf("got %s\nwant exit 1 saying the join token is unknown", r)
	}
	if !strings.Contains(r.err, "idlegrid token create") || !strings.Contains(r.err, "--join-token") {
		t.Errorf("got %s\nwant it to say how to make a new join token and give it", r)
	}
	if strings.Contains(r.err, "IDLEGRID_KEY") {
		t.Errorf("got %s\nwant no advice about API keys, which an agent does not use", r)
	}
}

// TestAgentCommand_noGPU: on a machine where no GPU can be seen, the agent
// says what to do, the fake GPUs for trying it out among it, and does not
// blame a busy server.
func TestAgentCommand_noGPU(t *testing.T) {
	if d, _, err := gpuauto.Detector(context.Background()); err == nil {
		if c, ok := d.(io.Closer); ok {
			c.Close()
		}
		t.Skip("this machine has a GPU the agent can see")
	}
	cfgPath, _ := mustCheckConfig(t, "http://127.0.0.1:1", "")
	r := runUntil(t, waitLimit, nil, "agent", "--config", cfgPath)
	if r.code != 1 || !strings.Contains(r.err, "cannot see any NVIDIA GPU") {
		t.Fatalf("got %s\nwant exit 1 saying no GPU is visible", r)
	}
	if !strings.Contains(r.err, "--fake-gpus") || !strings.Contains(r.err, "idlegrid agent --check --config "+cfgPath) {
		t.Errorf("got %s\nwant it to point to --check and to --fake-gpus", r)
	}
	if strings.Contains(r.err, "server is busy") {
		t.Errorf("got %s\nwant no word of the server, which was not asked", r)
	}
}

// TestAgentCommand_badFlag: a value the config's check refuses that came
// from a flag is a mistake in the command line, named as that flag; one
// from the file is the file's to mend.
func TestAgentCommand_badFlag(t *testing.T) {
	cfgPath, _ := mustCheckConfig(t, "http://127.0.0.1:1", "fake_gpus: 1xT4\n")
	for _, tt := range []struct {
		name string
		args []string
		want string // the first line of stderr
	}{
		{"Runtime", []string{"--runtime", "podman"}, `idlegrid: --runtime: must be docker or fake, got "podman"`},
		{"FakeGPUs", []string{"--fake-gpus", "3xFOO"}, `idlegrid: --fake-gpus: "3xFOO": unknown model "FOO"; known models: `},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, nil, append([]string{"agent", "--config", cfgPath}, tt.args...)...)
			if got := firstLines(r.err, 1); r.code != 2 || !strings.HasPrefix(got, tt.want) || strings.Contains(r.err, "fix the agent config") {
				t.Fatalf("got %s\nwant exit 2, stderr starting %q, and no word of the config", r, tt.want)
			}
		})
	}
	t.Run("Check", func(t *testing.T) { // --check's config line says the same
		r := run(t, nil, "agent", "--config", cfgPath, "--check", "--runtime", "podman")
		if r.code != 1 || !strings.Contains(r.out, `--runtime: must be docker or fake, got "podman"`) || !strings.Contains(r.out, "fix the flags named") ||
			strings.Contains(r.out, "fix the agent config") {
			t.Fatalf("got %s\nwant the config check failed naming --runtime, and no word of the config file", r)
		}
	})
	t.Run("InTheFile", func(t *testing.T) {
		path, _ := mustCheckConfig(t, "http://127.0.0.1:1", "fake_gpus: 1xT4\nruntime: podman\n")
		r := run(t, nil, "agent", "--config", path)
		if r.code != 1 || !strings.Contains(r.err, `runtime: must be docker or fake, got "podman"`) || !strings.Contains(r.err, "fix the agent config") {
			t.Fatalf("got %s\nwant exit 1, naming runtime in the config", r)
		}
	})
}

// TestAgentCommand_handOverAsk: 'idlegrid agent hand-over' asks only an
// agent that runs, and an ask the agent before left is dropped when the
// next one starts: it is for the agent running when it was made.
func TestAgentCommand_handOverAsk(t *testing.T) {
	ctx := context.Background()
	provider, cfgPath, dataDir := fakeAgentConfig(t, 1)
	if r := run(t, nil, "agent", "hand-over", "--config", cfgPath); r.code != 1 || !strings.Contains(r.err, "data dir") {
		t.Errorf("a hand-over asked before the agent ever ran: %s\nwant exit 1, saying the data dir is no agent's", r)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	ask := filepath.Join(dataDir, agent.HandOverAtStopFile)
	if err := agent.AskHandOverAtStop(dataDir, time.Now(), time.Hour); err != nil { // left by the agent before
		t.Fatal(err)
	}
	startMain(t, "agent", "--config", cfgPath)
	eventually(t, "the agent to join", func() error {
		if ns, err := provider.ListNodes(ctx, idlegrid.NodeFilter{}); err != nil || len(ns) != 1 {
			return fmt.Errorf("nodes %v, %v", ns, err)
		}
		return nil
	})
	if _, err := os.Stat(ask); !os.IsNotExist(err) {
		t.Errorf("the ask the agent before left is still there once the next one runs (%v): its stop would hand over", err)
	}
	if r := run(t, nil, "agent", "hand-over", "--config", cfgPath, "--within", "10m"); r.code != 0 || !strings.Contains(r.out, "hands its workloads over") {
		t.Errorf("a hand-over asked of the running agent: %s", r)
	}
	if ok, err := agent.TakeHandOverAtStop(dataDir, time.Now().Add(9*time.Minute)); !ok || err != nil {
		t.Errorf("the ask: %v, %v; want one that holds for the 10 minutes asked", ok, err)
	}
	run(t, nil, "agent", "hand-over", "--config", cfgPath)
	if r := run(t, nil, "agent", "hand-over", "--config", cfgPath, "--undo"); r.code != 0 || !strings.Contains(r.out, "withdrawn") {
		t.Errorf("an ask withdrawn: %s", r)
	}
	if _, err := os.Stat(ask); !os.IsNotExist(err) {
		t.Errorf("the ask is still there once withdrawn (%v): the agent's stop would hand over", err)
	}
	if r := run(t, nil, "agent", "hand-over", "--config", cfgPath, "--undo"); r.code != 0 || !strings.Contains(r.out, "no ask to withdraw") {
		t.Errorf("an ask withdrawn twice: %s", r)
	}
	if r := run(t, nil, "agent", "hand-over", "--data", filepath.Join(t.TempDir(), "none")); r.code != 1 || !strings.Contains(r.err, "--data") {
		t.Errorf("a hand-over asked of a data dir that does not exist: %s", r)
	}
}
