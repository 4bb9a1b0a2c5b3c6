package agent

import (
	"bufio"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
)

// Host is what the agent finds out about the machine it runs on. Config
// values, when set, take precedence.
type Host struct {
	Name     string // the host name, made fit for an offer
	CPUCores int
	RAMMB    int // 0 when unknown
	DiskGB   int // size of the file system holding the data dir; 0 when unknown
}

// DetectHost reads the machine's name, CPU count, memory and the size of the
// file system that holds dataDir. What cannot be read is left zero.
func DetectHost(dataDir string) Host {
	name, _ := os.Hostname()
	return Host{
		Name:     offerName(name),
		CPUCores: goruntime.NumCPU(),
		RAMMB:    memTotalMB("/proc/meminfo"),
		DiskGB:   diskGB(dataDir),
	}
}

// offerName makes a host name fit idlegrid's node names: letters, digits,
// '.', '_' and '-', at most 63, starting with a letter or digit.
func offerName(host string) string {
	host, _, _ = strings.Cut(host, ".") // the short name
	var b strings.Builder
	for _, r := range host {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	name := strings.TrimLeft(b.String(), "-_")
	if len(name) > 63 {
		name = name[:63]
	}
	if name == "" {
		return "node"
	}
	return name
}

// memTotalMB reads MemTotal from a Linux meminfo file.
func memTotalMB(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text()) // "MemTotal:       16318480 kB"
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.Atoi(fields[1])
			if err != nil {
				return 0
			}
			return kb / 1024
		}
	}
	return 0
}
