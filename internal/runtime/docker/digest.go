package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// unrotatedLogBytes is the most output, standard output and error
// together, that a workload's log surely holds whole. Its json-file log
// (sandboxFor) keeps up to five files of 20 MB and drops the oldest only
// when a fifth rotation comes, so whatever it holds below four files'
// worth is everything; each line takes its text and some 60 bytes of
// JSON there, so the raw output may come to somewhat less: half is a
// safe bound.
const unrotatedLogBytes = 40 << 20 // half of four 20 MB files

// keepDigest reads back the whole standard output of an adopted
// verifiable workload that exited 0, from its log, and keeps its digest
// for AdoptedOutputDigest. The agent hashed only the output it followed,
// which for a workload it took back began at the adoption. No digest is
// kept when the log cannot be read whole, or may have rotated away its
// beginning: the lease then goes without one, rather than with one of
// part of its output.
func (r *Runtime) keepDigest(ctx context.Context, wl *workload) {
	digest, ok := r.outputDigest(ctx, wl)
	if !ok {
		wl.note("cannot give the digest of the output of this verifiable workload, which the agent took back after a restart: its log no longer holds the whole output")
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.digests[wl.leaseID] = digest
}

// outputDigest is "sha256:" and the hex SHA-256 of the workload's standard
// output lines, each with a newline, as they would have gone as Log
// events (lineWriter): as the agent sums a workload it follows from the
// start.
func (r *Runtime) outputDigest(ctx context.Context, wl *workload) (string, bool) {
	rc, err := r.cli.ContainerLogs(ctx, wl.containerID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "all"})
	if err != nil {
		return "", false
	}
	defer rc.Close()
	sum := sha256.New()
	stdout := &lineWriter{wl: wl, stream: "stdout", sum: sum}
	stderr := &lineWriter{wl: wl, stream: "stderr", sum: io.Discard}
	n, err := stdcopy.StdCopy(stdout, stderr, rc)
	if err != nil || n >= unrotatedLogBytes {
		return "", false
	}
	stdout.flush()
	return "sha256:" + hex.EncodeToString(sum.Sum(nil)), true
}

// AdoptedOutputDigest is the digest of the whole standard output of the
// workload of leaseID, adopted after a restart, whose job is verifiable
// and which exited 0; ok is false for any other. It is kept from before
// the workload's Exit is sent until it is asked for, once.
func (r *Runtime) AdoptedOutputDigest(leaseID string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.digests[leaseID]
	delete(r.digests, leaseID)
	return d, ok
}
