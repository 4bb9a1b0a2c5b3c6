package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
// one is recorded: after a crash the limit d has is the cap. It reports
// whether it recorded it now, so that a cap that then fails forgets it
// (forgetPowerLimit). d.PowerLimitW is known (above 0).
func (a *Agent) notePowerLimit(d gpu.Device) (bool, error) {
	if _, ok := a.powerWas[d.UUID]; ok {
		return false, nil
	}
	a.powerWas[d.UUID] = d.PowerLimitW
	if err := a.writePowerWas(); err != nil {
		delete(a.powerWas, d.UUID)
		return false, err
	}
	return true, nil
}

// forgetPowerLimit forgets the limit recorded for a GPU the cap was not
// applied to after all: it has that limit still, and setting it "back" at
// stop would override whatever the owner sets meanwhile.
func (a *Agent) forgetPowerLimit(uuid string) {
	delete(a.powerWas, uuid)
	if err := a.writePowerWas(); err != nil {
		a.log.Warn("could not update the record of power limits", "file", powerPath(a.cfg.DataDir), "err", err)
	}
}

// writePowerWas writes the record of power limits to set back, or removes
// it when there are none.
func (a *Agent) writePowerWas() error {
	if len(a.powerWas) > 0 {
		return writeJSONFile(powerPath(a.cfg.DataDir), a.powerWas)
	}
	if err := os.Remove(powerPath(a.cfg.DataDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// restorePowerLimits sets each GPU the agent capped back to the limit it
// had, when the agent stops. A GPU that refuses does not keep the others
// capped: each is tried, and the record (power.json) is rewritten with
// only those not set back, for the next start to try again. It returns
// what went wrong, joined, having logged it.
func (a *Agent) restorePowerLimits() error {
	pc, ok := a.det.(gpu.PowerController)
	if !ok || len(a.powerWas) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, uuid := range slices.Sorted(maps.Keys(a.powerWas)) {
		w := a.powerWas[uuid]
		if _, err := pc.SetPowerLimit(ctx, uuid, w); err != nil {
			a.log.Warn("could not set a GPU's power limit back; the record keeps it for the next start", "gpu", uuid, "limit_w", w, "err", err)
			errs = append(errs, fmt.Errorf("set GPU %s's power limit back to %d W: %w", uuid, w, err))
			continue
		}
		delete(a.powerWas, uuid)
		a.log.Info("power limit set back", "gpu", uuid, "limit_w", w)
	}
	if err := a.writePowerWas(); err != nil {
		a.log.Warn("could not update the record of power limits", "file", powerPath(a.cfg.DataDir), "err", err)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
