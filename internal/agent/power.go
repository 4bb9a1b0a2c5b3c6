package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/idlegrid/idlegrid/internal/gpu"
)

// powerWas holds the power limits the node's GPUs had before the agent
// capped them (Config.PowerCapW), by UUID, in DATA_DIR/power.json from the
// first cap until the agent stops and sets them back: the cap is for
// renters' work, and the owner's own use of the GPU gets its own limit
// back. Kept on disk, so that an agent that crashed still knows them.
type powerWas map[string]int

func powerPath(dataDir string) string { return filepath.Join(dataDir, "power.json") }

// readPowerWas reads the limits a previous agent capped and never set
// back; none when there is no file.
func readPowerWas(dataDir string) (powerWas, error) {
	data, err := os.ReadFile(powerPath(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return powerWas{}, nil
	} else if err != nil {
		return powerWas{}, err
	}
	was := powerWas{}
	if err := json.Unmarshal(data, &was); err != nil {
		return powerWas{}, err
	}
	return was, nil
}

// notePowerLimit records the limit d has before the agent caps it, unless
// one is recorded: after a crash the limit d has is the cap.
func (a *Agent) notePowerLimit(d gpu.Device) error {
	if _, ok := a.powerWas[d.UUID]; ok || d.PowerLimitW <= 0 {
		return nil
	}
	a.powerWas[d.UUID] = d.PowerLimitW
	return writeJSONFile(powerPath(a.cfg.DataDir), a.powerWas)
}

// restorePowerLimits sets each GPU the agent capped back to the limit it
// had, when the agent stops.
func (a *Agent) restorePowerLimits() {
	pc, ok := a.det.(gpu.PowerController)
	if !ok || len(a.powerWas) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for uuid, w := range a.powerWas {
		if _, err := pc.SetPowerLimit(ctx, uuid, w); err != nil {
			a.log.Warn("could not set a GPU's power limit back", "gpu", uuid, "limit_w", w, "err", err)
			return // the file keeps them for the next start
		}
		delete(a.powerWas, uuid)
		a.log.Info("power limit set back", "gpu", uuid, "limit_w", w)
	}
	if err := os.Remove(powerPath(a.cfg.DataDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		a.log.Warn("could not remove the record of power limits", "err", err)
	}
}
