package agent

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"testing"

	gpufake "github.com/idlegrid/idlegrid/internal/gpu/fake"
)

// refuseSetBack is a fake detector one GPU of which refuses power limits.
type refuseSetBack struct {
	*gpufake.Detector
	bad string
}

func (f refuseSetBack) SetPowerLimit(ctx context.Context, uuid string, w int) (int, error) {
	if uuid == f.bad {
		return 0, errors.New("Not Supported")
	}
	return f.Detector.SetPowerLimit(ctx, uuid, w)
}

// TestRestorePowerLimits_pastARefusal checks that one GPU refusing its
// limit back leaves no other capped, that the record keeps only what was
// not set back, and that the refusal is returned.
func TestRestorePowerLimits_pastARefusal(t *testing.T) {
	det, err := gpufake.Parse("3xRTX4090", "node")
	if err != nil {
		t.Fatal(err)
	}
	devs, _ := det.Detect(context.Background())
	dir := t.TempDir()
	a := &Agent{cfg: &Config{DataDir: dir}, det: refuseSetBack{det, devs[1].UUID}, log: slog.New(slog.DiscardHandler),
		powerWas: powerWas{devs[0].UUID: 400, devs[1].UUID: 410, devs[2].UUID: 420}}
	mustOK(t, a.writePowerWas())

	err = a.restorePowerLimits()
	if err == nil || !strings.Contains(err.Error(), devs[1].UUID) {
		t.Errorf("restorePowerLimits = %v, want GPU 1's refusal", err)
	}
	back := map[string]int{}
	for _, l := range det.PowerLimits() {
		back[l.UUID] = l.Watts
	}
	if want := map[string]int{devs[0].UUID: 400, devs[2].UUID: 420}; !maps.Equal(back, want) {
		t.Errorf("set back %v, want %v", back, want)
	}
	if was, err := readPowerWas(dir); err != nil || !maps.Equal(was, powerWas{devs[1].UUID: 410}) {
		t.Errorf("power.json = %v, %v; want GPU 1's limit alone, for the next start", was, err)
	}

	a.det = det // the next start: GPU 1 takes it
	if err := a.restorePowerLimits(); err != nil {
		t.Errorf("restorePowerLimits = %v, want nil", err)
	}
	if was, err := readPowerWas(dir); err != nil || len(was) != 0 {
		t.Errorf("power.json = %v, %v; want it gone", was, err)
	}
}
