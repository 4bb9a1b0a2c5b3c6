package agent

// The node's local policy: which GPUs it offers now, and what work it
// takes. The agent looks at its GPUs every telemetry interval (watchLoop)
// and judges each one:
//
//   - A GPU that has disappeared, or reports a fault (an Xid error that is
//     not a program's, a pending reset), is withdrawn. The fault leaves its
//     running work alone: if the GPU is broken the workload fails by
//     itself. The rules below still give notice on a faulty GPU.
//   - A GPU above the thermal cap is withdrawn and all its running work gets
//     notice, until it has cooled by thermalHysteresisC.
//   - In when-idle mode, a GPU is offered only once its owner has left it
//     alone for idle.for: no process on it but the agent's workloads' (and
//     the display server's), and, while no lease of the agent runs on it,
//     utilisation at or under idle.max_util_pct. When the owner comes back,
//     bronze work on it gets notice and it is withdrawn. Gold and silver
//     leases were sold as uninterruptible, so they run on.
//
// A withdrawn GPU is left out of the published offer. When no GPU is left,
// the offer lists them all with a schedule that is never open (the domain
// wants at least one GPU in an offer; see closedSchedule).
//
// Work is refused at start (reported failed, FaultProvider) when it needs a
// withdrawn GPU, or is of a kind or from an image the node does not allow.
// The renter did nothing wrong: the job passed the engine's checks against
// what the node published, so the node takes the blame and the job is
// requeued for another node rather than failed.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu"
)

// Mode is when a node offers its GPUs.
type Mode string

const (
	// ModeSchedule offers the GPUs inside the schedule's windows. It is the
	// default.
	ModeSchedule Mode = "schedule"
	// ModeWhenIdle offers each GPU, inside the schedule's windows, only
	// while its owner is not using it.
	ModeWhenIdle Mode = "when-idle"
)

// IdleConfig says when a GPU counts as idle in when-idle mode.
type IdleConfig struct {
	// MaxUtilPct is the utilisation at or under which a GPU is idle; zero
	// means DefaultIdleMaxUtilPct.
	MaxUtilPct int `yaml:"max_util_pct"`
	// For is how long a GPU must stay idle before it is offered; zero
	// means DefaultIdleFor.
	For time.Duration `yaml:"for"`
	// IgnoreProcesses names processes (by executable name) that do not
	// count as the owner using the GPU; empty means DefaultIgnoreProcesses.
	IgnoreProcesses []string `yaml:"ignore_processes"`
}

// Policy defaults.
const (
	DefaultTelemetryInterval = 10 * time.Second
	DefaultIdleMaxUtilPct    = 10
	DefaultIdleFor           = 10 * time.Minute
	// DefaultNotice is the notice a lease gets when its own says none.
	DefaultNotice = 30 * time.Second
	// thermalHysteresisC is how far under the cap a hot GPU must cool
	// before it is offered again, so that it does not flap at the cap.
	thermalHysteresisC = 5
)

// DefaultIgnoreProcesses are display servers and compositors: they hold a
// desktop GPU all the time, so they must not count as the owner using it.
// Utilisation still tells when the owner works on the desktop.
var DefaultIgnoreProcesses = []string{"Xorg", "Xwayland", "gnome-shell", "kwin_x11", "kwin_wayland", "plasmashell"}

// ProcessOwner is implemented by runtimes that can tell which host
// processes run their workloads (a container runtime knows its
// containers' processes). In when-idle mode a process on a GPU that is
// neither the agent's nor ignored is the owner's.
type ProcessOwner interface {
	OwnsProcess(pid int) bool
}

// validatePolicy checks the policy part of the config.
func (c *Config) validatePolicy() error {
	switch {
	case c.Mode != "" && c.Mode != ModeSchedule && c.Mode != ModeWhenIdle:
		return idlegrid.Invalid("mode", "must be schedule or when-idle, got %q", c.Mode)
	case c.Idle.MaxUtilPct < 0 || c.Idle.MaxUtilPct > 100:
		return idlegrid.Invalid("idle.max_util_pct", "must be between 0 and 100 (0 means %d)", DefaultIdleMaxUtilPct)
	case c.Idle.For < 0 || c.Idle.For > 24*time.Hour:
		return idlegrid.Invalid("idle.for", "must be between 0s and 24h (0 means %v)", DefaultIdleFor)
	case c.ThermalCapC != 0 && (c.ThermalCapC < 40 || c.ThermalCapC > 110):
		return idlegrid.Invalid("thermal_cap_c", "must be between 40 and 110 °C, or 0 for none")
	case c.PowerCapW != 0 && (c.PowerCapW < 10 || c.PowerCapW > 3000):
		return idlegrid.Invalid("power_cap_w", "must be between 10 and 3000 W, or 0 for none")
	case c.TelemetryInterval != 0 && (c.TelemetryInterval < time.Second || c.TelemetryInterval > 5*time.Minute):
		return idlegrid.Invalid("telemetry_interval", "must be between 1s and 5m (0 means %v)", DefaultTelemetryInterval)
	}
	for i, p := range c.Idle.IgnoreProcesses {
		if strings.TrimSpace(p) == "" || strings.Contains(p, "/") {
			return idlegrid.Invalid(fmt.Sprintf("idle.ignore_processes[%d]", i), "want an executable name such as Xorg, got %q", p)
		}
	}
	for i, p := range c.AllowedImages {
		f := fmt.Sprintf("allowed_images[%d]", i)
		if strings.TrimSpace(p) == "" || len(p) > 255 || strings.ContainsAny(p, " \t\n") {
			return idlegrid.Invalid(f, "want an image, prefix or glob such as ghcr.io/acme/ or pytorch/pytorch:*, got %q", p)
		} else if _, err := path.Match(p, ""); err != nil {
			return idlegrid.Invalid(f, "bad glob %q: %v", p, err)
		}
	}
	return nil
}

func (c *Config) telemetryInterval() time.Duration {
	if c.TelemetryInterval > 0 {
		return c.TelemetryInterval
	}
	return DefaultTelemetryInterval
}

// AllowsImage reports whether allowed_images lets the node run image. An
// entry is a glob when it has *, ? or [ in it, matched against the whole
// reference; otherwise it is the image itself or a prefix ending where the
// reference has '/', ':' or '@' (so "ghcr.io/acme" allows
// "ghcr.io/acme/train:1" but not "ghcr.io/acme-evil/x"). Both sides are
// expanded as Docker expands short names first: "python:3.12" is
// "docker.io/library/python:3.12". The entry "*" allows every image.
func (c *Config) AllowsImage(image string) bool {
	if len(c.AllowedImages) == 0 {
		return true
	}
	img := normalizeImage(image)
	for _, p := range c.AllowedImages {
		if p == "*" {
			return true
		}
		np := normalizeImage(p)
		if strings.ContainsAny(np, "*?[") {
			if ok, _ := path.Match(np, img); ok {
				return true
			}
			continue
		}
		if img == np || strings.HasPrefix(img, np) &&
			(strings.HasSuffix(np, "/") || strings.HasSuffix(np, ":") || strings.ContainsRune("/:@", rune(img[len(np)]))) {
			return true
		}
	}
	return false
}

// normalizeImage expands a short Docker Hub reference as Docker does and
// lower-cases it: "python:3.12" → "docker.io/library/python:3.12",
// "pytorch/pytorch" → "docker.io/pytorch/pytorch".
func normalizeImage(ref string) string {
	ref = strings.ToLower(strings.TrimSpace(ref))
	first, rest, ok := strings.Cut(ref, "/")
	switch {
	case !ok:
		return "docker.io/library/" + ref
	case first == "docker.io" || first == "index.docker.io":
		if !strings.Contains(rest, "/") {
			return "docker.io/library/" + rest
		}
		return "docker.io/" + rest
	case strings.ContainsAny(first, ".:") || first == "localhost":
		return ref
	}
	return "docker.io/" + ref
}

// evict says which running work on a GPU gets notice.
type evict int

const (
	evictNone   evict = iota
	evictBronze       // the owner is back: interruptible work leaves
	evictAll          // too hot: everything leaves
)

// verdict is what the policy makes of one GPU now.
type verdict struct {
	offer  bool
	reason string // why it is not offered
	evict  evict
}

// gpuState is what the policy remembers about a GPU between looks.
type gpuState struct {
	idleSince time.Time // zero while the owner uses it
	hot       bool
}

// policy judges GPUs. Only one goroutine uses it: Run's, then watchLoop's.
type policy struct {
	mode        Mode
	maxUtilPct  int
	idleFor     time.Duration
	ignore      map[string]bool
	thermalCapC int
	gpus        map[string]*gpuState // by UUID
}

func newPolicy(c *Config) *policy {
	p := &policy{
		mode: c.Mode, maxUtilPct: c.Idle.MaxUtilPct, idleFor: c.Idle.For,
		thermalCapC: c.ThermalCapC, ignore: map[string]bool{}, gpus: map[string]*gpuState{},
	}
	if p.mode == "" {
		p.mode = ModeSchedule
	}
	if p.maxUtilPct == 0 {
		p.maxUtilPct = DefaultIdleMaxUtilPct
	}
	if p.idleFor == 0 {
		p.idleFor = DefaultIdleFor
	}
	ignore := c.Idle.IgnoreProcesses
	if len(ignore) == 0 {
		ignore = DefaultIgnoreProcesses
	}
	for _, name := range ignore {
		p.ignore[name] = true
	}
	return p
}

// judge decides about every GPU in devs at now. leased holds the GPUs the
// agent's leases run on; ours says whether a host process is the agent's.
// GPUs not in devs are forgotten.
func (p *policy) judge(now time.Time, devs []gpu.Device, leased map[string]bool, ours func(pid int) bool) map[string]verdict {
	out := make(map[string]verdict, len(devs))
	seen := map[string]bool{}
	for _, d := range devs {
		seen[d.UUID] = true
		out[d.UUID] = p.judgeOne(now, d, leased[d.UUID], ours)
	}
	for u := range p.gpus {
		if !seen[u] {
			delete(p.gpus, u)
		}
	}
	return out
}

func (p *policy) judgeOne(now time.Time, d gpu.Device, leased bool, ours func(int) bool) verdict {
	st := p.gpus[d.UUID]
	if st == nil {
		st = &gpuState{}
		p.gpus[d.UUID] = st
	}
	if p.thermalCapC > 0 {
		if d.TempC > p.thermalCapC {
			st.hot = true
		} else if d.TempC <= p.thermalCapC-thermalHysteresisC {
			st.hot = false
		}
	}
	// The owner's use is tracked even while the GPU is unfit for other
	// reasons, so that the idle period counts from when they really left.
	owner := ""
	if p.mode == ModeWhenIdle {
		if owner = p.ownerUse(d, leased, ours); owner != "" {
			st.idleSince = time.Time{}
		} else if st.idleSince.IsZero() {
			st.idleSince = now
		}
	}
	var v verdict
	switch {
	case st.hot:
		v = verdict{reason: fmt.Sprintf("thermal cap: %d°C, above the cap of %d°C", d.TempC, p.thermalCapC), evict: evictAll}
	case owner != "":
		v = verdict{reason: "the owner is using it: " + owner, evict: evictBronze}
	case p.mode == ModeWhenIdle && now.Sub(st.idleSince) < p.idleFor:
		v = verdict{reason: fmt.Sprintf("idle for %v of the %v it must be before it is offered", now.Sub(st.idleSince).Round(time.Second), p.idleFor)}
	default:
		v = verdict{offer: true}
	}
	// A fault withdraws the GPU and is the reason given, but evicts
	// nothing itself; heat and the owner's return evict all the same. A
	// GPU's Xid errors are kept for the detector's life: were a fault to
	// decide everything, one Xid would turn off the thermal cap and the
	// owner's claim on the GPU until the agent restarts.
	switch {
	case d.Fault() != "":
		v.offer, v.reason = false, "unhealthy: "+d.Fault()
	case d.VRAMMB <= 0:
		v.offer, v.reason = false, "the driver does not report its memory size"
	}
	return v
}

// ownerUse says how the owner is using d, or "".
func (p *policy) ownerUse(d gpu.Device, leased bool, ours func(int) bool) string {
	for _, proc := range d.Processes {
		if ours(proc.PID) || p.ignored(proc.Name) {
			continue
		}
		name := proc.Name
		if name == "" {
			name = "unknown; the agent cannot see host processes"
		}
		return fmt.Sprintf("process %d (%s)", proc.PID, name)
	}
	if !leased && d.UtilPct > p.maxUtilPct {
		return fmt.Sprintf("utilisation %d%%, above %d%%", d.UtilPct, p.maxUtilPct)
	}
	return ""
}

// ignored reports whether a process name (often a path, sometimes with
// arguments) is one the policy ignores.
func (p *policy) ignored(name string) bool {
	if name == "" {
		return false
	}
	if p.ignore[filepath.Base(name)] {
		return true
	}
	fields := strings.Fields(name)
	return len(fields) > 0 && p.ignore[filepath.Base(fields[0])]
}

// closedSchedule is a schedule that is never open: a node whose GPUs are
// all withdrawn publishes it, because an offer must list at least one GPU.
// Its one window is a second in 1970, so it reads as "not offered" and
// stays the same from one publication to the next.
func closedSchedule(timeZone string) idlegrid.Schedule {
	return idlegrid.Schedule{
		Mode: idlegrid.ScheduleWindows, TimeZone: timeZone,
		OneOff: []idlegrid.OneOffWindow{{Start: time.Unix(0, 0).UTC(), End: time.Unix(1, 0).UTC()}},
	}
}

// offerFor builds the offer of the GPUs the verdicts offer, or, when none,
// of every GPU known under a closed schedule. It also returns a key that
// changes exactly when what is offered does.
func (a *Agent) offerFor(devs []gpu.Device, v map[string]verdict) (idlegrid.Offer, string, error) {
	var offered, all []idlegrid.GPU
	for _, d := range devs {
		if d.VRAMMB > 0 { // an offer's GPUs need a size
			all = append(all, d.GPU)
		}
		if v[d.UUID].offer {
			offered = append(offered, d.GPU)
		}
	}
	gpus, closed := offered, len(offered) == 0
	if closed {
		gpus = all
		if len(gpus) == 0 {
			gpus = a.lastGPUs
		}
	}
	o, err := a.cfg.Offer(gpus, a.host)
	if err != nil {
		return idlegrid.Offer{}, "", err
	}
	o.Models = a.models.offered()
	a.lastGPUs = gpus
	key := make([]string, 0, len(gpus)+1)
	for _, g := range gpus {
		key = append(key, g.UUID+"="+g.Model)
	}
	sort.Strings(key)
	if closed {
		o.Schedule = closedSchedule(o.Schedule.TimeZone)
		key = append(key, "closed")
	}
	if k := a.models.key(); k != "" {
		key = append(key, k)
	}
	return o, strings.Join(key, ","), nil
}

// observe detects the GPUs and judges them, and records what it found for
// the command loop: the GPUs the node has and why some are not offered.
func (a *Agent) observe(ctx context.Context) ([]gpu.Device, map[string]verdict, error) {
	devs, err := a.det.Detect(ctx)
	if err != nil {
		return nil, nil, err
	}
	a.sampleUsage(devs)
	a.mu.Lock()
	leased := map[string]bool{}
	for _, l := range a.leases {
		for _, u := range l.w.GPUs {
			leased[u] = true
		}
	}
	a.mu.Unlock()
	v := a.policy.judge(a.clock.Now(), devs, leased, a.ours)
	have, withdrawn := map[string]bool{}, map[string]string{}
	for _, d := range devs {
		have[d.UUID] = true
		if !v[d.UUID].offer {
			withdrawn[d.UUID] = v[d.UUID].reason
		}
	}
	a.mu.Lock()
	a.gpus, a.withdrawn = have, withdrawn
	a.mu.Unlock()
	return devs, v, nil
}

// watchLoop looks at the GPUs every telemetry interval until ctx is done,
// and applies the policy: notices, the power cap, and a new offer when
// what is offered changes. It also stops the workloads past their lease's
// time limit (stopOverLimit).
func (a *Agent) watchLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.telemetryInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.models.changed: // a model server came or went
		}
		a.stopOverLimit()
		a.watch(ctx)
	}
}

// watch is one look at the GPUs.
func (a *Agent) watch(ctx context.Context) {
	devs, v, err := a.observe(ctx)
	if ctx.Err() != nil {
		return
	} else if err != nil {
		a.log.Warn("GPU detection failed; keeping the last offer", "err", err)
		return
	}
	a.giveNotice(v)
	a.applyPowerCap(ctx, devs)
	offer, key, err := a.offerFor(devs, v)
	if err != nil {
		a.log.Error("cannot build the offer", "err", err)
		return
	}
	if key == a.offerKey {
		return
	}
	first := key != a.offerTried
	if first {
		a.logOffer(devs, v)
		a.offerTried = key
	}
	// One try a look: the next look tries again. Waiting here for the
	// server, through an outage, would stop the looks that keep the
	// node's rules (notices, the thermal and power caps) meanwhile.
	req := idlegrid.OfferRequest{Offer: offer, AgentVersion: a.version}
	if err := a.srv.UpdateOffer(ctx, req); err != nil {
		if ctx.Err() == nil && first {
			a.log.Warn("could not publish the new offer; each look tries again", "err", err)
		}
		return
	}
	a.offerKey = key
}

// logOffer says what the node offers now and why the rest is withdrawn.
func (a *Agent) logOffer(devs []gpu.Device, v map[string]verdict) {
	offered := 0
	for _, d := range devs {
		if vd := v[d.UUID]; vd.offer {
			offered++
		} else {
			a.log.Info("GPU withdrawn from the offer", "gpu", d.UUID, "index", d.Index, "reason", vd.reason)
		}
	}
	a.log.Info("publishing a new offer", "gpus_offered", offered, "gpus_detected", len(devs))
}

// giveNotice stops the leases that the verdicts evict, each with its
// notice.
func (a *Agent) giveNotice(v map[string]verdict) {
	type due struct {
		l      *lease
		reason string
	}
	var dues []due
	a.mu.Lock()
	for _, l := range a.leases {
		for _, u := range l.w.GPUs {
			vd := v[u]
			if vd.evict == evictAll || vd.evict == evictBronze && l.tier == idlegrid.TierBronze {
				dues = append(dues, due{l, fmt.Sprintf("GPU %s: %s", u, vd.reason)})
				break
			}
		}
	}
	a.mu.Unlock()
	for _, d := range dues {
		a.stopLease(d.l, stopByPolicy, d.reason)
	}
}

// noticeOf is the notice a lease is owed.
func noticeOf(l *idlegrid.Lease) time.Duration {
	if l.NoticeSeconds > 0 {
		return time.Duration(l.NoticeSeconds) * time.Second
	}
	return DefaultNotice
}

// applyPowerCap sets the configured power cap on every GPU whose limit is
// above it. A GPU that refused once (the agent lacks root, or the driver
// does not allow it) is not asked again.
//
// A GPU whose limit the driver does not report (N/A) is not capped: the
// agent could not record the limit to set back when it stops, so the GPU
// would stay capped for its owner's own use after the agent exits, and
// since the cap would never show, every look would set it again. A
// provider's power cap is for renters' work and must not outlive the
// agent, so a warning says so once, and the cap is applied once the
// driver reports a limit. (A GPU capped by an agent that crashed keeps
// its record, and gets its limit back when this one stops.)
func (a *Agent) applyPowerCap(ctx context.Context, devs []gpu.Device) {
	if a.cfg.PowerCapW == 0 {
		return
	}
	pc, ok := a.det.(gpu.PowerController)
	for _, d := range devs {
		want := a.cfg.PowerCapW
		if d.PowerMinW > 0 && d.PowerMaxW >= d.PowerMinW {
			want = min(max(want, d.PowerMinW), d.PowerMaxW)
		}
		if a.powerRefused[d.UUID] {
			continue
		} else if d.PowerLimitW <= 0 {
			if !a.powerUnknown[d.UUID] {
				a.powerUnknown[d.UUID] = true
				a.log.Warn("power cap not applied: the driver does not report the GPU's power limit, so it could not be set back when the agent stops",
					"gpu", d.UUID, "cap_w", a.cfg.PowerCapW)
			}
			continue
		}
		delete(a.powerUnknown, d.UUID)
		if d.PowerLimitW <= want {
			continue
		}
		a.powerRefused[d.UUID] = true // until it works
		if !ok {
			a.log.Warn("power cap not applied: the GPU detector cannot set power limits", "gpu", d.UUID, "cap_w", a.cfg.PowerCapW)
			continue
		}
		noted, err := a.notePowerLimit(d)
		if err != nil {
			a.log.Warn("power cap not applied: cannot record the GPU's limit to set it back later", "gpu", d.UUID, "err", err)
			continue
		}
		w, err := pc.SetPowerLimit(ctx, d.UUID, want)
		if err != nil {
			a.log.Warn("power cap not applied; the GPU keeps its limit", "gpu", d.UUID, "cap_w", a.cfg.PowerCapW, "limit_w", d.PowerLimitW, "err", err)
			if noted { // nothing to set back: it has its limit still
				a.forgetPowerLimit(d.UUID)
			}
			continue
		}
		delete(a.powerRefused, d.UUID)
		a.log.Info("power cap applied", "gpu", d.UUID, "limit_w", w, "was_w", d.PowerLimitW)
	}
}

// policyRefusal says why the node's policy refuses the start command c, or
// "". a.mu is held.
func (a *Agent) policyRefusal(c idlegrid.Command) string {
	kind := c.Job.Kind
	if kind == "" {
		kind = idlegrid.KindOther
	}
	ask := idlegrid.Ask{AllowedKinds: a.cfg.Ask.AllowedKinds}
	switch {
	case !ask.Allows(kind):
		return fmt.Sprintf("refused by the node's policy: workload kind %q is not among its allowed kinds (%s)", kind, kindNames(a.cfg.Ask.AllowedKinds))
	case !a.cfg.AllowsImage(c.Job.Image):
		return fmt.Sprintf("refused by the node's policy: image %q is not in its allowed_images", c.Job.Image)
	}
	for _, u := range c.Lease.GPUUUIDs {
		if why, ok := a.withdrawn[u]; ok {
			return fmt.Sprintf("GPU %s is not offered now: %s", u, why)
		}
	}
	return ""
}

func kindNames(ks []idlegrid.WorkloadKind) string {
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// ours reports whether a host process belongs to the agent's workloads:
// the runtime says so, or it descends from the agent's own process.
func (a *Agent) ours(pid int) bool {
	if a.ownsProcess != nil {
		return a.ownsProcess(pid)
	}
	if po, ok := a.rt.(ProcessOwner); ok && po.OwnsProcess(pid) {
		return true
	}
	return descendsFrom(pid, os.Getpid())
}

// descendsFrom reports whether process pid is ancestor or one of its
// descendants, following parents through /proc (Linux; elsewhere only
// pid == ancestor is known).
func descendsFrom(pid, ancestor int) bool {
	for range 64 {
		if pid == ancestor {
			return true
		} else if pid <= 1 {
			return false
		}
		ppid, err := parentPID(pid)
		if err != nil {
			return false
		}
		pid = ppid
	}
	return false
}

// parentPID reads a process's parent from /proc/PID/stat, whose second
// field, the command name in parentheses, may itself hold spaces and ')'.
func parentPID(pid int) (int, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	fields := strings.Fields(string(data[i+1:])) // state, ppid, …
	if len(fields) < 2 {
		return 0, errors.New("malformed stat")
	}
	return strconv.Atoi(fields[1])
}
