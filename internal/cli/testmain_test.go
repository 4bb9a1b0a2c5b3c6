package cli

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
)

// TestMain runs Main instead of the tests when the test binary runs as
// the idlegrid binary of a self image (selfImage), so that the tests of
// the demo workload and the GPU probe run this package's code in
// containers, as the real binary would.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == filepath.Base(selfPath) {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, os.Args[1:], Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, os.Getenv)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}
