package cli

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/gpu"
	gpuauto "github.com/idlegrid/idlegrid/internal/gpu/auto"
	"github.com/idlegrid/idlegrid/internal/gpu/cuda"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/runtime/docker"
)

// Statuses of a check.
const (
	checkOK   = "ok"
	checkWarn = "warn"
	checkFail = "FAIL"
)

// checkLine is one line of 'idlegrid agent --check': what was checked,
// how it went, what was found, and what to do about it.
type checkLine struct {
	Check  string `json:"check"`
	Status string `json:"status"` // ok, warn or FAIL
	Detail string `json:"detail"`
	Hint   string `json:"hint,omitempty"`
}

// checkReport is the --json output of 'idlegrid agent --check'.
type checkReport struct {
	Config string      `json:"config"`
	OK     bool        `json:"ok"` // no check failed
	Checks []checkLine `json:"checks"`
}

// Timing of the checks.
const (
	checkHTTPTimeout   = 10 * time.Second
	checkDockerTimeout = 10 * time.Second
	// checkSkewWarn is the clock skew worth a warning, well inside the
	// nodekey.MaxSkew the server allows.
	checkSkewWarn = 30 * time.Second
)

// checkDetector opens the real GPU detector for the check; tests replace
// it.
var checkDetector = gpuauto.Detector

// agentCheck runs the checks of 'idlegrid agent --check' one after the
// other; later ones use what earlier ones found.
type agentCheck struct {
	env     *env
	cfgPath string
	cfg     *agent.Config // nil when the config is not valid
	lines   []checkLine

	devs     []gpu.Device   // the GPUs detected
	engine   *client.Client // the Docker engine, when it answered
	info     system.Info
	serverUp bool // the server answered, speaking this agent's protocol
}

func (c *agentCheck) add(check, status, detail, hint string) {
	c.lines = append(c.lines, checkLine{Check: check, Status: status, Detail: detail, Hint: hint})
}

// run runs every check.
func (c *agentCheck) run(ctx context.Context, cfgErr error) {
	defer func() {
		if c.engine != nil {
			c.engine.Close()
		}
	}()
	c.checkConfig(cfgErr)
	c.checkDriver(ctx)
	c.checkChallenges()
	c.checkSchedule()
	c.checkModels(ctx)
	c.checkDocker(ctx)
	c.checkNvidiaRuntime()
	c.checkGPUsInContainers(ctx)
	c.checkWorkloadNetwork(ctx)
	c.checkServer(ctx)
	c.checkIdentity(ctx)
}

func (c *agentCheck) checkConfig(err error) {
	if byFlag := c.env.flagsAtFault(err); byFlag != nil {
		c.add("config", checkFail, faultLines(byFlag), "fix the flags named; the config file is not at fault for them")
		return
	} else if err != nil {
		c.add("config", checkFail, faultLines(err), "fix the agent config; 'idlegrid agent init' writes a commented one for this machine")
		return
	}
	runtimeWhy := ""
	if c.cfg.Runtime == "" {
		runtimeWhy = " (the default without fake_gpus)"
		if c.cfg.FakeGPUs != "" {
			runtimeWhy = " (the default with fake_gpus)"
		}
	}
	name := c.cfg.Name
	if name == "" {
		name, _ = os.Hostname()
	}
	c.add("config", checkOK, fmt.Sprintf("%s is valid: node %s in %s (%s), runtime %s%s",
		c.cfgPath, name, c.cfg.Region, c.cfg.Residency, c.cfg.RuntimeName(), runtimeWhy), "")
}

// checkModels checks each model the node serves: that its server answers
// and lists it, as the running agent checks before offering it, and that
// its queue depth can be read for the gateway's routing.
func (c *agentCheck) checkModels(ctx context.Context) {
	if c.cfg == nil {
		return
	}
	for _, m := range c.cfg.CheckModels(ctx) {
		check := "model " + m.Name
		if m.Problem != "" {
			c.add(check, checkFail, fmt.Sprintf("%s: %s; the agent will not offer it", m.Upstream, m.Problem),
				"start the model server (vLLM, Ollama, llama.cpp's server, SGLang, TGI) at upstream, set upstream_model to the name it lists, or take the model out of models:")
			continue
		}
		switch {
		case m.MetricsURL == "":
			c.add(check, checkOK, m.Upstream+" serves it; its queue is not read (metrics_url: off)", "")
		case m.MetricsProblem != "":
			c.add(check, checkWarn, fmt.Sprintf("%s serves it, but its queue depth cannot be read: %s", m.Upstream, m.MetricsProblem),
				"set metrics_url to the server's Prometheus metrics (vLLM and TGI serve them; SGLang with --enable-metrics, llama.cpp's server with --metrics), or metrics_url: off, as for Ollama; the gateway then counts only its own requests there")
		default:
			c.add(check, checkOK, fmt.Sprintf("%s serves it; %d waiting in its queue (%s at %s)", m.Upstream, m.Queued, m.Gauge, m.MetricsURL), "")
		}
	}
}

// checkDriver finds the GPU driver, then lists the GPUs it sees and what
// the node's policy makes of each now.
func (c *agentCheck) checkDriver(ctx context.Context) {
	if c.cfg == nil {
		c.add("gpu driver", checkWarn, "skipped: the config is not valid", "")
		return
	}
	var det gpu.Detector
	status, detail, hint := checkOK, "", ""
	if c.cfg.FakeGPUs != "" {
		d, _, err := c.cfg.OpenDetector(ctx, c.seed())
		if err != nil {
			c.add("gpu driver", checkFail, errorText(err), "fix fake_gpus in the config")
			return
		}
		det, status = d, checkWarn
		detail = "none needed: the GPUs are simulated (fake_gpus: " + c.cfg.FakeGPUs + ")"
		hint = "fine for trying idlegrid out; remove fake_gpus to offer this machine's real GPUs"
	} else {
		d, via, err := checkDetector(ctx)
		if err != nil {
			c.add("gpu driver", checkFail, "no NVIDIA driver found: "+errorText(err),
				"install the NVIDIA driver (it brings libnvidia-ml.so.1 and nvidia-smi) and check that nvidia-smi lists the GPUs")
			return
		}
		if cl, ok := d.(io.Closer); ok {
			defer cl.Close()
		}
		det, detail = d, via
	}
	devs, err := det.Detect(ctx)
	if err == nil && status == checkOK {
		detail = driverDetail(detail, devs)
	}
	c.add("gpu driver", status, detail, hint)
	if err != nil {
		c.add("gpus", checkFail, "the driver could not list the GPUs: "+errorText(err), "run nvidia-smi: it says what is wrong")
		return
	}
	c.devs = devs
	c.checkGPUs(ctx)
}

// seed is the key fake GPUs' UUIDs are seeded with: the node's, as the
// agent's are, or, before the agent has made it, a stand-in (the check
// makes no key).
func (c *agentCheck) seed() ed25519.PrivateKey {
	if _, err := os.Stat(c.cfg.KeyPath()); err == nil {
		if key, err := nodekey.LoadOrCreate(c.cfg.KeyPath()); err == nil {
			return key
		}
	}
	return ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
}

func driverDetail(via string, devs []gpu.Device) string {
	d := via
	if len(devs) > 0 {
		if devs[0].Driver != "" && !strings.Contains(via, devs[0].Driver) {
			d += ", driver " + devs[0].Driver
		}
		if devs[0].CUDA != "" {
			d += ", CUDA " + devs[0].CUDA
		}
	}
	return d
}

// checkGPUs says what GPUs there are and whether the policy offers each.
func (c *agentCheck) checkGPUs(ctx context.Context) {
	if len(c.devs) == 0 {
		c.add("gpus", checkFail, "the driver sees no GPU", "run nvidia-smi; a GPU that fell off the bus needs a reboot")
		return
	}
	var ours func(pid int) bool
	if c.cfg.RuntimeName() == agent.RuntimeDocker && slices.ContainsFunc(c.devs, func(d gpu.Device) bool { return len(d.Processes) > 0 }) {
		ours = c.agentsProcesses(ctx)
	}
	withdrawn := c.cfg.Withdrawn(time.Now(), c.devs, ours)
	offered := len(c.devs) - len(withdrawn)
	status, hint := checkOK, ""
	if offered == 0 {
		status, hint = checkWarn, "the agent publishes the node, but no GPU of it is offered until the reasons below pass"
	}
	detail := fmt.Sprintf("%d detected, %d offered now", len(c.devs), offered)
	if c.cfg.Mode == agent.ModeWhenIdle {
		detail += fmt.Sprintf(" (when-idle: a GPU its owner leaves alone is offered after %v)", idleFor(c.cfg))
	}
	c.add("gpus", status, detail, hint)
	for _, d := range c.devs {
		what := fmt.Sprintf("%s, %d MB, %s", d.Model, d.VRAMMB, d.UUID)
		if d.TempC > 0 {
			what += fmt.Sprintf(", %d°C", d.TempC)
		}
		name := fmt.Sprintf("gpu %d", d.Index)
		if why, ok := withdrawn[d.UUID]; ok {
			c.add(name, checkWarn, what+": withdrawn now: "+why, withdrawnHint(why, c.cfg))
		} else {
			c.add(name, checkOK, what+": offered", "")
		}
	}
}

// agentsProcesses tells the processes of the containers a running agent
// started (any agent's on this engine), so that the check, like the agent,
// does not count them as the owner's; nil when Docker does not answer.
func (c *agentCheck) agentsProcesses(ctx context.Context) func(pid int) bool {
	cli, err := dockerClient(c.env.getenv)
	if err != nil {
		return nil
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, checkDockerTimeout)
	defer cancel()
	list, err := cli.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", docker.LabelManagedBy+"="+docker.ManagedBy))})
	if err != nil || len(list) == 0 {
		return nil
	}
	ids := map[string]bool{}
	for _, ct := range list {
		ids[ct.ID] = true
	}
	return func(pid int) bool {
		return slices.ContainsFunc(docker.ProcessContainerIDs("/proc", pid), func(id string) bool { return ids[id] })
	}
}

func withdrawnHint(why string, cfg *agent.Config) string {
	switch {
	case strings.HasPrefix(why, "unhealthy"):
		return "look for NVIDIA Xid errors in dmesg; a GPU reset (nvidia-smi -r) or a reboot may clear it"
	case strings.HasPrefix(why, "thermal cap"):
		return "cool the machine down, or raise thermal_cap_c"
	case strings.HasPrefix(why, "the owner is using it"):
		return fmt.Sprintf("in when-idle mode a GPU is offered once its owner has left it alone for %v (idle.for)", idleFor(cfg))
	}
	return ""
}

func idleFor(cfg *agent.Config) time.Duration {
	if cfg.Idle.For > 0 {
		return cfg.Idle.For
	}
	return agent.DefaultIdleFor
}

// checkSchedule says whether the schedule offers the node now.
func (c *agentCheck) checkSchedule() {
	if c.cfg == nil {
		return
	}
	offer, err := c.cfg.Offer([]idlegrid.GPU{{UUID: "GPU-check", Model: "check", VRAMMB: 1}}, agent.Host{Name: "check"})
	if err != nil {
		c.add("schedule", checkFail, errorText(err), "fix the schedule in the config")
		return
	}
	s, now := offer.Schedule, time.Now()
	switch until := s.AvailableUntil(now); {
	case s.Mode == idlegrid.ScheduleAlways:
		c.add("schedule", checkOK, "always offered", "")
	case !until.IsZero():
		c.add("schedule", checkOK, "in a window now, until "+until.Format(time.RFC3339), "")
	default:
		next := "none within the horizon"
		if n := s.NextOpening(now); !n.IsZero() {
			next = n.Format(time.RFC3339)
		}
		c.add("schedule", checkOK, "outside the schedule's windows now; the next opens "+next, "")
	}
}

// checkDocker connects to the Docker engine the docker runtime would use.
func (c *agentCheck) checkDocker(ctx context.Context) {
	if c.cfg != nil && c.cfg.RuntimeName() == agent.RuntimeFake {
		c.add("docker", checkOK, "not needed: the fake runtime simulates workloads (runtime: fake)", "")
		return
	}
	cli, err := dockerClient(c.env.getenv)
	if err != nil {
		c.add("docker", checkFail, "cannot make a Docker client: "+err.Error(), "fix DOCKER_HOST")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, checkDockerTimeout)
	defer cancel()
	info, err := cli.Info(ctx)
	if err != nil {
		cli.Close()
		c.add("docker", checkFail, fmt.Sprintf("no Docker engine answers at %s: %v", cli.DaemonHost(), err), dockerHint(err))
		return
	}
	c.engine, c.info = cli, info
	c.add("docker", checkOK, fmt.Sprintf("Docker %s (API %s) at %s, %d CPUs, %d MB", info.ServerVersion, cli.ClientVersion(), cli.DaemonHost(), info.NCPU, info.MemTotal>>20), "")
}

func dockerHint(err error) string {
	if errors.Is(err, syscall.EACCES) || strings.Contains(err.Error(), "permission denied") {
		return "this user may not use the Docker socket: run the agent as root (the systemd unit does), or add the user to the docker group"
	}
	return "install Docker Engine and start it (systemctl enable --now docker); or set runtime: fake to try idlegrid with simulated workloads"
}

// dockerClient is a client of the engine DOCKER_HOST names, else the
// local one.
func dockerClient(getenv func(string) string) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if h := getenv("DOCKER_HOST"); h != "" {
		opts = append(opts, client.WithHost(h))
	}
	return client.NewClientWithOpts(opts...)
}

// challengeRunner is what the challenges check needs of cuda.Runner.
type challengeRunner interface {
	BLAS() string
	Devices() ([]string, error)
	Close() error
}

// checkChallengeRunner loads CUDA and cuBLAS as the agent does for its
// hardware challenges; tests replace it.
var checkChallengeRunner = func() (challengeRunner, error) {
	r, err := cuda.Open()
	if err != nil {
		return nil, err
	}
	return r, nil
}

// checkChallenges says whether the node can answer the hardware
// challenges that verify its GPUs: CUDA and cuBLAS load, and CUDA sees
// every GPU the driver lists.
func (c *agentCheck) checkChallenges() {
	const name = "challenges"
	gpus := c.realGPUs()
	switch {
	case c.cfg == nil:
		c.add(name, checkWarn, "skipped: the config is not valid", "")
		return
	case c.cfg.FakeGPUs != "":
		c.add(name, checkOK, "simulated: the agent computes them on the CPU (fake_gpus)", "")
		return
	case len(gpus) == 0:
		c.add(name, checkWarn, "skipped: no GPU detected", "")
		return
	}
	unsupported := "until then the server's challenges are answered unsupported, and after 3 in a row the node's hardware counts as unverified (no gold jobs)"
	r, err := checkChallengeRunner()
	if err != nil {
		c.add(name, checkWarn, "cannot run on this node's GPUs: "+errorText(err),
			"install cuBLAS (the CUDA toolkit's libcublas.so.13, .12 or .11), or set "+cuda.BLASEnv+" to its path; "+unsupported)
		return
	}
	defer r.Close()
	seen, err := r.Devices()
	if err != nil {
		c.add(name, checkWarn, "CUDA cannot list the GPUs: "+errorText(err), "run nvidia-smi: it says what is wrong; "+unsupported)
		return
	}
	var unseen []string
	for _, g := range gpus {
		if !slices.ContainsFunc(seen, func(s string) bool { return strings.EqualFold(s, g) }) {
			unseen = append(unseen, g)
		}
	}
	if len(unseen) > 0 {
		c.add(name, checkWarn, fmt.Sprintf("CUDA (with %s) does not see %s", r.BLAS(), strings.Join(unseen, ", ")),
			"unset CUDA_VISIBLE_DEVICES in the agent's environment (a GPU split by MIG cannot be challenged); for those GPUs, "+unsupported)
		return
	}
	c.add(name, checkOK, fmt.Sprintf("CUDA with %s sees every GPU", r.BLAS()), "")
}

// realGPUs lists the detected GPUs that are not simulated.
func (c *agentCheck) realGPUs() []string {
	var out []string
	for _, d := range c.devs {
		if !strings.HasPrefix(d.UUID, docker.FakeGPUPrefix) {
			out = append(out, d.UUID)
		}
	}
	return out
}

// gpuSkip says why the GPU container checks do not apply, or "".
func (c *agentCheck) gpuSkip() (status, why string) {
	switch {
	case c.cfg == nil:
		return checkWarn, "skipped: the config is not valid"
	case c.cfg.RuntimeName() == agent.RuntimeFake:
		return checkOK, "not needed: the fake runtime runs no containers"
	case c.engine == nil:
		return checkWarn, "skipped: no Docker engine"
	case c.cfg.FakeGPUs != "":
		return checkOK, "not needed: simulated GPUs get no device in containers"
	case len(c.realGPUs()) == 0:
		return checkWarn, "skipped: no GPU detected"
	}
	return "", ""
}

// checkNvidiaRuntime looks for the NVIDIA Container Toolkit in what the
// engine says of itself.
func (c *agentCheck) checkNvidiaRuntime() {
	if status, why := c.gpuSkip(); why != "" {
		c.add("nvidia toolkit", status, why, "")
		return
	}
	var found []string
	if _, ok := c.info.Runtimes["nvidia"]; ok {
		found = append(found, "the nvidia runtime")
	}
	if len(c.info.CDISpecDirs) > 0 {
		found = append(found, "CDI specs in "+strings.Join(c.info.CDISpecDirs, ", "))
	}
	if len(found) == 0 {
		c.add("nvidia toolkit", checkWarn, "Docker names no nvidia runtime and no CDI spec directory",
			"install the NVIDIA Container Toolkit and run: nvidia-ctk runtime configure --runtime=docker && systemctl restart docker (the next line shows whether GPUs reach containers anyway)")
		return
	}
	c.add("nvidia toolkit", checkOK, "Docker has "+strings.Join(found, " and "), "")
}

// checkGPUsInContainers runs the GPU probe in a container that asks for
// every GPU, as a lease's would, and compares what it sees.
func (c *agentCheck) checkGPUsInContainers(ctx context.Context) {
	if status, why := c.gpuSkip(); why != "" {
		c.add("gpus in containers", status, why, "")
		return
	}
	want := c.realGPUs()
	ref, err := selfImage(ctx, c.engine, "idlegrid/gpu-probe", "agent", "gpu-probe")
	if err != nil {
		c.add("gpus in containers", checkFail, "cannot make the probe image: "+err.Error(), "")
		return
	}
	p, err := runGPUProbe(ctx, c.engine, ref, want)
	if err != nil {
		c.add("gpus in containers", checkFail, err.Error(),
			"install the NVIDIA Container Toolkit and run: nvidia-ctk runtime configure --runtime=docker && systemctl restart docker; then docker run --rm --gpus all ubuntu nvidia-smi must list the GPUs")
		return
	}
	seen := map[string]bool{}
	for _, u := range p.UUIDs {
		seen[u] = true
	}
	var missing []string
	for _, u := range want {
		if !seen[u] {
			missing = append(missing, u)
		}
	}
	switch {
	case len(p.UUIDs) == 0 && p.Devices >= len(want):
		c.add("gpus in containers", checkOK, fmt.Sprintf("a container asking for %d GPUs got %d device nodes (it could not name them: %s)", len(want), p.Devices, p.Note), "")
	case len(missing) > 0:
		c.add("gpus in containers", checkFail, fmt.Sprintf("a container asking for %d GPUs saw %d (via %s); missing %s", len(want), len(p.UUIDs), p.Via, strings.Join(missing, ", ")),
			"check the NVIDIA Container Toolkit: docker run --rm --gpus all ubuntu nvidia-smi must list every GPU")
	default:
		c.add("gpus in containers", checkOK, fmt.Sprintf("a container asking for %d GPUs saw them all (via %s)", len(want), p.Via), "")
	}
}

// checkServer asks the server for its health, and compares its clock.
func (c *agentCheck) checkServer(ctx context.Context) {
	if c.cfg == nil {
		c.add("server", checkWarn, "skipped: the config is not valid", "")
		return
	}
	url := serverURL(c.cfg.Server) + "/v1/healthz"
	ctx, cancel := context.WithTimeout(ctx, checkHTTPTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		c.add("server", checkFail, err.Error(), "fix server: in the config, e.g. https://market.example.com")
		return
	}
	sent := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if ue := (*neturl.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // it names the URL, as the line does already
	}
	if err != nil {
		c.add("server", checkFail, "cannot reach "+url+": "+err.Error(),
			"check server: in the config, DNS and the firewall; the agent only dials out, so only outbound connections to the server must be allowed")
		c.add("clock", checkWarn, "skipped: the server did not answer", "")
		return
	}
	defer resp.Body.Close()
	rtt := time.Since(sent)
	c.checkClock(resp.Header.Get("Date"), sent.Add(rtt/2))
	var h wire.Health
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &h) != nil || !h.OK {
		c.add("server", checkFail, fmt.Sprintf("%s answered %s: %s", url, resp.Status, clip(strings.TrimSpace(string(body)), 120)),
			"is that an idlegrid server? check server: in the config")
		return
	}
	if h.Protocol != idlegrid.ProtocolVersion {
		c.add("server", checkFail, fmt.Sprintf("%s speaks agent protocol %d, this agent %d", serverURL(c.cfg.Server), h.Protocol, idlegrid.ProtocolVersion),
			"upgrade the agent (or the server) so that both speak the same version")
		return
	}
	answers := fmt.Sprintf("%s answers, agent protocol %d, in %v", serverURL(c.cfg.Server), h.Protocol, rtt.Round(time.Millisecond))
	c.serverUp = true
	if plainBeyondLoopback(c.cfg.Server) { // tls.go
		c.add("server", checkWarn, answers+", in plain HTTP across the network",
			"use the server's https:// address: the join token and renters' traffic would cross the network in the clear")
		return
	}
	c.add("server", checkOK, answers, "")
}

// checkClock compares the server's Date with this machine's clock at the
// moment the server most likely wrote it; Date has whole seconds.
func (c *agentCheck) checkClock(date string, at time.Time) {
	server, err := http.ParseTime(date)
	if err != nil {
		c.add("clock", checkWarn, "the server sent no Date to compare clocks with", "")
		return
	}
	skew := at.Sub(server) - 500*time.Millisecond // Date is truncated to the second
	abs := max(skew, -skew)
	detail := fmt.Sprintf("%v from the server's", skew.Round(time.Second))
	switch {
	case abs >= nodekey.MaxSkew:
		c.add("clock", checkFail, detail+fmt.Sprintf("; the server refuses agents more than %v off", nodekey.MaxSkew),
			"synchronise the clock: timedatectl set-ntp true (or start chrony/ntpd)")
	case abs >= checkSkewWarn:
		c.add("clock", checkWarn, detail+fmt.Sprintf("; the server refuses agents more than %v off", nodekey.MaxSkew),
			"synchronise the clock: timedatectl set-ntp true (or start chrony/ntpd)")
	default:
		c.add("clock", checkOK, detail, "")
	}
}

// serverURL is the server's address with a scheme and no trailing slash.
func serverURL(addr string) string {
	addr = strings.TrimRight(strings.TrimSpace(addr), "/")
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return addr
}

// dirWritable reports why dir (or the nearest directory above it that
// exists, where dir would be made) cannot be written, or nil.
func dirWritable(dir string) error {
	d := dir
	for {
		if _, err := os.Stat(d); err == nil {
			break
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	f, err := os.CreateTemp(d, ".idlegrid-check-")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// print writes the lines for a person, and returns the failures.
func (c *agentCheck) print(w io.Writer) int {
	fmt.Fprintf(w, "idlegrid agent --check (%s)\n\n", c.cfgPath)
	fails, warns := 0, 0
	for _, l := range c.lines {
		for i, line := range strings.Split(l.Detail, "\n") { // a detail may list several faults, one a line
			status, check := l.Status, l.Check
			if i > 0 {
				status, check = "", ""
			}
			fmt.Fprintf(w, "  %-4s  %-18s  %s\n", status, check, line)
		}
		if l.Hint != "" {
			fmt.Fprintf(w, "  %-4s  %-18s  fix: %s\n", "", "", l.Hint)
		}
		switch l.Status {
		case checkFail:
			fails++
		case checkWarn:
			warns++
		}
	}
	fmt.Fprintf(w, "\n%d ok, %d warn, %d FAIL\n", len(c.lines)-fails-warns, warns, fails)
	return fails
}

func (c *agentCheck) failures() int {
	n := 0
	for _, l := range c.lines {
		if l.Status == checkFail {
			n++
		}
	}
	return n
}

// runCheck is 'idlegrid agent --check'. It fails (exit 1) when a check does.
func (c *agentCommand) runCheck(ctx context.Context, cfgPath string, cfg *agent.Config, cfgErr error, asJSON bool) error {
	chk := &agentCheck{env: c.env, cfgPath: cfgPath, cfg: cfg}
	chk.run(ctx, cfgErr)
	fails := chk.failures()
	if asJSON {
		if err := printJSON(c.env.Out, checkReport{Config: cfgPath, OK: fails == 0, Checks: chk.lines}); err != nil {
			return err
		}
	} else {
		chk.print(c.env.Out)
	}
	if fails > 0 {
		return withHint(fmt.Errorf("%d of %d checks failed", fails, len(chk.lines)), "fix what the FAIL lines say, then run 'idlegrid agent --check' again")
	}
	return nil
}
