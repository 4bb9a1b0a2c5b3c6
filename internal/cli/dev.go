package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/agent"
	gpufake "github.com/idlegrid/idlegrid/internal/gpu/fake"
	"github.com/idlegrid/idlegrid/internal/infersim"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/runtime"
	runtimefake "github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// devCommand is "idlegrid dev": a whole market on one machine.
type devCommand struct{ env *env }

// Defaults of the demo market.
const (
	devRenterFunds   = 10_000 * idlegrid.MicrosPerUnit
	devGiveUpAfter   = 3 * time.Minute // the demo renter cancels jobs queued this long
	devRefresh       = 2 * time.Second
	devFinalTimeout  = 10 * time.Second
	devStateFile     = "dev.json"
	devAdminKeyFile  = "admin.key"
	devRenterKeyFile = "renter.key"
)

func (c *devCommand) Run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "workload" { // in a container of the demo market
		if wantsHelp(args[1:]) {
			return c.env.flags("dev workload", devWorkloadHelp).helpOnly()
		}
		return (&devWorkload{out: c.env.Out, errOut: c.env.Err, getenv: c.env.getenv}).run(ctx)
	}
	fs := c.env.flags("dev", help{
		usage: "idlegrid dev [--addr 127.0.0.1:7070] [--data DIR] [--speed N] [--jobs-per-minute N] [--runtime fake|docker]",
		about: `Run a whole market on this machine: a server with a SQLite database,
four providers with eight simulated nodes (H100, A100, L40S, RTX 4090,
RTX 3090 and T4 GPUs in five regions, some always on and some only in
their owners' off hours) running the real agent over real HTTP, and a demo
renter submitting training, fine-tuning, eval and batch-inference jobs in
all three tiers, a few of which no node can take. It shows a live summary:
jobs by state, GPUs busy, renter spend, provider earnings, platform fees,
and the latest placements and charges.

The admin's API key is written to DIR/admin.key and the demo renter's to
DIR/renter.key, so the CLI can be used from another terminal. Without
--data, DIR is a temporary directory removed on exit; with --data, a later
run carries on with the same accounts, nodes and jobs. Ctrl-C stops the
renter, then the agents (a lease cut short by its node's shutdown is the
provider's fault: the renter pays nothing for it and the job is requeued),
then the server, and prints a final summary; so does closing the
terminal (a hangup), or a SIGTERM.

With --runtime docker the agents run every job in a Docker container of the
local engine, sandboxed as on a real node: a demo workload (the idlegrid
binary itself, as 'idlegrid dev workload', in an image FROM scratch built
at startup) that trains for the job's duration, reports progress, and
checkpoints to a volume, so a preempted or requeued job resumes where it
stopped. The simulated GPUs reach no container. The default runtime, fake,
simulates the workloads and needs nothing.`,
		examples: `idlegrid dev
		idlegrid dev --data ./devdata --jobs-per-minute 20
		idlegrid dev --addr 127.0.0.1:0 --speed 4
		idlegrid dev --runtime docker --speed 10`,
	})
	addr := fs.String("addr", "127.0.0.1:7070", "address for the API; port 0 picks a free one")
	dataDir := fs.String("data", "", "directory for the database, keys and logs, kept on exit (default: a temporary one, removed)")
	speed := fs.Float64("speed", 1, "simulated workloads run this many times faster than real time")
	perMinute := fs.Float64("jobs-per-minute", 8, "how many jobs the demo renter submits a minute, on average")
	feeBPS := fs.Int64("fee-bps", 1000, "platform fee in basis points of each charge")
	runtimeName := fs.String("runtime", agent.RuntimeFake, "what runs the jobs: fake (simulated) or docker (containers of the demo workload, on the local Docker engine)")
	gcFloor := gcFloorFlag(fs)
	args, err := fs.parse(args)
	if err != nil {
		return err
	} else if err := fs.wantArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	} else if err := checkGCFloor(*gcFloor); err != nil {
		return err
	} else if *speed <= 0 || *speed > 1000 {
		return usagef("--speed must be above 0 and at most 1000, got %g", *speed)
	} else if *perMinute <= 0 || *perMinute > 600 {
		return usagef("--jobs-per-minute must be above 0 and at most 600, got %g", *perMinute)
	} else if *feeBPS < 0 || *feeBPS > 10000 {
		return usagef("--fee-bps must be between 0 and 10000, got %d", *feeBPS)
	} else if *runtimeName != agent.RuntimeFake && *runtimeName != agent.RuntimeDocker {
		return usagef("--runtime must be fake or docker, got %q", *runtimeName)
	}
	addrSet := false
	fs.Visit(func(f *flag.Flag) { addrSet = addrSet || f.Name == "addr" })
	defer startGCFloor(ctx, *gcFloor)()

	d := &devMarket{env: c.env, dir: *dataDir, speed: *speed, perMinute: *perMinute, runtime: *runtimeName}
	if d.dir == "" {
		if d.dir, err = os.MkdirTemp("", "idlegrid-dev-"); err != nil {
			return err
		}
		d.temporary = true
		defer os.RemoveAll(d.dir)
	} else if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return err
	}
	return d.run(ctx, *addr, addrSet, *feeBPS)
}

// devMarket is one run of "idlegrid dev". run owns every goroutine it
// starts: the server's, one per agent, the renter's; all end before it
// returns.
type devMarket struct {
	env       *env
	dir       string
	temporary bool
	speed     float64
	perMinute float64
	runtime   string     // agent.RuntimeFake or agent.RuntimeDocker
	docker    *devDocker // the engine and the demo image, with the docker runtime

	log   *slog.Logger
	state devState
	watch *marketWatch
}

// devHeartbeat is how often the demo agents heartbeat at a speed, and how
// many heartbeats a node may miss. Leases run speed times faster, so the
// agents report progress and checkpoints that much more often, down to
// once a second, while a node is still lost only after 30 s of silence, as
// at the server's defaults.
func devHeartbeat(speed float64) (time.Duration, int) {
	const every, lostAfter = 10 * time.Second, 30 * time.Second
	hb := min(every, max(time.Second, time.Duration(float64(every)/speed).Truncate(time.Second)))
	return hb, int(lostAfter / hb)
}

// devState is what a reused data dir remembers about the demo market.
type devState struct {
	Addr      string                `json:"addr"`
	Renter    devAccount            `json:"renter"`
	Providers map[string]devAccount `json:"providers"`
}

type devAccount struct {
	ID        string `json:"id"`
	Key       string `json:"key"`
	JoinToken string `json:"join_token,omitempty"`
}

func (d *devMarket) path(name string) string { return filepath.Join(d.dir, name) }

func (d *devMarket) run(ctx context.Context, addr string, addrSet bool, feeBPS int64) (err error) {
	logFile, err := os.OpenFile(d.path("idlegrid.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	d.log = slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))

	reused, err := d.loadState()
	if err != nil {
		return err
	}
	if d.runtime == agent.RuntimeDocker {
		if d.docker, err = openDevDocker(ctx, d.env.getenv); err != nil {
			return quietCancel(ctx, err)
		}
		defer func() { err = errors.Join(err, d.docker.close(d.temporary)) }()
	}
	if reused && !addrSet && d.state.Addr != "" {
		addr = d.state.Addr // the nodes joined that address; keep it
	}
	hb, missed := devHeartbeat(d.speed)
	rs, err := startServer(ctx, serveConfig{
		listen: addr, listenFlag: "--addr", dsn: d.path("idlegrid.db"), feeBPS: feeBPS,
		adminKeyFile: d.path(devAdminKeyFile), logger: d.log, trustPolicy: devTrustPolicy(),
		auditKeyFile: d.path("audit.key"), meterJournal: d.path("meter-journal"),
		heartbeat: hb, missedHeartbeats: missed,
		authFailuresPerMinute: -1, // one person on loopback, trying keys out: no pacing
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, rs.stop()) }()

	adminKey, err := d.adminKey(rs)
	if err != nil {
		return err
	}
	admin := client.New(rs.url, adminKey)
	if err := d.seed(ctx, admin, rs.url); err != nil {
		return quietCancel(ctx, err)
	}
	d.watch = newMarketWatch(admin)
	d.watch.prime(ctx)
	d.printHeader(rs.url)

	// The agents run until ctx ends, or until one fails to start: then
	// those started before it stop, rather than wait for the user's Ctrl-C.
	agentsCtx, stopAgents := context.WithCancel(ctx)
	defer stopAgents()
	var wg sync.WaitGroup
	if err := d.startAgents(agentsCtx, &wg, rs.url); err != nil {
		stopAgents()
		wg.Wait()
		return quietCancel(ctx, err)
	}
	renter := &submitter{
		renter: client.New(rs.url, d.state.Renter.Key), jobsPerMinute: d.perMinute, giveUpAfter: devGiveUpAfter,
		rand: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x1d1e)), report: d.watch.note,
	}
	if d.docker != nil {
		renter.image, renter.speed = d.docker.image, d.speed
	}
	wg.Go(func() { renter.run(ctx) })
	caller := &devCaller{url: rs.url, key: d.state.Renter.Key, every: devCallEvery, report: d.watch.note, nodeName: d.watch.nodeName,
		rand: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0xca11)), http: &http.Client{Timeout: time.Minute}}
	wg.Go(func() { caller.run(ctx) })

	d.show(ctx, rs.url)

	fmt.Fprintln(d.env.Err, "\nidlegrid dev: stopping the renter, the agents and the server")
	wg.Wait()
	d.printFinal()
	return nil
}

// quietCancel drops an error caused by the user stopping the demo early.
func quietCancel(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// adminKey is the admin's API key: the one this start bootstrapped, or the
// one a reused data dir kept.
func (d *devMarket) adminKey(rs *runningServer) (string, error) {
	if rs.adminKey != "" {
		return rs.adminKey, nil
	}
	b, err := os.ReadFile(d.path(devAdminKeyFile))
	if err != nil {
		return "", withHint(fmt.Errorf("the database in %s has an admin but %s is unreadable: %w", d.dir, devAdminKeyFile, err),
			"use a fresh --data directory")
	}
	return strings.TrimSpace(string(b)), nil
}

func (d *devMarket) loadState() (bool, error) {
	b, err := os.ReadFile(d.path(devStateFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, &d.state); err != nil {
		return false, withHint(fmt.Errorf("%s is corrupt: %w", d.path(devStateFile), err), "use a fresh --data directory")
	}
	return true, nil
}

func (d *devMarket) saveState() error {
	b, err := json.MarshalIndent(d.state, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(d.path(devStateFile), append(b, '\n'), 0o600)
}

// seed creates, on a fresh data dir, the providers with their join tokens
// and the demo renter with its funds; a reused one has them already.
func (d *devMarket) seed(ctx context.Context, admin *client.Client, url string) error {
	d.state.Addr = strings.TrimPrefix(url, "http://")
	if d.state.Providers == nil {
		d.state.Providers = map[string]devAccount{}
	}
	for _, p := range devFleet {
		if _, ok := d.state.Providers[p.name]; ok {
			continue
		}
		// Once per data dir, whatever stops it before the state is saved:
		// a rerun is answered with the same account, and a new key.
		a, _, key, _, err := admin.CreateAccountOnce(ctx, p.name, idlegrid.RoleProvider, "dev-seed-provider-"+p.name)
		if err != nil {
			return fmt.Errorf("create provider %s: %w", p.name, err)
		}
		_, token, err := client.New(url, key).CreateJoinToken(ctx, p.name+"-fleet", len(p.nodes), 24*time.Hour)
		if err != nil {
			return fmt.Errorf("create join token for %s: %w", p.name, err)
		}
		d.state.Providers[p.name] = devAccount{ID: a.ID, Key: key, JoinToken: token}
	}
	if d.state.Renter.ID == "" {
		a, _, key, _, err := admin.CreateAccountOnce(ctx, "demo-renter", idlegrid.RoleRenter, "dev-seed-renter")
		if err != nil {
			return fmt.Errorf("create the demo renter: %w", err)
		}
		if _, err := admin.TopUp(ctx, a.ID, devRenterFunds, "dev-initial-topup-"+a.ID); err != nil {
			return fmt.Errorf("fund the demo renter: %w", err)
		}
		d.state.Renter = devAccount{ID: a.ID, Key: key}
	}
	if err := os.WriteFile(d.path(devRenterKeyFile), []byte(d.state.Renter.Key+"\n"), 0o600); err != nil {
		return err
	}
	return d.saveState()
}

// startAgents starts one agent per node of the fleet, each with its own
// data dir, identity key, fake GPUs and fake runtime, talking to the
// server over HTTP like any other agent. Each goroutine ends when ctx does.
func (d *devMarket) startAgents(ctx context.Context, wg *sync.WaitGroup, url string) error {
	for _, p := range devFleet {
		token := d.state.Providers[p.name].JoinToken
		for _, n := range p.nodes {
			models, stopModels, err := serveDevModels(n)
			if err != nil {
				return fmt.Errorf("node %s: %w", n.name, err)
			}
			a, rt, err := d.newAgent(ctx, n, url, token, models)
			if err != nil {
				stopModels()
				return fmt.Errorf("node %s: %w", n.name, err)
			}
			wg.Go(func() {
				defer stopModels()
				defer rt.Close()
				if err := a.Run(ctx); err != nil {
					d.watch.note(fmt.Sprintf("agent of %s stopped: %s", n.name, errorText(err)))
				}
			})
		}
	}
	return nil
}

// servingNodes counts the fleet's nodes that serve the demo model.
func servingNodes() int {
	n := 0
	for _, p := range devFleet {
		for _, nd := range p.nodes {
			if nd.serves != nil {
				n++
			}
		}
	}
	return n
}

// serveDevModels starts the simulated model server of a node that serves
// the demo model, and returns the agent's config of it and how to stop it.
func serveDevModels(n devNode) ([]agent.ModelConfig, func(), error) {
	if n.serves == nil {
		return nil, func() {}, nil
	}
	ms, err := infersim.StartModelServer(n.serves.gpu, []string{devModelName}, idlegrid.SystemClock{})
	if err != nil {
		return nil, nil, err
	}
	// The agent reads the simulated server's metrics (vLLM's gauges) at
	// the default /metrics, as it would a real vLLM's.
	return []agent.ModelConfig{{Name: devModelName, Upstream: ms.URL(), InputPrice: n.serves.inputPrice,
		OutputPrice: n.serves.outputPrice, MaxConcurrency: n.serves.concurrency}}, ms.Close, nil
}

func (d *devMarket) newAgent(ctx context.Context, n devNode, url, token string, models []agent.ModelConfig) (*agent.Agent, runtime.Runtime, error) {
	cfg := n.agentConfig(url, token, filepath.Join(d.dir, "nodes", n.name), d.speed)
	cfg.Models = models
	key, err := nodekey.LoadOrCreate(cfg.KeyPath())
	if err != nil {
		return nil, nil, err
	}
	det, err := cfg.Detector(key)
	if err != nil {
		return nil, nil, err
	}
	var rt runtime.Runtime = &runtimefake.Runtime{Speed: d.speed}
	if d.docker != nil {
		cfg.Runtime = agent.RuntimeDocker
		if rt, err = d.docker.runtime(ctx, key, d.log.With("agent", n.name)); err != nil {
			return nil, nil, err
		}
	}
	a, err := agent.New(agent.Options{
		Config: cfg, Server: client.NewAgent(url, key), Detector: det, Runtime: rt,
		Logger: d.log.With("agent", n.name), Version: versionString(), Key: key,
		Host: &agent.Host{Name: n.name, CPUCores: n.cpuCores, RAMMB: n.ramMB, DiskGB: n.diskGB},
	})
	if err != nil {
		return nil, nil, errors.Join(err, rt.Close())
	}
	return a, rt, nil
}

func (d *devMarket) printHeader(url string) {
	w := d.env.Out
	nodes, gpus := 0, 0
	for _, p := range devFleet {
		for _, n := range p.nodes {
			nodes++
			gpus += gpuCount(n.gpus)
		}
	}
	kept := "kept on exit"
	if d.temporary {
		kept = "removed on exit; keep it with --data DIR"
	}
	fmt.Fprintf(w, "idlegrid dev: a GPU market on this machine\n")
	fmt.Fprintf(w, "  API       %s\n", url)
	fmt.Fprintf(w, "  dashboard %s/ (sign in with the key in admin.key or renter.key)\n", url)
	fmt.Fprintf(w, "  data      %s (%s)\n", d.dir, kept)
	fmt.Fprintf(w, "  logs      %s\n", d.path("idlegrid.log"))
	fmt.Fprintf(w, "  fleet     %d providers, %d nodes, %d GPUs; demo renter %s funded with %s\n",
		len(devFleet), nodes, gpus, d.state.Renter.ID, devRenterFunds)
	fmt.Fprintf(w, "  inference %s on %d nodes, from simulated model servers, through the OpenAI-compatible %s/v1/\n",
		devModelName, servingNodes(), url)
	if d.docker != nil {
		fmt.Fprintf(w, "  runtime   docker at %s: jobs run %s in containers\n\n", d.docker.cli.DaemonHost(), d.docker.image)
	} else {
		fmt.Fprintf(w, "  runtime   fake: jobs are simulated (--runtime docker runs them in containers)\n\n")
	}
	fmt.Fprintf(w, "Use the CLI from another terminal, as the admin:\n")
	fmt.Fprintf(w, "  export IDLEGRID_ADDR=%s IDLEGRID_KEY=$(cat %s)\n", url, d.path(devAdminKeyFile))
	fmt.Fprintf(w, "  idlegrid job ls; idlegrid node ls; idlegrid account ls\n")
	fmt.Fprintf(w, "or as the demo renter, to submit jobs:\n")
	fmt.Fprintf(w, "  export IDLEGRID_ADDR=%s IDLEGRID_KEY=$(cat %s)\n", url, d.path(devRenterKeyFile))
	fmt.Fprintf(w, "  idlegrid job submit --image python:3.12 --gpus 1 --tier silver --max-price 1.00 --duration 1m\n\n")
}

// gpuCount counts the GPUs in a fake GPU spec such as "4xH100-80GB".
func gpuCount(spec string) int {
	det, err := gpufake.Parse(spec, "")
	if err != nil {
		return 0
	}
	gpus, _ := det.Detect(context.Background())
	return len(gpus)
}

// show refreshes the live summary until ctx is done.
func (d *devMarket) show(ctx context.Context, url string) {
	scr := newScreen(d.env.Out)
	header := "idlegrid dev at " + url + " (Ctrl-C to stop)"
	ticker := time.NewTicker(devRefresh)
	defer ticker.Stop()
	for {
		sum, err := d.watch.look(ctx)
		if ctx.Err() != nil {
			return
		}
		scr.draw(header, sum, err, d.watch)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// printFinal prints the market's last state after the agents stopped.
func (d *devMarket) printFinal() {
	ctx, cancel := context.WithTimeout(context.Background(), devFinalTimeout)
	defer cancel()
	w := d.env.Out
	sum, err := d.watch.look(ctx)
	for _, ev := range d.watch.takeFresh() {
		fmt.Fprintln(w, ev)
	}
	fmt.Fprintln(w, "\nfinal summary")
	if err != nil {
		fmt.Fprintf(w, "  unavailable: %s\n", errorText(err))
	} else {
		printIndented(w, summaryLines(sum))
	}
	if d.temporary {
		fmt.Fprintf(w, "removed %s\n", d.dir)
	} else {
		fmt.Fprintf(w, "data kept in %s; run 'idlegrid dev --data %s' to carry on\n", d.dir, d.dir)
	}
}

func printIndented(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, "  "+l)
	}
}
