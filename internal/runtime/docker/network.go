package docker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
)

// WorkloadNetwork is the bridge network workloads run on, unless they have
// no network: one for every idlegrid node on the engine, with traffic
// between its containers turned off, so that a workload reaches the
// internet but not another renter's workload. Docker's default bridge lets
// containers reach each other.
const WorkloadNetwork = "idlegrid-workloads"

// iccOption is the bridge driver's switch for traffic between containers.
const iccOption = "com.docker.network.bridge.enable_icc"

// makingNetwork keeps the runtimes of one process from making the network
// twice: an engine before API 1.44 may let two creates of one name both
// succeed.
var makingNetwork sync.Mutex

// ensureNetwork makes WorkloadNetwork unless it is there, and returns its
// ID. Where agents in two processes made one each, the engine refuses to
// start containers on either, so every runtime keeps the oldest and
// removes the others. One that lets containers reach each other is
// refused.
func (r *Runtime) ensureNetwork(ctx context.Context) (string, error) {
	makingNetwork.Lock()
	defer makingNetwork.Unlock()
	nets, err := r.workloadNetworks(ctx)
	if err == nil && len(nets) == 0 {
		_, err = r.cli.NetworkCreate(ctx, WorkloadNetwork, network.CreateOptions{
			Driver:  "bridge",
			Options: map[string]string{iccOption: "false"},
			Labels:  map[string]string{LabelManagedBy: ManagedBy},
		})
		if err == nil {
			nets, err = r.workloadNetworks(ctx)
		}
	}
	if err == nil && len(nets) == 0 {
		err = fmt.Errorf("made, then not found")
	}
	if err != nil {
		return "", fmt.Errorf("docker runtime: make the workloads' network %s: %w", WorkloadNetwork, err)
	}
	for _, dup := range nets[1:] {
		r.removeNetwork(dup.ID)
	}
	n := nets[0]
	if n.Options[iccOption] != "false" {
		return "", fmt.Errorf("docker runtime: network %s lets containers reach each other (its %s is not false); remove it with docker network rm %s, and the agent makes it anew", WorkloadNetwork, iccOption, WorkloadNetwork)
	}
	return n.ID, nil
}

// Network is the ID of the network the runtime's workloads run on, unless
// they have none (WorkloadNetwork).
func (r *Runtime) Network() string { return r.opt.network }

// workloadNetworks lists the networks called WorkloadNetwork, oldest first.
func (r *Runtime) workloadNetworks(ctx context.Context) ([]network.Summary, error) {
	all, err := r.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", WorkloadNetwork))})
	if err != nil {
		return nil, err
	}
	named := slices.DeleteFunc(all, func(n network.Summary) bool { return n.Name != WorkloadNetwork })
	slices.SortFunc(named, func(a, b network.Summary) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return named, nil
}

// removeNetwork removes a second network called WorkloadNetwork, made at
// the same time as the first; one already in use stays, and is logged.
func (r *Runtime) removeNetwork(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	if err := r.cli.NetworkRemove(ctx, id); err != nil && !cerrdefs.IsNotFound(err) {
		r.opt.Logger.Warn("docker runtime: cannot remove a second workloads' network", "network", id, "err", err)
	}
}
