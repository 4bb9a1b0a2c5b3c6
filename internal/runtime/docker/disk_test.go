package docker

import (
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/runtime"
)

// TestRuntime_Start_DiskLimit: a workload whose volumes hold more than the
// node's MaxDiskMB is killed, as its own failure (not a stop), saying why;
// one under it runs to its end.
func TestRuntime_Start_DiskLimit(t *testing.T) {
	t.Parallel()
	r := mustRuntime(t, Options{MaxDiskMB: 8, DiskCheckEvery: 100 * time.Millisecond})
	under := testWorkload(map[string]string{"WORKLOAD_WRITE_MB": "2", "WORKLOAD_STEPS": "20"}) // a second: measured a few times
	over := testWorkload(map[string]string{"WORKLOAD_WRITE_MB": "20", "WORKLOAD_STEPS": "100000"})
	fine, filled := mustStart(t, r, under), mustStart(t, r, over)
	if got := filled.exited(t); got.Code != 137 || got.Stopped || got.Err != nil {
		t.Errorf("the workload over the limit exited %+v; want 137, killed, not stopped", got)
	}
	// Measured while it writes, or after: at least 9 MB of the 20.
	filled.mustHave(t, "stderr: [idlegrid] the workload used ", " MB of disk in its volumes (/scratch, /checkpoint and its image's), over this node's limit of 8 MB; it was killed")
	if got := fine.exited(t); got != (runtime.Exit{}) {
		t.Errorf("the workload under the limit exited %+v, want 0", got)
	}
	mustBeGone(t, over.LeaseID)
}
