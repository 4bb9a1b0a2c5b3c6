package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/runtime"
	"github.com/idlegrid/idlegrid/internal/runtime/docker"
	runtimefake "github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// dockerNodeID is the name the docker runtime labels a node's containers
// with: a fingerprint of the node's public key, which stays the same
// across restarts and is known before the node has joined (its node ID is
// not), so that a restarted agent adopts its own containers and no other
// node's.
func dockerNodeID(key ed25519.PrivateKey) string {
	sum := sha256.Sum256(key.Public().(ed25519.PublicKey))
	return "key-" + hex.EncodeToString(sum[:8])
}

// agentRuntime is the runtime an agent runs its leases' workloads in, and
// a line saying which it is.
type agentRuntime struct {
	runtime.Runtime
	about string
}

// openRuntime makes the runtime cfg chooses (see agent.Config.RuntimeName).
// The docker one connects to the engine, or fails saying what to fix; the
// agent adopts the containers an earlier agent of this node left.
func openRuntime(ctx context.Context, cfg *agent.Config, key ed25519.PrivateKey, getenv func(string) string, logger *slog.Logger) (*agentRuntime, error) {
	switch cfg.RuntimeName() {
	case agent.RuntimeFake:
		speed := cfg.FakeSpeed
		if speed == 0 {
			speed = 1
		}
		return &agentRuntime{&runtimefake.Runtime{Speed: speed}, fmt.Sprintf("fake (simulated workloads, %gx real time)", speed)}, nil
	}
	cli, err := dockerClient(getenv)
	if err != nil {
		return nil, fmt.Errorf("docker runtime: %w", err)
	}
	rt, err := docker.New(ctx, docker.Options{Client: cli, NodeID: dockerNodeID(key), Logger: logger, StateDir: filepath.Join(cfg.DataDir, "docker"),
		AllowedCapabilities: cfg.Sandbox.Capabilities, LocalRegistries: cfg.Sandbox.LocalRegistries,
		MaxDiskMB: cfg.Sandbox.MaxDiskGB << 10})
	if err != nil {
		cli.Close()
		return nil, withHint(err, "start Docker (systemctl enable --now docker) and run 'idlegrid agent --check'; or set runtime: fake (--runtime fake) to simulate workloads")
	}
	return &agentRuntime{&closingClient{Runtime: rt, close: cli.Close}, "docker at " + cli.DaemonHost() + ", containers labelled idlegrid.node=" + dockerNodeID(key)}, nil
}

// closingClient closes the Docker client the runtime was given once the
// runtime is closed, since a runtime does not close a client it was given.
type closingClient struct {
	*docker.Runtime
	close func() error
}

func (c *closingClient) Close() error {
	err := c.Runtime.Close()
	c.close()
	return err
}
