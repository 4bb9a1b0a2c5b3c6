package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types"
)

// A workload writes to its scratch and checkpoint volumes, and to any an
// image's VOLUME lines give it; none of them has a size of its own (the
// local volume driver sizes volumes only on XFS with project quotas). So
// the runtime measures them: every DiskCheckEvery it asks the engine what
// each volume holds, and kills a workload whose volumes together hold more
// than MaxDiskMB, as the kernel kills one over its memory, saying why.

// diskUsageTimeout bounds one measure: the engine walks every volume.
const diskUsageTimeout = 2 * time.Minute

// watchDisk measures the running workloads' volumes every DiskCheckEvery
// until the runtime closes, or less often when a measure is slow: the
// engine walks every volume, the owner's too, and older engines (API
// before 1.42) every image and layer besides, so the watch waits at least
// ten times as long as its last measure took. A measure that fails is
// logged once, until one succeeds. It runs in its own goroutine, counted
// in r.wg.
func (r *Runtime) watchDisk() {
	defer r.wg.Done()
	t := time.NewTimer(r.opt.DiskCheckEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-r.closing.Done():
			return
		case <-t.C:
		}
		took := time.Duration(0)
		if r.anyRunning() {
			start := time.Now()
			err := r.measureDisk()
			took = time.Since(start)
			if err != nil && !failing && r.closing.Err() == nil {
				r.opt.Logger.Warn("docker runtime: cannot measure the workloads' disk use; their disk is not capped until it can", "err", err)
			}
			failing = err != nil
		}
		t.Reset(max(r.opt.DiskCheckEvery, 10*took))
	}
}

func (r *Runtime) anyRunning() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running) > 0
}

// measureDisk sums each of this node's workloads' volumes and kills those
// over MaxDiskMB.
func (r *Runtime) measureDisk() error {
	ctx, cancel := context.WithTimeout(r.closing, diskUsageTimeout)
	defer cancel()
	du, err := r.cli.DiskUsage(ctx, types.DiskUsageOptions{Types: []types.DiskUsageObject{types.ContainerObject, types.VolumeObject}})
	if err != nil {
		return err
	}
	sizes := map[string]int64{}
	for _, v := range du.Volumes {
		if v.UsageData != nil && v.UsageData.Size > 0 {
			sizes[v.Name] = v.UsageData.Size
		}
	}
	for _, c := range du.Containers {
		if c.Labels[LabelNode] != r.opt.NodeID || c.Labels[LabelRole] != roleWorkload {
			continue
		}
		used := max(c.SizeRw, 0)
		for _, m := range c.Mounts {
			used += sizes[m.Name]
		}
		if limit := int64(r.opt.MaxDiskMB) << 20; used > limit {
			r.overDisk(c.Labels[LabelLease], used)
		}
	}
	return nil
}

// overDisk kills the lease's workload, which holds used bytes on disk,
// and has finish tell it why.
func (r *Runtime) overDisk(leaseID string, used int64) {
	r.mu.Lock()
	wl := r.running[leaseID]
	r.mu.Unlock()
	if wl == nil {
		return
	}
	if wl.setDiskNote(fmt.Sprintf("the workload used %d MB of disk in its volumes (/scratch, /checkpoint and its image's), over this node's limit of %d MB; it was killed",
		used>>20, r.opt.MaxDiskMB)) {
		wl.signal("SIGKILL")
	}
}

// setDiskNote records why the workload is killed for its disk, once; it
// reports whether this was the first time.
func (wl *workload) setDiskNote(note string) bool {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if wl.diskNote != "" {
		return false
	}
	wl.diskNote = note
	return true
}

func (wl *workload) diskNoted() string {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	return wl.diskNote
}
