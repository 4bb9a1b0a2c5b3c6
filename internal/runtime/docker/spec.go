package docker

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// Labels on every container and volume the runtime makes. ManagedBy marks
// them as the agent's, for adoption; the others say whose they are.
const (
	LabelManagedBy = "idlegrid.managed-by"
	LabelLease     = "idlegrid.lease"
	LabelJob       = "idlegrid.job"
	LabelNode      = "idlegrid.node"
	LabelRole      = "idlegrid.role" // workload, prep, scratch or checkpoint
	LabelImage     = "idlegrid.image"
	LabelTier      = "idlegrid.tier" // the lease's SLA tier, so that an adopted bronze lease still gets notice
	// LabelNotice is the notice the lease is owed (runtime.Workload.Notice,
	// as a Go duration, e.g. "2m0s"), so that a lease taken back after a
	// restart still gets its own notice rather than the agent's default.
	LabelNotice = "idlegrid.notice"
	// LabelVerifiable marks a verifiable job's workload, so that one taken
	// back after a restart still gives its output's digest (digest.go).
	LabelVerifiable = "idlegrid.verifiable"

	ManagedBy = "idlegrid-agent"
)

// Roles of the things the runtime makes.
const (
	roleWorkload   = "workload"
	rolePrep       = "prep" // a container that is never started; it sets the volumes' owner
	roleScratch    = "scratch"
	roleCheckpoint = "checkpoint"
)

// Where a workload finds its volumes.
const (
	ScratchDir    = "/scratch"    // writable, per lease, wiped after it
	CheckpointDir = "/checkpoint" // writable, per job, kept until the job succeeds
)

// CheckpointRefPrefix begins the checkpoint reference the runtime reports,
// e.g. "docker-volume:idlegrid-ckpt-job_x".
const CheckpointRefPrefix = "docker-volume:"

// FakeGPUPrefix begins the UUIDs of the fake GPUs of development nodes. A
// workload on fake GPUs gets no device request: it runs on CPUs, told which
// GPUs it holds only by IDLEGRID_GPUS.
const FakeGPUPrefix = "GPU-fake-"

// DefaultUser is who a workload runs as when its image names no user or
// names root: nobody.
const DefaultUser = "65534:65534"

var (
	nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,100}$`)
	capRE  = regexp.MustCompile(`^[A-Z][A-Z0-9_]{1,30}$`)
)

// reservedEnv are prefixes of variables the node sets. A job may not set
// them: NVIDIA_VISIBLE_DEVICES=all would show it every GPU on the node.
var reservedEnv = []string{"NVIDIA_", "IDLEGRID_"}

func containerName(leaseID string) string { return "idlegrid-" + leaseID }
func prepName(leaseID string) string      { return "idlegrid-prep-" + leaseID }
func scratchVolume(leaseID string) string { return "idlegrid-scratch-" + leaseID }

// CheckpointVolume is the name of the volume that keeps a job's checkpoint.
func CheckpointVolume(jobID string) string { return "idlegrid-ckpt-" + jobID }

// CheckpointRef is the reference the runtime reports for a job's checkpoint.
func CheckpointRef(jobID string) string { return CheckpointRefPrefix + CheckpointVolume(jobID) }

// sandbox is a workload's container as the runtime will create it, decided
// from the workload and the node's options before the engine is asked.
type sandbox struct {
	config *container.Config
	host   *container.HostConfig
	notes  []string // told to the workload's log before its output

	// The volumes' owner and mode, set through the prep container: the
	// workload's user when it is numeric, else root with a sticky,
	// world-writable mode.
	uid, gid int
	mode     int64
}

// checkWorkload refuses a workload the runtime cannot or must not run.
func (o *Options) checkWorkload(w runtime.Workload) error {
	switch {
	case !nameRE.MatchString(w.LeaseID):
		return idlegrid.Invalid("workload.lease_id", "%q: want letters, digits, '_', '.' or '-'", w.LeaseID)
	case !nameRE.MatchString(w.JobID):
		return idlegrid.Invalid("workload.job_id", "%q: want letters, digits, '_', '.' or '-'", w.JobID)
	case strings.TrimSpace(w.Job.Image) == "":
		return idlegrid.Invalid("job.image", "required")
	case idlegrid.IsPrivateMark(w.Job.Image):
		return idlegrid.Invalid("job.image", "the repository %s is the node's, for its marks of private images", PrivateRepository)
	}
	if err := checkLogin(w); err != nil {
		return err
	}
	for k := range w.Job.Env {
		for _, p := range reservedEnv {
			if strings.HasPrefix(strings.ToUpper(k), p) {
				return idlegrid.Invalid("job.env."+k, "variables beginning %s are set by the node, not the job", p)
			}
		}
	}
	fake := 0
	for _, u := range w.GPUs {
		if u == "" || strings.ContainsAny(u, ", ") {
			return idlegrid.Invalid("workload.gpus", "%q is not a GPU UUID", u)
		} else if strings.HasPrefix(u, FakeGPUPrefix) {
			fake++
		}
	}
	if fake != 0 && fake != len(w.GPUs) {
		return idlegrid.Invalid("workload.gpus", "mixes fake and real GPUs: %s", strings.Join(w.GPUs, ","))
	}
	_, err := o.capabilities(w.Capabilities)
	return err
}

// checkLogin refuses a login for another registry than the image's: the
// server hands the node the renter's login for the image's registry, and
// no other registry may see it.
func checkLogin(w runtime.Workload) error {
	if w.RegistryAuth == nil {
		return nil
	}
	reg, err := idlegrid.ImageRegistry(w.Job.Image)
	if err != nil {
		return idlegrid.Invalid("job.image", "%q is not an image reference: %v", w.Job.Image, err)
	} else if !strings.EqualFold(reg, w.RegistryAuth.Registry) {
		return idlegrid.Invalid("workload.registry_auth", "the login is for %s, but image %s comes from %s", w.RegistryAuth.Registry, w.Job.Image, reg)
	}
	return nil
}

// capabilities normalizes the capabilities a workload is granted
// ("cap_sys_ptrace" → "SYS_PTRACE") and refuses any the node does not allow.
func (o *Options) capabilities(granted []string) ([]string, error) {
	var out []string
	for _, c := range granted {
		name := normalizeCap(c)
		if !capRE.MatchString(name) || name == "ALL" {
			return nil, idlegrid.Invalid("workload.capabilities", "%q is not a capability name", c)
		} else if !slices.Contains(o.AllowedCapabilities, name) {
			return nil, idlegrid.Invalid("workload.capabilities", "%s is not allowed on this node (allowed: %s)", name, orNone(o.AllowedCapabilities))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// normalizeCap spells a capability as Docker does: "cap_sys_ptrace" → "SYS_PTRACE".
func normalizeCap(c string) string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(c)), "CAP_")
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// sandboxFor builds the container for w from an image whose configured
// user is imageUser, with its checkpoint in checkpointVolume. It assumes
// checkWorkload passed.
func (o *Options) sandboxFor(w runtime.Workload, imageID, imageUser, checkpointVolume string) *sandbox {
	s := &sandbox{}
	caps, _ := o.capabilities(w.Capabilities)
	labels := o.labels(w.LeaseID, w.JobID, roleWorkload)
	labels[LabelImage] = w.Job.Image
	if w.Job.Tier != "" {
		labels[LabelTier] = string(w.Job.Tier)
	}
	if w.Notice > 0 {
		labels[LabelNotice] = w.Notice.String()
	}
	if w.Job.Verifiable {
		labels[LabelVerifiable] = "true"
	}
	s.config = &container.Config{
		Image:      imageID, // the image inspected, even if its tag moves meanwhile
		Cmd:        w.Job.Command,
		Env:        o.env(w),
		Labels:     labels,
		StopSignal: "SIGTERM",
	}
	s.runAs(o.userFor(imageUser))
	network := container.NetworkMode(cmp.Or(o.network, WorkloadNetwork))
	if o.NoNetwork || w.NoNetwork {
		network = "none"
	}
	s.host = &container.HostConfig{
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		CapAdd:         caps,
		SecurityOpt:    []string{"no-new-privileges:true"},
		NetworkMode:    network,
		IpcMode:        "private",
		CgroupnsMode:   container.CgroupnsModePrivate, // the host's by default on cgroup v1
		Mounts: []mount.Mount{
			{Type: mount.TypeVolume, Source: scratchVolume(w.LeaseID), Target: ScratchDir, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
			{Type: mount.TypeVolume, Source: checkpointVolume, Target: CheckpointDir, VolumeOptions: &mount.VolumeOptions{NoCopy: true}},
		},
		Tmpfs:         map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%dm,mode=1777", o.TmpMB)},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		// The runtime reads the output back through the engine, so the
		// driver must be one it can read, whatever the daemon's default:
		// json-file, since the local driver of older engines (20.10) loses
		// the end of a line over 16 KiB, joining it to the next.
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "20m", "max-file": "5"}},
	}
	s.host.Resources = s.resources(o, w)
	s.host.ShmSize = min(s.host.Memory/4, 8<<30) // PyTorch's data loaders share tensors through /dev/shm
	return s
}

// resources sets the workload's CPU, memory and pids limits and its GPUs.
// A job that names no CPU cores or memory gets the node's default per GPU;
// one that asks for more than the node's cap gets the cap, and a note says so.
func (s *sandbox) resources(o *Options, w runtime.Workload) container.Resources {
	perGPU := float64(max(1, len(w.GPUs)))
	cpus := float64(w.Job.CPUCores)
	if cpus <= 0 {
		cpus = o.DefaultCPUCoresPerGPU * perGPU
	}
	if cpus > o.MaxCPUCores {
		if w.Job.CPUCores > 0 {
			s.notef("the job asked for %d CPU cores; this node gives a workload at most %g", w.Job.CPUCores, o.MaxCPUCores)
		}
		cpus = o.MaxCPUCores
	}
	memMB := int64(w.Job.RAMMB)
	if memMB <= 0 {
		memMB = int64(float64(o.DefaultMemoryMBPerGPU) * perGPU)
	}
	if limit := memoryShare(o, w); memMB > limit {
		if w.Job.RAMMB > 0 {
			s.notef("the job asked for %d MB of memory; this node gives a workload on %d of its GPUs at most %d MB", w.Job.RAMMB, len(w.GPUs), limit)
		}
		memMB = limit
	}
	pids := o.PidsLimit
	r := container.Resources{
		NanoCPUs:   int64(cpus * 1e9),
		Memory:     memMB << 20,
		MemorySwap: memMB << 20, // no swap
		PidsLimit:  &pids,
		// No core dumps of a renter's memory on the node's disk. Open files
		// stay at the engine's own limit, which a container cannot raise.
		Ulimits: []*container.Ulimit{{Name: "core", Soft: 0, Hard: 0}},
	}
	if len(w.GPUs) > 0 && !strings.HasPrefix(w.GPUs[0], FakeGPUPrefix) {
		r.DeviceRequests = []container.DeviceRequest{{
			Driver:       "nvidia",
			DeviceIDs:    slices.Clone(w.GPUs),
			Capabilities: [][]string{{"gpu", "compute", "utility"}},
		}}
	}
	return r
}

// memoryShare is the most memory, in MB, a workload may have: the node's
// MaxMemoryMB, or the share of it that the workload's GPUs are of the
// node's, so that the node's workloads together fit in it.
func memoryShare(o *Options, w runtime.Workload) int64 {
	limit := int64(o.MaxMemoryMB)
	if w.NodeGPUs > len(w.GPUs) && len(w.GPUs) > 0 {
		limit = limit * int64(len(w.GPUs)) / int64(w.NodeGPUs)
	}
	return max(limit, 64)
}

// env is the workload's environment: the job's, then the node's variables,
// sorted so that the container's config is the same for the same workload.
func (o *Options) env(w runtime.Workload) []string {
	env := map[string]string{
		"HOME": ScratchDir, // the root filesystem is read-only
	}
	maps.Copy(env, w.Job.Env)
	env["IDLEGRID_LEASE_ID"] = w.LeaseID
	env["IDLEGRID_JOB_ID"] = w.JobID
	env["IDLEGRID_SCRATCH_DIR"] = ScratchDir
	env["IDLEGRID_CHECKPOINT_DIR"] = CheckpointDir
	env["IDLEGRID_GPUS"] = strings.Join(w.GPUs, ",")
	if ref := w.Job.CheckpointRef; ref != "" {
		env["IDLEGRID_CHECKPOINT_REF"] = ref
	}
	if len(w.GPUs) == 0 || strings.HasPrefix(w.GPUs[0], FakeGPUPrefix) {
		// No device request: whatever the image says (CUDA images say
		// NVIDIA_VISIBLE_DEVICES=all), a node whose default runtime is
		// NVIDIA's shows it no GPU and none of the driver ("void", where
		// "none" would still mount the driver's libraries). With one, the
		// engine sets both variables from the request, after the image's.
		env["NVIDIA_VISIBLE_DEVICES"] = "void"
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

func (o *Options) labels(leaseID, jobID, role string) map[string]string {
	l := map[string]string{LabelManagedBy: ManagedBy, LabelNode: o.NodeID, LabelJob: jobID, LabelRole: role}
	if leaseID != "" {
		l[LabelLease] = leaseID
	}
	return l
}

// userFor is who runs the workload: the image's own user unless that is
// root or unset, in which case the node's User.
func (o *Options) userFor(imageUser string) string {
	if imageUser != "" && !isRoot(imageUser) {
		return imageUser
	}
	return o.User
}

func isRoot(user string) bool {
	name, _, _ := strings.Cut(user, ":")
	uid, err := strconv.Atoi(name)
	return name == "" || name == "root" || err == nil && uid == 0
}

// numericUser parses "uid" or "uid:gid".
func numericUser(user string) (uid, gid int, ok bool) {
	u, g, hasGroup := strings.Cut(user, ":")
	uid, err := strconv.Atoi(u)
	if err != nil || uid < 0 {
		return 0, 0, false
	}
	gid = uid
	if hasGroup {
		if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
			return 0, 0, false
		}
	}
	return uid, gid, true
}

// checkpointPlan says which volume holds w's checkpoint and what to tell
// the workload about the job's checkpoint reference. It is always the
// job's own volume: a reference to another job's volume would let one
// renter read another's checkpoint, so it is ignored. exists says whether
// the job's volume is on this node already.
func checkpointPlan(w runtime.Workload, exists bool) (volume, note string) {
	volume = CheckpointVolume(w.JobID)
	switch ref := w.Job.CheckpointRef; {
	case ref == "":
	case ref == CheckpointRefPrefix+volume && exists:
		note = fmt.Sprintf("resuming from checkpoint %s, mounted at %s", ref, CheckpointDir)
	case ref == CheckpointRefPrefix+volume:
		note = fmt.Sprintf("checkpoint %s is not on this node; the job starts without it", ref)
	case strings.HasPrefix(ref, CheckpointRefPrefix):
		note = fmt.Sprintf("checkpoint %s is not this job's; ignored", ref)
	default:
		note = fmt.Sprintf("checkpoint %s is not a Docker volume; the workload finds it in IDLEGRID_CHECKPOINT_REF", ref)
	}
	return volume, note
}

func (s *sandbox) notef(format string, args ...any) {
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}
