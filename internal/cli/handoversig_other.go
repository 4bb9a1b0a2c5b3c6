//go:build !unix

package cli

import "os"

// handOverSignals: none where there is no SIGUSR2; the agent is then
// upgraded by killing it (deploy/README.md).
var handOverSignals []os.Signal
