package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid/internal/dirlock"
)

// State is what a node remembers between runs, in DATA_DIR/node.json: who it
// became when it joined, and where. With it, a restarted agent does not join
// again.
type State struct {
	NodeID           string    `json:"node_id"`
	ProviderID       string    `json:"provider_id"`
	Server           string    `json:"server"` // the address it joined, as configured
	HeartbeatSeconds int       `json:"heartbeat_seconds"`
	JoinedAt         time.Time `json:"joined_at"`
}

// ErrDataDirInUse is what LockDataDir returns when another agent holds
// the data dir.
var ErrDataDirInUse = errors.New("the data dir is in use by another agent")

// LockDataDir makes dataDir and takes its lock (internal/dirlock) for as
// long as the agent runs: one agent at a time may be a node. A second
// would join again, or take over the first one's node key, session and
// containers.
func LockDataDir(dataDir string) (*dirlock.Lock, error) {
	lock, err := dirlock.Take(dataDir)
	if errors.Is(err, dirlock.ErrHeld) {
		return nil, fmt.Errorf("%w: %w", ErrDataDirInUse, err)
	} else if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	return lock, nil
}

// StatePath is where a node's state lives under dataDir.
func StatePath(dataDir string) string { return filepath.Join(dataDir, "node.json") }

// ReadState reads the node's state from dataDir; it returns nil and no
// error when the node has not joined yet.
func ReadState(dataDir string) (*State, error) {
	path := StatePath(dataDir)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil || s.NodeID == "" {
		return nil, fmt.Errorf("%s is corrupt; move it away to join again", path)
	}
	return &s, nil
}

// writeState saves s atomically: a crash leaves the old file or the new one.
func writeState(dataDir string, s *State) error {
	return writeJSONFile(StatePath(dataDir), s)
}

// writeJSONFile saves v as JSON at path atomically (writeFileAtomic).
func writeJSONFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// sameServer reports whether two server addresses name the same server,
// ignoring a default http:// scheme and trailing slashes.
func sameServer(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimRight(strings.TrimSpace(s), "/")
		return strings.TrimPrefix(s, "http://")
	}
	return norm(a) == norm(b)
}
