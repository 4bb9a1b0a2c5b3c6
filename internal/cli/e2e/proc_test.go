package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the idlegrid binary under test, built once by TestMain.
//
// Every test runs in parallel with the others: each starts its own
// processes (a server on a port the system picks, agents) on a database
// of its own, and spends most of its time waiting for them.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	code, err := buildAndRun(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func buildAndRun(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "idlegrid-e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "idlegrid")
	args := []string{"build", "-o", binary}
	if raceEnabled { // as .ci/run builds the tests: no pointer checks in the SQLite translated from C
		args = append(args, "-race", "-gcflags=modernc.org/...=-d=checkptr=0")
	}
	build := exec.Command(goTool(), append(args, "github.com/idlegrid/idlegrid/cmd/idlegrid")...)
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("build idlegrid: %v\n%s", err, out)
	}
	return m.Run(), nil
}

// goTool is the go command that runs these tests: go test puts its
// GOROOT's bin first on the tests' PATH.
func goTool() string { return "go" }

// Bounds of the polling waits. They bound a loop that checks every
// pollEvery; they are not how long anything is expected to take.
const (
	pollEvery   = 50 * time.Millisecond
	waitLimit   = 90 * time.Second
	stopTimeout = 60 * time.Second
)

// eventually calls check every pollEvery until it returns nil, and fails
// the test with check's last error when waitLimit passes first.
func eventually(tb testing.TB, what string, check func() error) {
	tb.Helper()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: still not true after %s: %v", what, waitLimit, err)
		}
		<-tick.C
	}
}

// syncBuffer is a bytes.Buffer safe for a process to write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a long-running idlegrid process: a server or an agent.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  syncBuffer // stdout and stderr together
	done chan struct{}
	err  error // set when done is closed
}

// startProc starts the binary with args and stops it when the test ends.
func startProc(tb testing.TB, name string, env []string, args ...string) *proc {
	tb.Helper()
	p := &proc{name: name, cmd: exec.Command(binary, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		p.stop(tb)
		if tb.Failed() {
			tb.Logf("output of %s:\n%s", name, p.out.String())
		}
	})
	return p
}

// stop interrupts the process, as Ctrl-C would, and waits for it to exit;
// it kills it after stopTimeout. It returns the exit error, nil for exit 0.
func (p *proc) stop(tb testing.TB) error {
	tb.Helper()
	select {
	case <-p.done:
		return p.err
	default:
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		p.cmd.Process.Kill()
		<-p.done
		tb.Errorf("%s did not stop within %s of SIGINT; killed", p.name, stopTimeout)
	}
	return p.err
}

// waitExit waits until the process exits of itself, as it should when
// (why) something it follows ends; p.err then says how.
func (p *proc) waitExit(tb testing.TB, why string) {
	tb.Helper()
	eventually(tb, p.name+" exits "+why, func() error {
		select {
		case <-p.done:
			return nil
		default:
			return errors.New("still running")
		}
	})
}

// waitForLine waits until the process prints a line matching re and returns
// the first submatch.
func (p *proc) waitForLine(tb testing.TB, re *regexp.Regexp) string {
	tb.Helper()
	var got string
	eventually(tb, p.name+" prints "+re.String(), func() error {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			got = m[1]
			return nil
		}
		select {
		case <-p.done:
			tb.Fatalf("%s exited (%v) before printing %s:\n%s", p.name, p.err, re, p.out.String())
		default:
		}
		return errors.New("not yet")
	})
	return got
}

// cli runs one idlegrid command to completion and returns its stdout. It
// fails the test when the command fails.
func cli(tb testing.TB, env []string, args ...string) string {
	tb.Helper()
	out, errOut, err := tryCLI(env, args...)
	if err != nil {
		tb.Fatalf("idlegrid %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func tryCLI(env []string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// cliJSON runs a command with --json and decodes its output into v.
func cliJSON(tb testing.TB, env []string, v any, args ...string) {
	tb.Helper()
	out := cli(tb, env, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		tb.Fatalf("idlegrid %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}
