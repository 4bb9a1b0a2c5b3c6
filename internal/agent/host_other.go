//go:build !(linux || darwin)

package agent

// diskGB is unknown on this platform; set disk_gb in the config.
func diskGB(dir string) int { return 0 }
