// Command idlegrid is the one binary of the idlegrid GPU marketplace: the
// server, the provider agent, the renter's and operator's CLI, and the
// all-in-one developer demo. All of its wiring lives in internal/cli; this
// file only turns signals into a context and exits once. A hangup (the
// terminal that ran `idlegrid dev` closed) stops it as Ctrl-C does, so it
// still cleans up after itself.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	_ "time/tzdata" // node schedules name IANA zones; FROM scratch images have no zoneinfo

	"github.com/idlegrid/idlegrid/internal/cli"
)

// stopSignals are the signals that end the command gracefully; a second
// one ends it at once. A hangup is one unless the command was started
// with it ignored (nohup), which asking for it would undo.
func stopSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

func main() {
	sigs := stopSignals()
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	go forceExitOnSecondSignal(ctx, sigs)
	code := cli.Main(ctx, os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Getenv)
	stop()
	os.Exit(code)
}

// forceExitOnSecondSignal waits for the first signal to cancel ctx, then
// exits at once on a second one, for when a graceful shutdown hangs.
func forceExitOnSecondSignal(ctx context.Context, sigs []os.Signal) {
	<-ctx.Done()
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	<-ch
	fmt.Fprintln(os.Stderr, "idlegrid: second signal, exiting now")
	os.Exit(130)
}
