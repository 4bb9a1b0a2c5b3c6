package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/gpu"
	gpuauto "github.com/idlegrid/idlegrid/internal/gpu/auto"
	gpufake "github.com/idlegrid/idlegrid/internal/gpu/fake"
)

// initFlags are 'idlegrid agent init's choices.
type initFlags struct {
	path, server, dataDir, name, region, residency string
	windows, tz, fakeGPUs                          string
	ask                                            priceFlag
	whenIdle, force                                bool
	askGiven                                       bool // --ask was on the command line, whatever its value
}

// init writes a starter config for this machine, commented, that the
// agent loads as it is.
func (c *agentCommand) init(ctx context.Context, args []string) error {
	fs := c.env.flags("agent init", help{
		usage: "idlegrid agent init --region R --ask PRICE [--config agent.yaml] [--windows W] [--when-idle] [flags]",
		about: `Write a config for the agent on this machine: the server, the data dir, the
node's name, region and residency, when its GPUs are offered and its floor
price per tier, with every other setting there in comments. The GPUs found
are named at its top. The file works as written; read it through, then run
'idlegrid agent --check --config FILE' and start the agent.

--ask is the silver floor per GPU-hour; gold is 125% of it and bronze 60%
(edit the file to change them). 'idlegrid market' shows what GPUs clear
at, and 'idlegrid estimate --provider' what an ask would earn.

Windows: always, nights (22:00-08:00 every day), evenings (18:00-23:00
Mon-Fri), weekends, workdays (09:00-17:00 Mon-Fri), or DAYS/HH:MM-HH:MM
such as mon-fri/18:00-08:00, comma-separated, in --tz (default: the
region's usual zone).`,
		examples: `idlegrid agent init --region eu-west --ask 0.40 --windows nights,weekends --when-idle
		idlegrid agent init --region us-east --ask 1.80 --server https://market.example --data /var/lib/idlegrid
		idlegrid agent init --region eu-west --ask 0.40 --fake-gpus 2xRTX4090 --config try.yaml   # simulated GPUs, to try it out`,
	})
	var f initFlags
	fs.StringVar(&f.path, "config", "agent.yaml", "the file to write")
	fs.StringVar(&f.server, "server", "", "the market's server (default $IDLEGRID_ADDR or http://127.0.0.1:7070)")
	fs.StringVar(&f.dataDir, "data", "", "data dir for the node's key and state (default /var/lib/idlegrid as root, else ~/.local/share/idlegrid)")
	fs.StringVar(&f.name, "name", "", "the node's name (default this machine's host name)")
	fs.StringVar(&f.region, "region", "", "the node's region, e.g. eu-west (required)")
	fs.StringVar(&f.residency, "residency", "", "where renters' data is processed here, e.g. EU (default EU for eu-*, US for us-*)")
	fs.StringVar(&f.windows, "windows", "always", "when the GPUs are offered, e.g. nights,weekends")
	fs.StringVar(&f.tz, "tz", "", "the time zone the windows are read in, e.g. Europe/Berlin (default: the region's usual zone, else UTC)")
	fs.Var(&f.ask, "ask", "your silver floor per GPU-hour, e.g. 0.40 (required; gold 125%, bronze 60% of it)")
	fs.BoolVar(&f.whenIdle, "when-idle", false, "offer each GPU only while you are not using it, within the windows")
	fs.StringVar(&f.fakeGPUs, "fake-gpus", "", "simulated GPUs and workloads instead of this machine's, e.g. 2xRTX4090, to try idlegrid out")
	fs.BoolVar(&f.force, "force", false, "replace the file if it exists")
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	f.askGiven = flagsSet(fs)["ask"]
	s, err := c.starter(ctx, &f)
	if err != nil {
		return err
	}
	data, err := s.Config()
	if err != nil {
		return err
	}
	if err := writeNew(f.path, data, f.force); err != nil {
		return err
	}
	fmt.Fprintf(c.env.Out, "wrote %s for %s in %s (%s): %s\n", f.path, s.Name, s.Region, s.Residency, s.GPUs)
	fmt.Fprintf(c.env.Out, "next: read it through, then\n  idlegrid agent --check --config %s\n  IDLEGRID_JOIN_TOKEN=igj_… idlegrid agent --config %s   # a token from 'idlegrid token create'\n", f.path, f.path)
	return nil
}

// starter turns the flags, and what this machine has, into a Starter.
func (c *agentCommand) starter(ctx context.Context, f *initFlags) (agent.Starter, error) {
	if f.region == "" {
		return agent.Starter{}, usagef("--region is required, e.g. --region eu-west")
	} else if f.ask.m < 0 || f.ask.m == 0 && f.askGiven {
		return agent.Starter{}, usagef("--ask must be more than 0: your silver floor per GPU-hour, e.g. --ask 0.40")
	} else if f.ask.m == 0 {
		return agent.Starter{}, usagef("--ask is required: your silver floor per GPU-hour, e.g. --ask 0.40; 'idlegrid market' shows what GPUs clear at")
	}
	residency := f.residency
	if residency == "" {
		residency = usualResidency(f.region)
		if residency == "" {
			return agent.Starter{}, usagef("--residency is required for region %s: where renters' data is processed, e.g. SG or JP", f.region)
		}
	}
	tz := f.tz
	if tz == "" {
		tz = regionZones[f.region]
	}
	schedule, err := parseWindows(f.windows, tz)
	if err != nil {
		return agent.Starter{}, err
	}
	s := agent.Starter{
		Path: f.path, Server: firstNonEmpty(f.server, c.env.getenv("IDLEGRID_ADDR"), defaultAddr), DataDir: f.dataDir,
		Name: f.name, Region: f.region, Residency: residency, Schedule: schedule, FakeGPUs: f.fakeGPUs,
		Floors: map[idlegrid.Tier]idlegrid.Micros{},
	}
	for _, t := range idlegrid.Tiers {
		s.Floors[t] = tierFloor(f.ask.m, t)
	}
	if f.whenIdle {
		s.Mode = agent.ModeWhenIdle
	}
	if s.DataDir == "" {
		s.DataDir = defaultDataDir(c.env.getenv)
	}
	if s.Name == "" {
		s.Name = agent.DetectHost(os.TempDir()).Name
	}
	if s.GPUs, err = foundGPUs(ctx, f.fakeGPUs); err != nil && f.fakeGPUs != "" {
		if byFlag := c.env.flagsAtFault(err); byFlag != nil {
			return agent.Starter{}, byFlag
		}
		return agent.Starter{}, err
	} else if err != nil {
		s.GPUs = "none yet ('idlegrid agent --check' says what to fix)"
		fmt.Fprintf(c.env.Out, "note: no GPU is visible here yet: %v\n      the agent offers none until one is\n", err)
	}
	return s, nil
}

// usualResidency is the jurisdiction a region's name implies, or "".
func usualResidency(region string) string {
	switch {
	case strings.HasPrefix(region, "eu-"):
		return "EU"
	case strings.HasPrefix(region, "us-"):
		return "US"
	}
	return ""
}

// defaultDataDir is /var/lib/idlegrid for root, as the systemd unit in
// deploy/ runs it, and the user's own data directory otherwise.
func defaultDataDir(getenv func(string) string) string {
	if os.Geteuid() == 0 {
		return "/var/lib/idlegrid"
	}
	if d := getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "idlegrid")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "idlegrid")
	}
	return "idlegrid-data"
}

// foundGPUs says which GPUs the agent would offer, the fake ones or those
// the driver reports, or why it cannot see any.
func foundGPUs(ctx context.Context, fake string) (string, error) {
	if fake != "" {
		d, err := gpufake.Parse(fake, "")
		if err != nil {
			return "", err
		}
		devs, err := d.Detect(ctx)
		return describeGPUs(devs, "simulated (fake_gpus)"), err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, how, err := gpuauto.Detector(ctx)
	if err != nil {
		return "", err
	}
	if closer, ok := d.(io.Closer); ok {
		defer closer.Close()
	}
	devs, err := d.Detect(ctx)
	return describeGPUs(devs, "by "+how), err
}

// describeGPUs is "2x RTX4090 (24576 MB), by NVML, driver …": the
// devices, then how, which says how they were found.
func describeGPUs(devs []gpu.Device, how string) string {
	if len(devs) == 0 {
		return "none, " + how
	}
	var parts []string
	count := map[string]int{}
	for _, d := range devs {
		key := fmt.Sprintf("%s (%d MB)", d.Model, d.VRAMMB)
		if count[key] == 0 {
			parts = append(parts, key)
		}
		count[key]++
	}
	for i, p := range parts {
		parts[i] = fmt.Sprintf("%dx %s", count[p], p)
	}
	return strings.Join(parts, ", ") + ", " + how
}

// writeNew writes data to path, refusing to replace a file unless force;
// a replacement is whole or not at all. The mode is 0644: the config holds
// no secret (the join token belongs in the environment), and the systemd
// unit's dynamic user must read it.
func writeNew(path string, data []byte, force bool) error {
	if !force {
		if _, err := os.Stat(path); err == nil {
			return withHint(fmt.Errorf("%s exists", path), "give another --config, or --force to replace it")
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".agent-*.yaml")
	if errors.Is(err, os.ErrNotExist) {
		return withHint(fmt.Errorf("cannot write %s: the directory %s does not exist", path, dir), "make it first (mkdir -p "+dir+"), or give another --config")
	} else if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if force {
		return os.Rename(tmp.Name(), path)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, os.ErrExist) {
		return withHint(fmt.Errorf("%s exists", path), "give another --config, or --force to replace it")
	} else if err != nil {
		return err
	}
	return nil
}
