package agent_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu"
)

func TestConfig_Withdrawn(t *testing.T) {
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	dev := func(uuid string, f func(*gpu.Device)) gpu.Device {
		d := gpu.Device{GPU: idlegrid.GPU{UUID: uuid, Model: "RTX4090", VRAMMB: 24564}, TempC: 40}
		if f != nil {
			f(&d)
		}
		return d
	}
	devs := []gpu.Device{
		dev("GPU-idle", nil),
		dev("GPU-busy", func(d *gpu.Device) { d.UtilPct = 90 }),
		dev("GPU-game", func(d *gpu.Device) { d.Processes = []gpu.Process{{PID: 4242, Name: "/usr/games/factorio"}} }),
		dev("GPU-ours", func(d *gpu.Device) { d.Processes = []gpu.Process{{PID: 77, Name: "python"}} }),
		dev("GPU-desktop", func(d *gpu.Device) { d.Processes = []gpu.Process{{PID: 1, Name: "/usr/lib/xorg/Xorg"}} }),
		dev("GPU-hot", func(d *gpu.Device) { d.TempC = 91 }),
		dev("GPU-xid", func(d *gpu.Device) { d.XidErrors = []uint64{79} }),
	}
	ours := func(pid int) bool { return pid == 77 }
	t.Run("WhenIdle", func(t *testing.T) {
		c := mustParse(t, minimal+"mode: when-idle\nthermal_cap_c: 83\n")
		got := c.Withdrawn(now, devs, ours)
		want := map[string]string{
			"GPU-busy": "utilisation 90%",
			"GPU-game": "process 4242 (/usr/games/factorio)",
			"GPU-hot":  "thermal cap: 91°C",
			"GPU-xid":  "unhealthy: Xid 79",
		}
		if len(got) != len(want) {
			t.Errorf("withdrawn = %q, want the GPUs %q", got, want)
		}
		for uuid, mention := range want {
			if !strings.Contains(got[uuid], mention) {
				t.Errorf("%s: reason %q, want one mentioning %q", uuid, got[uuid], mention)
			}
		}
	})
	t.Run("Schedule", func(t *testing.T) {
		// Outside when-idle mode the owner's use does not matter.
		got := mustParse(t, minimal).Withdrawn(now, devs, nil)
		if len(got) != 1 || got["GPU-xid"] == "" {
			t.Errorf("withdrawn = %q, want only GPU-xid", got)
		}
	})
}
