//go:build unix

package cli

import (
	"os"
	"syscall"
)

// handOverSignals ask a running agent to hand its workloads over to the
// next one and exit (agentHandOver).
var handOverSignals = []os.Signal{syscall.SIGUSR2}
