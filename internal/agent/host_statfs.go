//go:build linux || darwin

package agent

import (
	"os"
	"path/filepath"
	"syscall"
)

// diskGB is the size of the file system that holds dir, or of its nearest
// existing parent, in GB (10^9 bytes, as disks are sold).
func diskGB(dir string) int {
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err == nil {
			return int(uint64(st.Blocks) * uint64(st.Bsize) / 1e9)
		} else if !os.IsNotExist(err) {
			return 0
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return 0
		}
		dir = parent
	}
}
