package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
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
	url, adminKey := mustServer(t)
	admin := client.New(url, adminKey)
	ctx := context.Background()
	_, _, providerKey, err := admin.CreateAccount(ctx, "provider", idlegrid.RoleProvider)
	if err != nil {
		t.Fatal(err)
	}
	provider := client.New(url, providerKey)
	_, token, err := provider.CreateJoinToken(ctx, "fleet", 2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath, _ := mustCheckConfig(t, url, "fake_gpus: 1xT4\njoin_token: "+token+"\n")
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
