// Package docker runs leases' workloads as Docker containers, through the
// Docker Engine API (never the docker command).
//
// Each workload runs in a sandbox:
//
//   - only the leased GPUs, through a device request for the nvidia driver
//     with the GPUs' UUIDs (the NVIDIA Container Toolkit must be installed);
//     fake GPUs ("GPU-fake-…", development nodes) get no device request but
//     NVIDIA_VISIBLE_DEVICES=void, and every workload finds its GPUs' UUIDs
//     in IDLEGRID_GPUS;
//   - CPU, memory (no swap) and pids limits: the job's cpu_cores and ram_mb,
//     or the node's defaults per GPU, never more than the node's caps;
//   - no capabilities (CapDrop ALL) but those the node allows and the
//     workload is granted; no-new-privileges; a read-only root filesystem
//     with a tmpfs /tmp; no network when the node or the lease says so,
//     else WorkloadNetwork, where workloads cannot reach each other;
//   - a user other than root: the image's USER when it names one, else
//     nobody (65534:65534). A USER that is a name runs as the uid:gid the
//     image's own /etc/passwd and /etc/group give it, and as nobody when
//     that is uid 0. Images that must run as root need Options.User =
//     "root";
//   - a scratch volume at /scratch for the lease, removed after it, and a
//     checkpoint volume at /checkpoint for the job, kept when the workload
//     did not succeed and reported as Exit.CheckpointRef, e.g.
//     "docker-volume:idlegrid-ckpt-job_x". A later lease of the same job on
//     this node mounts the same volume, so the workload resumes where it
//     stopped. Both volumes are made writable for the workload's user by a
//     prep container that is created (never started) and removed before
//     the workload starts.
//
// Images come from the node, or from their registry. A workload whose
// renter keeps a login for the registry of its image
// (runtime.Workload.RegistryAuth) always pulls the image with it, even when
// the node has the image, as Kubernetes' AlwaysPullImages does: the
// registry checks that this renter may read the image, and the tag's
// current version runs. The image is then marked private, by a tag
// PrivateRepository:<hex of the image ID> ("idlegrid-private:3f2a…") that
// outlives the agent. A workload without a login uses the image the node
// has, or pulls it without credentials when the node lacks it; but when the
// image it finds is marked private, it must pull it without credentials
// first, and does not start when the registry refuses: another renter's
// private image is not free to all on the node that cached it. With
// Options.NoPull nothing is pulled. Removing a private image by its name
// leaves the image under its mark; remove it by ID (docker rmi -f ID), or
// with docker image prune -a.
//
// Containers and volumes carry the labels idlegrid.managed-by,
// idlegrid.lease, idlegrid.job and idlegrid.node. The workload's stdout and
// stderr come back as log events; a stdout line "idlegrid:progress=0.42"
// becomes a progress event instead, and a stdout line "idlegrid:checkpoint"
// (the workload saved a checkpoint it can resume from) a checkpoint event.
//
// Stop sends SIGTERM, and SIGKILL once the grace period is out, from a
// timer the runtime owns. After the exit the runtime removes the container
// and the scratch volume, then sends the Exit.
//
// After an agent restart, Adopt takes back the containers labelled with
// this node: it follows the running ones to their end, and reports and
// removes the ones that ended meanwhile. It does not kill them, because the
// work may still be wanted; the agent stops those the server no longer
// wants. Detach, for an agent upgraded in place, leaves every container
// running and records where it stopped reading each one's output, from
// which the next runtime's Adopt reads on (handover.go).
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// Options configure a Runtime. Zero fields take the defaults named.
type Options struct {
	// Client talks to the engine. Nil: one from the environment
	// (DOCKER_HOST, else the local socket), negotiating the API version;
	// the Runtime closes it on Close.
	Client *client.Client
	// NodeID labels every container, so that Adopt takes only this node's:
	// any name of the node that stays the same across restarts, such as its
	// node ID or its public key. Several agents may share one engine if
	// their NodeIDs differ.
	NodeID string
	// Clock stamps the runtime's own notes; default idlegrid.SystemClock.
	// Output lines carry the engine's timestamps.
	Clock idlegrid.Clock
	// Logger gets what goes wrong outside any workload, e.g. a failed
	// cleanup; default discard.
	Logger *slog.Logger
	// StateDir is where the runtime keeps what must outlive the agent's
	// process: where Detach stopped reading each workload's output, so
	// that the runtime that takes it back goes on from there
	// (handover.go). Empty keeps nothing: a workload taken back shows its
	// output from then on.
	StateDir string

	// DefaultCPUCoresPerGPU and DefaultMemoryMBPerGPU size a workload whose
	// job does not: default 2 cores and 8192 MB per GPU (a workload on no
	// GPUs counts as on one).
	DefaultCPUCoresPerGPU float64
	DefaultMemoryMBPerGPU int
	// MaxCPUCores and MaxMemoryMB cap every workload: default all the
	// engine's CPUs, and its memory less 1 GiB.
	MaxCPUCores float64
	MaxMemoryMB int
	// PidsLimit caps a workload's processes and threads; default 4096.
	PidsLimit int64
	// TmpMB sizes the tmpfs at /tmp; default 1024. It counts as memory.
	TmpMB int
	// MaxDiskMB caps what a workload's volumes (/scratch, /checkpoint and
	// its image's) may hold, measured every DiskCheckEvery; a workload over
	// it is killed (disk.go). Defaults 102400 (100 GiB) and a minute.
	MaxDiskMB      int
	DiskCheckEvery time.Duration

	// AllowedCapabilities are the capabilities a workload may be granted
	// (Workload.Capabilities), e.g. "SYS_PTRACE"; default none.
	AllowedCapabilities []string
	// NoNetwork runs every workload with no network.
	NoNetwork bool
	// CheckpointTTL is how long a checkpoint volume is kept, from when it
	// was made, once no workload uses it: Adopt (the agent's start)
	// removes older ones. Default a week.
	CheckpointTTL time.Duration

	// network is the ID of WorkloadNetwork, which New finds or makes.
	network string

	// User runs workloads whose image names no user, or root; default
	// DefaultUser (nobody).
	User string
	// LocalRegistries are registries (host[:port], as image references
	// name them) on the node's own machine or network that workloads may
	// pull from; every other registry must be public (checkRegistry).
	LocalRegistries []string
	// lookupHost resolves a registry's name; nil: the system's resolver.
	lookupHost func(ctx context.Context, host string) ([]netip.Addr, error)

	// NoPull refuses images that are not on the node already, instead of
	// pulling them. A workload's login then changes nothing, but a private
	// image (PrivateRepository) does not run for a workload without one,
	// since the node cannot ask the registry whether the image is public.
	NoPull bool
}

// Runtime runs workloads in Docker containers. Make one with New.
type Runtime struct {
	cli       *client.Client
	ownClient bool
	opt       Options
	closing   context.Context // done once Close begins: ends Starts in flight
	close     context.CancelFunc
	procRoot  string    // where the host's processes are seen: /proc, or a test's
	pruned    time.Time // when pruneCheckpoints last ran; under mu

	mu         sync.Mutex
	running    map[string]*workload // by lease ID
	starting   map[string]bool      // lease IDs whose Start is in flight
	loginPulls map[string]int       // pulls with a login in flight, by repository
	digests    map[string]string    // adopted verifiable workloads' output digests, by lease ID (digest.go)
	closed     bool
	wg         sync.WaitGroup // one per Start in flight and per running workload
}

var (
	_ runtime.Runtime  = (*Runtime)(nil)
	_ runtime.Adopter  = (*Runtime)(nil)
	_ runtime.Detacher = (*Runtime)(nil)
)

// Timing of the runtime's calls to the engine.
const (
	engineTimeout  = 30 * time.Second // a cleanup or a kill
	logDrain       = 5 * time.Second  // how long the output may trail the exit
	maxLineBytes   = 64 << 10         // longer lines are split
	progressPrefix = "idlegrid:progress="
	checkpointLine = "idlegrid:checkpoint"
)

// envHint names the environment the Docker client read its settings from,
// for an error about them: they are the place to fix.
func envHint() string {
	var set []string
	for _, k := range []string{"DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_API_VERSION"} {
		if v, ok := os.LookupEnv(k); ok {
			set = append(set, fmt.Sprintf("%s=%q", k, v))
		}
	}
	if len(set) == 0 {
		return ""
	}
	return "; the Docker client read " + strings.Join(set, ", ") + " from the environment: fix or unset it (unset DOCKER_HOST uses the local socket)"
}

// New connects to the engine and returns a runtime. It fails, saying what
// to fix, when the engine cannot be reached.
func New(ctx context.Context, o Options) (*Runtime, error) {
	r := &Runtime{cli: o.Client, running: map[string]*workload{}, starting: map[string]bool{}, loginPulls: map[string]int{}, digests: map[string]string{}, procRoot: "/proc"}
	if r.cli == nil {
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return nil, fmt.Errorf("docker runtime: %w%s", err, envHint())
		}
		r.cli, r.ownClient = cli, true
	}
	info, err := r.cli.Info(ctx)
	if err != nil {
		r.closeClient()
		return nil, fmt.Errorf("docker runtime: cannot reach the Docker engine at %s: %w; is dockerd running, and may this user use its socket?", r.cli.DaemonHost(), err)
	}
	if err := o.setDefaults(info.NCPU, info.MemTotal); err != nil {
		r.closeClient()
		return nil, err
	}
	r.opt = o
	if r.opt.network, err = r.ensureNetwork(ctx); err != nil {
		r.closeClient()
		return nil, err
	}
	r.closing, r.close = context.WithCancel(context.Background())
	r.wg.Add(1)
	go r.watchDisk()
	return r, nil
}

func (o *Options) setDefaults(engineCPUs int, engineMemBytes int64) error {
	if o.Clock == nil {
		o.Clock = idlegrid.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.DefaultCPUCoresPerGPU <= 0 {
		o.DefaultCPUCoresPerGPU = 2
	}
	if o.DefaultMemoryMBPerGPU <= 0 {
		o.DefaultMemoryMBPerGPU = 8192
	}
	if o.MaxCPUCores <= 0 {
		o.MaxCPUCores = float64(max(1, engineCPUs))
	}
	if o.MaxMemoryMB <= 0 {
		mb := int(engineMemBytes >> 20)
		o.MaxMemoryMB = max(mb-1024, mb/2, 256)
	}
	if o.PidsLimit <= 0 {
		o.PidsLimit = 4096
	}
	if o.TmpMB <= 0 {
		o.TmpMB = 1024
	}
	if o.MaxDiskMB <= 0 {
		o.MaxDiskMB = 100 << 10
	}
	if o.DiskCheckEvery <= 0 {
		o.DiskCheckEvery = time.Minute
	}
	if o.User == "" {
		o.User = DefaultUser
	}
	if o.CheckpointTTL <= 0 {
		o.CheckpointTTL = 7 * 24 * time.Hour
	}
	allowed := o.AllowedCapabilities
	o.AllowedCapabilities = nil
	for _, c := range allowed { // normalized as workloads' grants are
		name := normalizeCap(c)
		if !capRE.MatchString(name) || name == "ALL" {
			return idlegrid.Invalid("runtime.allowed_capabilities", "%q is not a capability name (ALL, which gives every one, is refused)", c)
		}
		o.AllowedCapabilities = append(o.AllowedCapabilities, name)
	}
	return nil
}

// Start creates the lease's volumes and container, starts it, and returns
// once it runs. It pulls the image as the package comment says: always
// with the workload's login, else when the node lacks it or has it only as
// a private image.
func (r *Runtime) Start(ctx context.Context, w runtime.Workload, events chan<- runtime.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	} else if events == nil {
		return idlegrid.Invalid("events", "required")
	} else if err := r.opt.checkWorkload(w); err != nil {
		return err
	}
	if err := r.reserve(w.LeaseID); err != nil {
		return err
	}
	defer r.unreserve(w.LeaseID)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.closing, cancel)()

	wl, err := r.create(ctx, w, events)
	if err != nil {
		return err
	}
	r.mu.Lock()
	closed := r.closed
	if !closed {
		r.running[w.LeaseID] = wl
		r.wg.Add(1)
		go r.follow(wl)
	}
	r.mu.Unlock()
	if closed { // Close came after the container started
		r.remove(wl)
		wl.cancel()
		return errClosed
	}
	return nil
}

// reserve claims leaseID for a Start in flight.
func (r *Runtime) reserve(leaseID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errClosed
	} else if r.running[leaseID] != nil || r.starting[leaseID] {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s is already running", leaseID)
	}
	r.starting[leaseID] = true
	r.wg.Add(1)
	return nil
}

func (r *Runtime) unreserve(leaseID string) {
	r.mu.Lock()
	delete(r.starting, leaseID)
	r.mu.Unlock()
	r.wg.Done()
}

// create makes everything the workload needs and starts its container. On
// failure it removes what it made, except a checkpoint that was there.
func (r *Runtime) create(ctx context.Context, w runtime.Workload, events chan<- runtime.Event) (*workload, error) {
	if err := r.removeStale(ctx, w.LeaseID); err != nil {
		return nil, err
	}
	img, err := r.ensureImage(ctx, w)
	if err != nil {
		return nil, err
	}
	if err := noCommand(w, img); err != nil {
		return nil, err
	}
	// From here on the runtime makes things on the engine. The engine may
	// carry out a request whose caller gave up, leaving a container or a
	// volume nobody removes, so these requests run to their end even when
	// ctx ends (the agent shutting down); the agent stops what started.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*engineTimeout)
	defer cancel()
	ckptExists, err := r.volumeExists(ctx, CheckpointVolume(w.JobID))
	if err != nil {
		return nil, err
	}
	ckpt, note := checkpointPlan(w, ckptExists)
	s := r.opt.sandboxFor(w, img.ID, imageUser(img), ckpt)
	if note != "" {
		s.notes = append([]string{note}, s.notes...)
	}
	wl := r.newWorkload(w.LeaseID, w.JobID, events)
	wl.scratch, wl.checkpoint, wl.notes, wl.memoryBytes = scratchVolume(w.LeaseID), ckpt, s.notes, s.host.Memory
	wl.gpus, wl.tier, wl.notice = w.GPUs, w.Job.Tier, w.Notice
	if err := r.createVolumes(ctx, w, ckpt); err != nil {
		r.removeFailed(wl, ckptExists)
		return nil, err
	}
	if err := r.setVolumeOwner(ctx, w, img.ID, s); err != nil {
		r.removeFailed(wl, ckptExists)
		return nil, err
	}
	wl.notes = s.notes // with what resolveUser said
	if err := r.startContainer(ctx, wl, s); err != nil {
		r.removeFailed(wl, ckptExists)
		return nil, err
	}
	return wl, nil
}

// startContainer creates and starts the workload's container, watching for
// its exit from before it starts so that no exit is missed.
func (r *Runtime) startContainer(ctx context.Context, wl *workload, s *sandbox) error {
	created, err := r.cli.ContainerCreate(ctx, s.config, s.host, nil, nil, containerName(wl.leaseID))
	if err != nil {
		return fmt.Errorf("docker runtime: create the container: %w", explainCreate(err, s))
	}
	wl.containerID = created.ID
	for _, warning := range created.Warnings {
		wl.notes = append(wl.notes, "docker: "+warning)
	}
	wl.waitC, wl.errC = r.cli.ContainerWait(wl.ctx, created.ID, container.WaitConditionNextExit)
	if err := r.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return startError(err, s)
	}
	return nil
}

// startError explains why the engine would not start the container. The
// engine calls the job's command not being in its image, or not runnable,
// an invalid parameter, as the OCI runtime's "exec:" failure: that is the
// renter's to mend (EINVALID). Other invalid parameters, and the GPU
// runtime's failures, are the node's.
func startError(err error, s *sandbox) error {
	if cerrdefs.IsInvalidArgument(err) && containsAny(err.Error(), "exec:", "executable file not found") && !isGPURuntimeError(err, s) {
		return idlegrid.Errorf(idlegrid.EINVALID, "the job's command cannot run in its image: %v; check the job's command and the image's entrypoint", err)
	}
	return fmt.Errorf("docker runtime: start the container: %w", explainCreate(err, s))
}

// noCommand refuses an image that has no command when the job names none.
func noCommand(w runtime.Workload, img image.InspectResponse) error {
	if len(w.Job.Command) > 0 || img.Config != nil && (len(img.Config.Entrypoint) > 0 || len(img.Config.Cmd) > 0) {
		return nil
	}
	return idlegrid.Errorf(idlegrid.EINVALID, "image %s has no command (no ENTRYPOINT or CMD), and the job names none; give the job a command", w.Job.Image)
}

// removeStale removes the lease's container that an earlier agent left,
// unless it still runs: that one is an ECONFLICT, for Adopt to take back.
func (r *Runtime) removeStale(ctx context.Context, leaseID string) error {
	info, err := r.cli.ContainerInspect(ctx, containerName(leaseID))
	if cerrdefs.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("docker runtime: inspect container %s: %w", containerName(leaseID), err)
	} else if info.Config == nil || info.Config.Labels[LabelManagedBy] != ManagedBy {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "a container called %s, not made by idlegrid, is in the way", containerName(leaseID))
	} else if info.Config.Labels[LabelNode] != r.opt.NodeID {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "a container called %s, another node's (%s), is in the way", containerName(leaseID), info.Config.Labels[LabelNode])
	} else if info.State != nil && info.State.Running {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "a container for lease %s already runs on this node, left by an earlier agent; Adopt takes it back", leaseID)
	}
	r.removeContainer(info.ID)
	r.removeVolume(scratchVolume(leaseID)) // the lease starts with an empty scratch
	return nil
}

// explainCreate adds what to fix to an engine error the node's owner can fix.
func explainCreate(err error, s *sandbox) error {
	if isGPURuntimeError(err, s) {
		return fmt.Errorf("%w (is the NVIDIA Container Toolkit installed and configured for Docker? see deploy/README.md)", err)
	}
	return err
}

// isGPURuntimeError reports whether err came from giving the workload its
// GPUs: the NVIDIA Container Toolkit missing or failing.
func isGPURuntimeError(err error, s *sandbox) bool {
	return len(s.host.DeviceRequests) > 0 && containsAny(err.Error(), "could not select device driver", "nvidia-container-cli", "unknown or invalid runtime")
}

// Stop asks the lease's workload to end: SIGTERM now, SIGKILL after grace.
func (r *Runtime) Stop(leaseID string, grace time.Duration) error {
	r.mu.Lock()
	wl := r.running[leaseID]
	r.mu.Unlock()
	if wl == nil {
		return idlegrid.Errorf(idlegrid.ENOTFOUND, "no workload runs for lease %s", leaseID)
	}
	wl.requestStop(grace)
	return nil
}

// Close kills every workload, ends any Start in flight, and returns once
// every Exit is sent.
func (r *Runtime) Close() error {
	r.mu.Lock()
	r.closed = true
	r.close()
	for _, wl := range r.running {
		wl.killNow()
	}
	r.mu.Unlock()
	r.wg.Wait()
	r.closeClient()
	return nil
}

// Detach stops following every workload and leaves its container running
// as it is, for the next agent's Adopt (runtime.Detacher): the agent
// upgraded in place. Each workload's events end with one whose Detached
// is set; a Start in flight fails and removes what it made, as after
// Close. It returns once those events are sent; Close then kills nothing.
func (r *Runtime) Detach() error {
	r.leave(true)
	return nil
}

// detach is what a crashed agent leaves behind: every workload unfollowed,
// no event sent, the engine's client closed. It exists for tests of
// adoption.
func (r *Runtime) detach() {
	r.leave(false)
	r.closeClient()
}

// leave stops following every workload and leaves their containers as
// they are; tell ends each one's events with a Detached event.
func (r *Runtime) leave(tell bool) {
	r.mu.Lock()
	r.closed = true
	r.close()
	left := make([]*workload, 0, len(r.running))
	for _, wl := range r.running {
		wl.tellDetached.Store(tell)
		wl.cancel()
		left = append(left, wl)
	}
	r.mu.Unlock()
	r.wg.Wait()
	if tell {
		r.keepHandedOver(left)
	}
}

func (r *Runtime) closeClient() {
	if r.ownClient {
		r.cli.Close()
	}
}

// Adopt takes back the workloads of this node that no running Runtime
// follows (see the package comment) and returns their lease IDs; their
// events may begin before it returns. It also removes what a crash left
// half made: containers created but never started, prep containers, and
// scratch volumes whose container is gone. On an error, the leases it
// returns are adopted all the same.
//
// Adopt does not kill what it finds: the server may still want the work.
// The agent stops the leases the server no longer runs on this node.
func (r *Runtime) Adopt(ctx context.Context, events chan<- runtime.Event) ([]string, error) {
	if events == nil {
		return nil, idlegrid.Invalid("events", "required")
	}
	found, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: r.nodeFilter()})
	if err != nil {
		return nil, fmt.Errorf("docker runtime: list the node's containers: %w", err)
	}
	var adopted []string
	var errs []error
	handedOver := r.readHandedOver()
	for _, c := range found {
		lease, role := c.Labels[LabelLease], c.Labels[LabelRole]
		if role == rolePrep && !r.isStarting(lease) {
			r.removeContainer(c.ID)
			continue
		} else if role != roleWorkload || lease == "" {
			continue
		}
		// One container the engine fails to show leaves the others to
		// be taken back all the same.
		readTo, handed := handedOver[lease]
		ok, err := r.adopt(ctx, c.ID, lease, c.Labels[LabelJob], events, handed, readTo)
		if err != nil {
			errs = append(errs, err)
		} else if ok {
			adopted = append(adopted, lease)
		}
	}
	if len(errs) == 0 {
		r.forgetHandedOver()
	}
	r.removeOrphanScratch(ctx)
	r.prunePeriodically(ctx)
	return adopted, errors.Join(errs...)
}

// adopt follows one container found by Adopt, unless it is already
// followed; handedOver says a Detach left it, its output read to readTo.
func (r *Runtime) adopt(ctx context.Context, id, leaseID, jobID string, events chan<- runtime.Event, handedOver bool, readTo time.Time) (bool, error) {
	info, err := r.cli.ContainerInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("docker runtime: inspect container %s: %w", id, err)
	}
	wl := r.newWorkload(leaseID, jobID, events)
	wl.containerID, wl.adopted, wl.handedOver, wl.readTo = id, true, handedOver, readTo
	if info.HostConfig != nil {
		wl.memoryBytes = info.HostConfig.Memory
	}
	if info.Config != nil {
		wl.gpus = gpusFromEnv(info.Config.Env)
		wl.tier = idlegrid.Tier(info.Config.Labels[LabelTier])
		wl.notice = noticeLabel(info.Config.Labels[LabelNotice])
		wl.verifiable = info.Config.Labels[LabelVerifiable] == "true"
	}
	for _, m := range info.Mounts {
		switch m.Destination {
		case ScratchDir:
			wl.scratch = m.Name
		case CheckpointDir:
			wl.checkpoint = m.Name
		}
	}
	if info.State != nil && info.State.Status == "created" {
		// The agent stopped between creating it and starting it: the lease
		// never ran, and the server will ask for it again.
		r.remove(&workload{leaseID: leaseID, containerID: id, scratch: scratchVolume(leaseID)})
		return false, nil
	}
	switch {
	case handedOver:
		wl.notes = []string{"the node agent handed the workload over to a new one, which goes on with its output"}
	case info.State != nil && info.State.Running:
		wl.notes = []string{"the node agent restarted and took the workload back; output written meanwhile is not shown"}
	default:
		wl.notes = []string{"the node agent restarted and found that the workload had ended meanwhile"}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false, errClosed
	} else if r.running[leaseID] != nil || r.starting[leaseID] {
		return false, nil
	}
	wl.waitC, wl.errC = r.cli.ContainerWait(wl.ctx, id, container.WaitConditionNotRunning)
	r.running[leaseID] = wl
	r.wg.Add(1)
	go r.follow(wl)
	return true, nil
}

func (r *Runtime) isStarting(leaseID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starting[leaseID]
}

func (r *Runtime) nodeFilter() filters.Args {
	return filters.NewArgs(
		filters.Arg("label", LabelManagedBy+"="+ManagedBy),
		filters.Arg("label", LabelNode+"="+r.opt.NodeID),
	)
}

// RemoveCheckpoint deletes a checkpoint this runtime reported, e.g. once
// its job has ended for good. A checkpoint that is gone already is not an
// error.
func (r *Runtime) RemoveCheckpoint(ctx context.Context, ref string) error {
	name, ok := strings.CutPrefix(ref, CheckpointRefPrefix)
	if !ok || !nameRE.MatchString(name) {
		return idlegrid.Invalid("checkpoint_ref", "%q is not a Docker checkpoint of this runtime", ref)
	}
	v, err := r.cli.VolumeInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	} else if v.Labels[LabelManagedBy] != ManagedBy || v.Labels[LabelRole] != roleCheckpoint {
		return idlegrid.Invalid("checkpoint_ref", "volume %s is not an idlegrid checkpoint", name)
	}
	if err := r.cli.VolumeRemove(ctx, name, false); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker runtime: remove checkpoint %s: %w", name, err)
	}
	return nil
}

func containsAny(s string, subs ...string) bool {
	return slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(s, sub) })
}
