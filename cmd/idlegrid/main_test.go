package main

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain runs main itself when this test binary is started as the
// idlegrid command (runMainEnv), so that a test can signal a real process.
func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

const runMainEnv = "IDLEGRID_TEST_RUN_MAIN"

// TestHangupStopsDev: closing the terminal that runs idlegrid dev (a
// hangup) stops it as Ctrl-C does: it exits 0 and removes its temporary
// directory, rather than dying with the market's files left behind.
func TestHangupStopsDev(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no hangup signal to send on Windows")
	}
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "dev", "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "TMPDIR="+tmp)
	out, err := os.Create(filepath.Join(t.TempDir(), "dev.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
	}()
	switch waitForServing(out.Name(), exited, 2*time.Minute) {
	case "exited":
		stopped = true
		t.Fatalf("dev exited before its market ran; its output:\n%s", readAll(t, out.Name()))
	case "timed out":
		t.Fatalf("dev does not serve 2 minutes after its start; its output:\n%s", readAll(t, out.Name()))
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("dev after a hangup: %v, want exit status 0; its output:\n%s", err, readAll(t, out.Name()))
		}
	case <-time.After(2 * time.Minute): // a guard against a hang, not a measure of speed
		t.Fatalf("dev still runs 2 minutes after a hangup; its output:\n%s", readAll(t, out.Name()))
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "idlegrid-dev-*")); len(left) > 0 {
		t.Errorf("dev left %v behind after a hangup", left)
	}
}

// TestStopSignals_nohup: started with hangups ignored (nohup), the
// command keeps ignoring them, as Go would stop doing once asked to
// deliver them; otherwise a hangup stops it.
func TestStopSignals_nohup(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no hangup signal on Windows")
	}
	t.Cleanup(func() { signal.Reset(syscall.SIGHUP) })
	if signal.Ignored(syscall.SIGHUP) {
		t.Log("this test runs under nohup itself")
	} else if !slices.Contains(stopSignals(), os.Signal(syscall.SIGHUP)) {
		t.Errorf("stop signals %v leave out SIGHUP; want it while hangups are not ignored", stopSignals())
	}
	signal.Ignore(syscall.SIGHUP)
	if sigs := stopSignals(); slices.Contains(sigs, os.Signal(syscall.SIGHUP)) {
		t.Errorf("stop signals %v under nohup; want SIGHUP left ignored", sigs)
	}
}

// waitForServing waits until dev's output, in file out, says where its
// dashboard is: "serving"; "exited" when dev exits first, and "timed out"
// when neither happens within limit (a guard against a hang, not a
// measure of speed).
func waitForServing(out string, exited <-chan error, limit time.Duration) string {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(limit)
	for {
		if b, _ := os.ReadFile(out); strings.Contains(string(b), "dashboard http://") {
			return "serving"
		}
		select {
		case <-exited:
			return "exited"
		case <-deadline:
			return "timed out"
		case <-tick.C:
		}
	}
}

func readAll(t *testing.T, name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		t.Error(err)
	}
	return string(b)
}
