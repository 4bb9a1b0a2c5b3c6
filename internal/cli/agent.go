package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// agentCommand is "idlegrid agent".
type agentCommand struct{ env *env }

func (c *agentCommand) Run(ctx context.Context, args []string) error {
	fs := c.env.flags("agent", help{
		usage: "idlegrid agent --config agent.yaml [--check [--json]] [--runtime docker|fake] [--server URL] [--join-token T] [--data DIR] [--fake-gpus 2xRTX4090]\n\tidlegrid agent init --region R --ask PRICE [flags]   (writes agent.yaml; see 'idlegrid agent init --help')\n\tidlegrid agent hand-over --config agent.yaml   (the running agent hands over at its next stop; see 'idlegrid agent hand-over --help')",
		about: `Run the provider agent on a machine with GPUs. On its first start it joins
the provider's fleet with a join token ('idlegrid token create') and keeps
its identity key and node ID in its data dir; later starts need no token.
It publishes the node's offer (GPUs, region, residency, schedule, floor
prices per tier), heartbeats, and runs the leases the server assigns.
It only dials out: the machine needs no open port.

The agent finds the machine's GPUs with NVML or nvidia-smi, or simulates
them with --fake-gpus. Workloads run in Docker containers (--runtime
docker, the default for real GPUs: only the leased GPUs, least privilege,
see deploy/README.md), or are simulated (--runtime fake, the default with
--fake-gpus). A restarted agent takes back the containers its node left
running. The config file is YAML: 'idlegrid agent init' writes one for
this machine, every setting explained in comments. Flags override the
file; the join token may also come from IDLEGRID_JOIN_TOKEN.
Ctrl-C stops the running leases and reports them before exiting; a lease
cut short by its node is the provider's fault, so its job is requeued and
the renter pays nothing for it. To upgrade the agent without stopping the
work, replace the binary and send the agent SIGUSR2 ('systemctl reload
idlegrid-agent' with the systemd unit in deploy/): it lets the workloads
being stopped exit and the inference requests in flight finish (its
models withdrawn from the offer meanwhile), leaves the rest running for
the next agent, sends what it holds, and exits with status 75 (the unit
restarts it on that status); the next agent takes the containers back,
and reads the config afresh. Start it within the server's missed
heartbeats (30 s by default). Where the agent cannot be signalled and
then replaced (a Kubernetes pod), 'idlegrid agent hand-over' asks it to
hand over at its next stop instead.

--check checks the machine and the config without starting the agent,
and says, line by line, what works and what to fix: the config, the GPU
driver and GPUs (and whether the node's policy offers each now), whether
the hardware challenges can run (CUDA and cuBLAS load and see every GPU),
the schedule, each model server (that it answers and lists its model, and
its queue depth from its metrics), Docker, the NVIDIA Container Toolkit
and whether GPUs reach containers, the server, the clock and the node's
identity. It exits 1 when a check fails. ('idlegrid agent gpu-probe' is what it runs inside a
container.)`,
		examples: `idlegrid agent init --region eu-west --ask 0.40 --windows nights,weekends   # writes agent.yaml
		idlegrid agent --check --config agent.yaml
		idlegrid agent --config agent.yaml --join-token igj_…
		idlegrid agent --config agent.yaml --server http://market.example:7070 --data /var/lib/idlegrid --fake-gpus 2xRTX4090`,
	})
	fs.subwords = []string{"init", "gpu-probe", "net-probe", "hand-over"}
	if len(args) > 0 && slices.Contains(fs.subwords, args[0]) {
		return c.runSubword(ctx, args[0], args[1:])
	}
	var (
		configPath string
		overrides  = map[string]*string{"server": new(string), "join_token": new(string), "data_dir": new(string), "fake_gpus": new(string), "runtime": new(string)}
	)
	fs.StringVar(&configPath, "config", "", "agent config file, YAML (required)")
	fs.StringVar(overrides["server"], "server", "", "server address, e.g. http://127.0.0.1:7070 (overrides server:)")
	fs.StringVar(overrides["join_token"], "join-token", "", "join token for the first start (overrides join_token: and IDLEGRID_JOIN_TOKEN)")
	fs.StringVar(overrides["data_dir"], "data", "", "data dir for the node's key and state (overrides data_dir:)")
	fs.StringVar(overrides["fake_gpus"], "fake-gpus", "", "simulated GPUs, e.g. 2xRTX4090 or 1xH100-80GB,4xT4 (overrides fake_gpus:)")
	fs.StringVar(overrides["runtime"], "runtime", "", "what runs workloads: docker or fake (overrides runtime:; default fake with fake GPUs, else docker)")
	check := fs.Bool("check", false, "check the machine and the config, say what to fix, and exit")
	asJSON := fs.Bool("json", false, "with --check: print the checks as JSON")
	fakeSpeed := fs.Float64("fake-speed", 0, "run simulated workloads this many times faster than real time (overrides fake_speed:)")
	var logs logFlags
	logs.define(fs)
	gcFloor := fs.Int("gc-floor-mib", 0, "keep the garbage collector's heap goal at least this many MiB (0: Go's default); on a node that serves models, e.g. 128 takes the collector's pauses out of most inference requests")
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	} else if configPath == "" {
		return usagef("--config is required: the agent's YAML config; 'idlegrid agent init --region R --ask PRICE' writes one for this machine")
	} else if err := checkGCFloor(*gcFloor); err != nil {
		return err
	}
	logger, err := logs.newLogger(c.env.Err)
	if err != nil {
		return err
	}

	cfg, err := c.config(configPath, overrides, *fakeSpeed)
	if *check {
		return c.runCheck(ctx, configPath, cfg, err, *asJSON)
	} else if *asJSON {
		return usagef("--json goes with --check")
	} else if byFlag := c.env.flagsAtFault(err); byFlag != nil {
		return byFlag
	} else if err != nil {
		return withHint(err, "fix the agent config; 'idlegrid agent init' writes a commented one for this machine")
	}
	defer startGCFloor(ctx, *gcFloor)()
	return c.serve(ctx, configPath, cfg, logger)
}

// runSubword runs "idlegrid agent init", "gpu-probe", "net-probe" or
// "hand-over".
func (c *agentCommand) runSubword(ctx context.Context, word string, args []string) error {
	switch word {
	case "gpu-probe":
		if wantsHelp(args) {
			return c.env.flags("agent gpu-probe", gpuProbeHelp).helpOnly()
		}
		return printJSON(c.env.Out, probeGPUs(ctx))
	case "net-probe":
		if wantsHelp(args) {
			return c.env.flags("agent net-probe", netProbeHelp).helpOnly()
		} else if len(args) == 0 {
			return usagef("agent net-probe takes the addresses to try, e.g. idlegrid agent net-probe 169.254.169.254:80")
		}
		return printJSON(c.env.Out, probeNet(ctx, args))
	case "hand-over":
		return c.handOver(args)
	default: // "init"
		return c.init(ctx, args)
	}
}

// config reads the agent config at configPath with the flags that
// override it (overrides, by YAML key; fakeSpeed when not 0), and the
// environment's.
func (c *agentCommand) config(configPath string, overrides map[string]*string, fakeSpeed float64) (*agent.Config, error) {
	set := map[string]string{}
	for k, v := range overrides {
		if *v != "" && k != "join_token" {
			set[k] = *v
		}
	}
	cfg, err := loadAgentConfig(configPath, set)
	if err != nil {
		return cfg, err
	}
	cfg.ApplyEnv(c.env.getenv)
	if t := *overrides["join_token"]; t != "" {
		cfg.JoinToken = t
	}
	if fakeSpeed != 0 {
		cfg.FakeSpeed = fakeSpeed
	}
	return cfg, nil
}

// serve runs the agent the config describes until ctx is done, or it
// hands its workloads over (SIGUSR2, or the stop 'idlegrid agent
// hand-over' asked it to hand over at: the exit status ExitHandedOver).
func (c *agentCommand) serve(ctx context.Context, configPath string, cfg *agent.Config, logger *slog.Logger) error {
	lock, err := agent.LockDataDir(cfg.DataDir)
	if errors.Is(err, agent.ErrDataDirInUse) {
		return withHint(err, "is another 'idlegrid agent' running with this data dir (a systemd service, say)? Stop it; each node needs a --data dir of its own")
	} else if err != nil {
		return err
	}
	defer lock.Release()
	dropHandOverAsk(cfg.DataDir, logger)
	key, err := nodekey.LoadOrCreate(cfg.KeyPath())
	if err != nil {
		return err
	}
	det, detected, err := cfg.OpenDetector(ctx, key)
	if err != nil && ctx.Err() == nil {
		return withHint(err, "'idlegrid agent --check --config "+configPath+"' says what to fix; to try idlegrid on a machine without GPUs, give --fake-gpus 2xRTX4090")
	} else if err != nil {
		return err
	}
	if closer, ok := det.(io.Closer); ok { // a real detector holds the driver open
		defer closer.Close()
	}
	rt, err := openRuntime(ctx, cfg, key, c.env.getenv, logger)
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Options{
		Config: cfg, Server: client.NewAgent(cfg.Server, key), Detector: det, Runtime: rt.Runtime,
		Logger: logger, Version: versionString(), Key: key,
	})
	if err != nil {
		return errors.Join(err, rt.Close())
	}
	defer handOverOnSignal(a, cfg.RuntimeName(), logger)()
	fmt.Fprintf(c.env.Out, "idlegrid agent: GPUs from %s; workloads in %s; serving %s (data in %s); Ctrl-C to stop\n", detected, rt.about, cfg.Server, cfg.DataDir)
	warnAgentSetup(cfg, logger)
	st, _ := agent.ReadState(cfg.DataDir) // nil: Run joins with the join token
	runCtx, stopWatch := stopOrHandOver(ctx, a, cfg.DataDir, logger)
	err = a.Run(runCtx)
	stopWatch()
	if st == nil && idlegrid.ErrorCode(err) == idlegrid.EUNAUTHORIZED {
		err = withHint(err, "as the provider, make a new join token ('idlegrid token create --name NAME'; 'idlegrid token ls' shows yours) and give it with --join-token or "+agent.EnvJoinToken)
	}
	if errors.Is(err, agent.ErrHandedOver) {
		if err := rt.Close(); err != nil {
			logger.Warn("closing the runtime after the hand-over", "err", err)
		}
		return &exitStatus{code: ExitHandedOver}
	}
	return errors.Join(err, rt.Close())
}

// warnAgentSetup warns of a setup that works but is likely a mistake.
func warnAgentSetup(cfg *agent.Config, logger *slog.Logger) {
	if plainBeyondLoopback(cfg.Server) {
		logger.Warn("the server is plain HTTP on another machine: the join token and the renters' traffic to your node cross the network in the clear; use its https:// address", "server", cfg.Server)
	}
	if cfg.RuntimeName() == agent.RuntimeFake && cfg.FakeGPUs == "" {
		logger.Warn("the node offers real GPUs but simulates its workloads (runtime: fake); renters' jobs will not really run")
	}
}

// loadAgentConfig reads the agent config at path with the top-level keys in
// set replaced, then parses and validates it as the agent does.
func loadAgentConfig(path string, set map[string]string) (*agent.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(set) > 0 {
		// A file that does not parse keeps its own error, with its own lines.
		if patched, err := setYAMLKeys(data, set); err == nil {
			data = patched
		}
	}
	cfg, err := agent.ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// setYAMLKeys sets top-level keys of a YAML mapping document to string
// values, keeping the rest of the document (and its comments) as it is.
func setYAMLKeys(data []byte, set map[string]string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil, errors.New("not a mapping")
	}
	for _, k := range sortedKeys(set) {
		value := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: set[k]}
		replaced := false
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == k {
				m.Content[i+1] = value
				replaced = true
			}
		}
		if !replaced {
			m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, value)
		}
	}
	return yaml.Marshal(&doc)
}
