package cli

import (
	"context"

	"github.com/idlegrid/idlegrid/internal/gcfloor"
)

// gcFloorFlag adds --gc-floor-mib to fs: the heap goal the long-running
// commands keep at least (gcfloor). A server's live heap is a few
// megabytes until its market grows, and at Go's default it would collect
// every few tens of milliseconds under load.
func gcFloorFlag(fs *flagSet) *int {
	return fs.Int("gc-floor-mib", gcfloor.DefaultFloor>>20, "keep the garbage collector's heap goal at least this many MiB, so that a small heap is not collected every few milliseconds under load; 0: Go's default (GOGC or GOMEMLIMIT in the environment also overrides it)")
}

// checkGCFloor validates --gc-floor-mib.
func checkGCFloor(mib int) error {
	if mib < 0 || mib > 1<<20 {
		return usagef("--gc-floor-mib must be between 0 and 1048576, got %d", mib)
	}
	return nil
}

// startGCFloor keeps the process's heap goal at least mib MiB until the
// returned stop is called, which waits for it to end; with 0 it does
// nothing.
func startGCFloor(ctx context.Context, mib int) (stop func()) {
	return gcfloor.Start(ctx, uint64(mib)<<20, gcfloor.DefaultInterval)
}
