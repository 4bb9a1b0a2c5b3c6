package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/idlegrid/idlegrid/internal/runtime"
)

func (r *Runtime) volumeExists(ctx context.Context, name string) (bool, error) {
	_, err := r.cli.VolumeInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("docker runtime: inspect volume %s: %w", name, err)
	}
	return true, nil
}

// createVolumes creates the lease's scratch volume and, unless it exists,
// the job's checkpoint volume.
func (r *Runtime) createVolumes(ctx context.Context, w runtime.Workload, checkpoint string) error {
	for _, v := range []struct{ name, lease, role string }{
		{scratchVolume(w.LeaseID), w.LeaseID, roleScratch},
		{checkpoint, "", roleCheckpoint},
	} {
		_, err := r.cli.VolumeCreate(ctx, volume.CreateOptions{Name: v.name, Labels: r.opt.labels(v.lease, w.JobID, v.role)})
		if err != nil {
			return fmt.Errorf("docker runtime: create volume %s: %w", v.name, err)
		}
	}
	return nil
}

// setVolumeOwner makes the workload's volumes writable for its user. A
// fresh volume belongs to root, and the workload's container cannot change
// that (its root filesystem is read-only, and the engine will not chown a
// mount's root from inside it), so a prep container of the same image,
// never started, takes a tar holding the two mount points with the owner
// and mode they must have. The prep container first gives the image's
// /etc/passwd to resolveUser, which settles who the workload runs as.
func (r *Runtime) setVolumeOwner(ctx context.Context, w runtime.Workload, imageID string, s *sandbox) error {
	r.removeContainer(prepName(w.LeaseID)) // one a crash left
	prep, err := r.cli.ContainerCreate(ctx,
		&container.Config{Image: imageID, Cmd: []string{"/idlegrid-prep-never-runs"}, Labels: r.opt.labels(w.LeaseID, w.JobID, rolePrep)},
		&container.HostConfig{Mounts: s.host.Mounts, NetworkMode: "none"},
		nil, nil, prepName(w.LeaseID))
	if err != nil {
		return fmt.Errorf("docker runtime: create the prep container: %w", err)
	}
	defer r.removeContainer(prep.ID)
	if err := r.resolveUser(ctx, prep.ID, s); err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range s.host.Mounts {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(m.Target, "/") + "/", Mode: s.mode, Uid: s.uid, Gid: s.gid}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := r.cli.CopyToContainer(ctx, prep.ID, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("docker runtime: set the owner of the workload's volumes: %w", err)
	}
	return nil
}

// removeFailed removes what a Start that failed made: the container, the
// scratch volume, and the checkpoint volume if the Start made it.
func (r *Runtime) removeFailed(wl *workload, checkpointExisted bool) {
	// A create whose request was cancelled (the agent shutting down) may
	// still have made its container, whose ID the runtime never got: the
	// names are known. The prep container goes first, since it holds the
	// volumes.
	r.removeContainer(prepName(wl.leaseID))
	if wl.containerID == "" {
		r.removeContainer(containerName(wl.leaseID))
	}
	r.remove(wl)
	if !checkpointExisted {
		r.removeVolume(wl.checkpoint)
	}
	wl.cancel()
}

// remove removes the workload's container and scratch volume.
func (r *Runtime) remove(wl *workload) {
	if wl.containerID != "" {
		r.removeContainer(wl.containerID)
	}
	if wl.scratch != "" {
		r.removeVolume(wl.scratch)
	}
}

func (r *Runtime) removeContainer(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	// RemoveVolumes: the anonymous volumes of an image's VOLUME lines go
	// with it, rather than fill the node's disk lease after lease; the
	// named scratch and checkpoint volumes are not the container's to take.
	err := r.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		r.opt.Logger.Warn("docker runtime: cannot remove a container", "container", id, "err", err)
	}
}

// removeVolume removes a volume no container uses. A volume in use stays.
func (r *Runtime) removeVolume(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	err := r.cli.VolumeRemove(ctx, name, false)
	if err != nil && !cerrdefs.IsNotFound(err) {
		r.opt.Logger.Warn("docker runtime: cannot remove a volume", "volume", name, "err", err)
	}
}

// removeOrphanScratch removes this node's scratch volumes that no workload
// uses: a crash between making one and starting its container leaves them.
func (r *Runtime) removeOrphanScratch(ctx context.Context) {
	args := r.nodeFilter()
	args.Add("label", LabelRole+"="+roleScratch)
	list, err := r.cli.VolumeList(ctx, volume.ListOptions{Filters: args})
	if err != nil {
		r.opt.Logger.Warn("docker runtime: cannot list scratch volumes", "err", err)
		return
	}
	for _, v := range list.Volumes {
		lease := v.Labels[LabelLease]
		r.mu.Lock()
		busy := r.running[lease] != nil || r.starting[lease]
		r.mu.Unlock()
		if !busy && r.unused(ctx, v.Name) {
			r.removeVolume(v.Name)
		}
	}
}

// pruneCheckpoints removes this node's checkpoint volumes that no
// container uses and that were made more than CheckpointTTL ago: the
// checkpoints of jobs that failed or were stopped here and never came
// back, which would otherwise fill the disk. A job requeued to this node
// within CheckpointTTL of its first lease here resumes from its own.
func (r *Runtime) pruneCheckpoints(ctx context.Context) {
	args := r.nodeFilter()
	args.Add("label", LabelRole+"="+roleCheckpoint)
	list, err := r.cli.VolumeList(ctx, volume.ListOptions{Filters: args})
	if err != nil {
		r.opt.Logger.Warn("docker runtime: cannot list checkpoint volumes", "err", err)
		return
	}
	cutoff := r.opt.Clock.Now().Add(-r.opt.CheckpointTTL)
	for _, v := range list.Volumes {
		made, err := time.Parse(time.RFC3339, v.CreatedAt)
		if err != nil || !made.Before(cutoff) || !r.unused(ctx, v.Name) {
			continue
		}
		r.opt.Logger.Info("docker runtime: removing an old checkpoint", "volume", v.Name, "made", made)
		r.removeVolume(v.Name)
	}
}

// prunePeriodically runs pruneCheckpoints when it has not run for an hour,
// so that an agent that runs for months keeps its disk too.
func (r *Runtime) prunePeriodically(ctx context.Context) {
	now := r.opt.Clock.Now()
	r.mu.Lock()
	due := now.Sub(r.pruned) >= time.Hour
	if due {
		r.pruned = now
	}
	r.mu.Unlock()
	if due {
		r.pruneCheckpoints(ctx)
	}
}

// unused reports whether no container, running or not, mounts the volume.
func (r *Runtime) unused(ctx context.Context, name string) bool {
	users, err := r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("volume", name))})
	return err == nil && len(users) == 0
}
