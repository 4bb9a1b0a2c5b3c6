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
	"github.com/idlegrid/idlegrid/internal/agent"
)

// TestAgentInit: the config 'agent init' writes is one a real agent joins
// the market with, offering what init was told; it is not written over
// without --force, and what init needs is asked for by name.
func TestAgentInit(t *testing.T) {
	url, adminKey := mustServer(t)
	ctx := context.Background()
	_, _, providerKey, err := client.New(url, adminKey).CreateAccount(ctx, "provider", idlegrid.RoleProvider)
	mustOK(t, err)
	provider := client.New(url, providerKey)
	_, token, err := provider.CreateJoinToken(ctx, "fleet", 1, time.Hour)
	mustOK(t, err)

	dir := t.TempDir()
	path := filepath.Join(dir, "agent.yaml")
	args := []string{"agent", "init", "--config", path, "--server", url, "--data", filepath.Join(dir, "data"), "--name", "attic-rig",
		"--region", "eu-north", "--ask", "0.40", "--windows", "nights,weekends", "--tz", "Europe/Oslo", "--fake-gpus", "2xRTX4090"}
	r := run(t, nil, args...)
	if r.code != 0 || !strings.Contains(r.out, "wrote "+path+" for attic-rig in eu-north (EU): 2x RTX4090") {
		t.Fatalf("agent init: %s", r)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("the config: %v, %v; want mode 0644, for the systemd unit's dynamic user", fi, err)
	}
	written, err := os.ReadFile(path)
	mustOK(t, err)

	startMain(t, "agent", "--config", path, "--join-token", token)
	var node idlegrid.Node
	eventually(t, "the agent to join with the config init wrote", func() error {
		ns, err := provider.ListNodes(ctx, idlegrid.NodeFilter{})
		if err != nil || len(ns) != 1 || ns[0].State != idlegrid.NodeOnline {
			return fmt.Errorf("nodes %v, %v", ns, err)
		}
		node = *ns[0]
		return nil
	})
	want := map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierGold: 500_000, idlegrid.TierSilver: 400_000, idlegrid.TierBronze: 240_000}
	if node.Name != "attic-rig" || node.Region != "eu-north" || node.Residency != "EU" || len(node.GPUs) != 2 ||
		node.Schedule.Mode != idlegrid.ScheduleWindows || node.Schedule.TimeZone != "Europe/Oslo" || len(node.Schedule.Weekly) != 2 ||
		fmt.Sprint(node.Ask.FloorMicrosPerGPUHour) != fmt.Sprint(want) {
		t.Errorf("the node offers %+v\nwant attic-rig in eu-north (EU), 2 GPUs, nights and weekends in Europe/Oslo, floors %v", node.Offer, want)
	}

	r = run(t, nil, args...)
	if r.code != 1 || !strings.Contains(r.err, path+" exists") || !strings.Contains(r.err, "--force") {
		t.Errorf("agent init over an existing config: %s, want it refused with the way round it", r)
	}
	if now, err := os.ReadFile(path); err != nil || string(now) != string(written) {
		t.Errorf("the refused init changed the config")
	}
	if r = run(t, nil, append(args, "--force", "--when-idle")...); r.code != 0 {
		t.Fatalf("agent init --force: %s", r)
	}
	if cfg, err := agent.LoadConfig(path); err != nil || cfg.Mode != agent.ModeWhenIdle {
		t.Errorf("after init --force --when-idle: %+v, %v; want the config replaced, in when-idle mode", cfg, err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--ask", "0.40"}, "--region is required"},
		{[]string{"--region", "eu-west"}, "--ask is required"},
		{[]string{"--region", "eu-west", "--ask", "-0.40"}, "--ask must be more than 0: your silver floor"},
		{[]string{"--region", "eu-west", "--ask", "0"}, "--ask must be more than 0: your silver floor"},
		{[]string{"--region", "ap-south", "--ask", "0.40"}, "--residency is required for region ap-south"},
		{[]string{"--region", "eu-west", "--ask", "0.40", "--windows", "sometimes"}, `unknown window "sometimes"`},
		{[]string{"--region", "eu-west", "--ask", "0.40", "--fake-gpus", "2xNOPE"}, `--fake-gpus: "2xNOPE": unknown model "NOPE"`},
	} {
		// Each is a mistake in the command line, named as the flag.
		r := run(t, nil, append([]string{"agent", "init", "--config", filepath.Join(dir, "other.yaml")}, tt.args...)...)
		if r.code != 2 || !strings.Contains(r.err, tt.want) {
			t.Errorf("agent init %v: %s, want exit 2 and an error saying %q", tt.args, r, tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "other.yaml")); err == nil {
		t.Errorf("a refused init left a config behind")
	}
	missing := filepath.Join(dir, "etc", "idlegrid")
	r = run(t, nil, "agent", "init", "--config", filepath.Join(missing, "agent.yaml"), "--region", "eu-west", "--ask", "0.40", "--fake-gpus", "1xT4")
	if r.code != 1 || !strings.Contains(r.err, "the directory "+missing+" does not exist") || !strings.Contains(r.err, "mkdir -p "+missing) {
		t.Errorf("agent init into a missing directory: %s, want it named, with how to make it", r)
	}
}
