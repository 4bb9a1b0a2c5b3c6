package docker

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// containerIDRE finds a full container ID in a cgroup path. Engines and
// cgroup drivers name a container's cgroup differently, but always with
// its full ID: /docker/ID (cgroupfs), /system.slice/docker-ID.scope
// (systemd), …/cri-containerd-ID.scope, and under a parent cgroup when
// dockerd runs nested.
var containerIDRE = regexp.MustCompile(`[0-9a-f]{64}`)

// OwnsProcess reports whether the host process pid runs in one of the
// containers this runtime follows, by its cgroups (/proc/PID/cgroup). In
// when-idle mode the agent asks it about the processes on a GPU, so that
// its own workloads do not look like the owner's (agent.ProcessOwner). It
// sees host PIDs only where the agent does: an agent in a container needs
// the host's PID namespace.
func (r *Runtime) OwnsProcess(pid int) bool {
	ids := r.containerIDs()
	if len(ids) == 0 {
		return false
	}
	for _, id := range ProcessContainerIDs(r.procRoot, pid) {
		if ids[id] {
			return true
		}
	}
	return false
}

// ProcessContainerIDs returns the IDs of the containers whose cgroups the
// process pid is in, as procRoot (normally /proc) shows them: none for a
// process of the host, or one that is gone or not ours to see.
func ProcessContainerIDs(procRoot string, pid int) []string {
	if pid <= 0 {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return nil
	}
	var ids []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// hierarchy-ID:controllers:path; the path may itself hold ':'.
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, id := range containerIDRE.FindAllString(parts[2], -1) {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// containerIDs are the IDs of the containers the runtime follows now.
func (r *Runtime) containerIDs() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make(map[string]bool, len(r.running))
	for _, wl := range r.running {
		if wl.containerID != "" {
			ids[wl.containerID] = true
		}
	}
	return ids
}

// LeaseGPUs returns the UUIDs of the GPUs the lease's workload holds, or
// nil when the runtime does not follow it. For a workload Adopt took back,
// they come from its container's IDLEGRID_GPUS.
func (r *Runtime) LeaseGPUs(leaseID string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if wl := r.running[leaseID]; wl != nil {
		return append([]string(nil), wl.gpus...)
	}
	return nil
}

// LeaseTier returns the SLA tier of a workload the runtime follows, read
// back from its container's label when it was adopted; "" when unknown.
func (r *Runtime) LeaseTier(leaseID string) idlegrid.Tier {
	r.mu.Lock()
	defer r.mu.Unlock()
	if wl := r.running[leaseID]; wl != nil {
		return wl.tier
	}
	return ""
}

// LeaseNotice returns the notice owed to the lease of a workload the
// runtime follows (runtime.Workload.Notice), read back from its
// container's label when it was adopted; 0 when unknown.
func (r *Runtime) LeaseNotice(leaseID string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if wl := r.running[leaseID]; wl != nil {
		return wl.notice
	}
	return 0
}

// noticeLabel reads a container's LabelNotice; 0 when it has none, or one
// that is not a positive duration.
func noticeLabel(v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// gpusFromEnv reads IDLEGRID_GPUS from a container's environment.
func gpusFromEnv(env []string) []string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "IDLEGRID_GPUS="); ok && v != "" {
			return strings.Split(v, ",")
		}
	}
	return nil
}
