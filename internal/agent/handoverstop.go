package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/idlegrid/idlegrid/internal/atomicfile"
)

// Where the agent cannot be sent SIGUSR2 and then replaced (a Kubernetes
// pod: the kubelet would start the same image again in the same pod),
// the hand-over can be asked ahead of the stop instead: 'idlegrid agent
// hand-over' leaves a file in the agent's data dir, and the agent, when
// it is next stopped (SIGTERM: the pod deleted by a rolling update),
// hands over rather than stop its workloads, if the file is still fresh.
// The file is taken at that stop, whatever its age, so it asks for one
// hand-over only.

// HandOverAtStopFile is the file in the data dir that asks the agent to
// hand over at its next stop.
const HandOverAtStopFile = "hand-over-at-stop.json"

// handOverAsk is what HandOverAtStopFile holds.
type handOverAsk struct {
	AskedAt time.Time `json:"asked_at"`
	Until   time.Time `json:"until"` // a stop after this stops the workloads, as without the file
}

// AskHandOverAtStop asks the agent running with dataDir to hand its
// workloads over to the next agent, rather than stop them, when it is
// next stopped before now+within.
func AskHandOverAtStop(dataDir string, now time.Time, within time.Duration) error {
	data, err := json.Marshal(handOverAsk{AskedAt: now.UTC(), Until: now.Add(within).UTC()})
	if err != nil {
		return err
	}
	path := filepath.Join(dataDir, HandOverAtStopFile)
	if err := atomicfile.Write(path, data); err != nil {
		return err
	}
	// Readable by an agent running as another user (systemd's
	// DynamicUser) than whoever asks; it says only until when.
	return os.Chmod(path, 0o644)
}

// ErrBadHandOverAsk is TakeHandOverAtStop's error for an ask it cannot
// read, which it removes.
var ErrBadHandOverAsk = errors.New("the ask to hand over at the next stop is corrupt")

// TakeHandOverAtStop reports whether the agent with dataDir was asked
// (AskHandOverAtStop) to hand over at a stop at now, and removes the ask.
func TakeHandOverAtStop(dataDir string, now time.Time) (bool, error) {
	path := filepath.Join(dataDir, HandOverAtStopFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := os.Remove(path); err != nil {
		return false, err
	}
	var ask handOverAsk
	if err := json.Unmarshal(data, &ask); err != nil || ask.Until.IsZero() {
		return false, fmt.Errorf("%s: %w; it is removed", path, ErrBadHandOverAsk)
	}
	return !now.After(ask.Until), nil
}
