package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/idlegrid/idlegrid/internal/runtime/docker"
)

// devWorkloadRepo names the demo workload's image; its tag is a digest of
// the idlegrid binary (see selfImage).
const devWorkloadRepo = "idlegrid/dev-workload"

// devDocker is what 'idlegrid dev --runtime docker' keeps of the Docker
// engine: the client every node's runtime shares, the demo workload's
// image, and the nodes whose volumes it cleans up.
type devDocker struct {
	cli   *client.Client
	image string

	mu    sync.Mutex
	nodes []string // the runtimes' NodeIDs
}

// openDevDocker connects to the engine and builds the demo workload's
// image, or fails saying what to do.
func openDevDocker(ctx context.Context, getenv func(string) string) (*devDocker, error) {
	cli, err := dockerClient(getenv)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, checkDockerTimeout)
	defer cancel()
	if _, err := cli.Ping(pingCtx); err != nil {
		cli.Close()
		return nil, withHint(fmt.Errorf("idlegrid dev --runtime docker needs a Docker engine, and none answers at %s: %w", cli.DaemonHost(), err),
			"start Docker (systemctl start docker) or set DOCKER_HOST; or leave out --runtime docker to simulate the jobs")
	}
	image, err := selfImage(ctx, cli, devWorkloadRepo, "dev", "workload")
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("build the demo workload's image: %w", err)
	}
	return &devDocker{cli: cli, image: image}, nil
}

// runtime is a docker runtime for the node with key, on the shared engine.
// Images are never pulled: the demo workload's is local.
func (d *devDocker) runtime(ctx context.Context, key ed25519.PrivateKey, logger *slog.Logger) (*docker.Runtime, error) {
	id := dockerNodeID(key)
	rt, err := docker.New(ctx, docker.Options{Client: d.cli, NodeID: id, Logger: logger, NoPull: true})
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.nodes = append(d.nodes, id)
	d.mu.Unlock()
	return rt, nil
}

// close closes the client once every runtime is closed. A temporary demo
// market also removes the checkpoints its jobs left (the runtimes remove
// containers and scratch volumes themselves); a kept one keeps them, so
// that its requeued jobs resume when it runs again.
func (d *devDocker) close(temporary bool) error {
	defer d.cli.Close()
	if !temporary {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, node := range d.nodes {
		list, err := d.cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(
			filters.Arg("label", docker.LabelManagedBy+"="+docker.ManagedBy), filters.Arg("label", docker.LabelNode+"="+node))})
		if err != nil {
			errs = append(errs, fmt.Errorf("list the demo's volumes: %w", err))
			continue
		}
		for _, v := range list.Volumes {
			if err := d.cli.VolumeRemove(ctx, v.Name, false); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}
