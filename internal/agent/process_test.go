package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

func TestDescendsFrom(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep to run:", err)
	}
	// A command name with spaces and parentheses, which /proc/PID/stat
	// puts in the middle of the line.
	odd := filepath.Join(t.TempDir(), "x) (y z")
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(odd, data, 0o755); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(odd, "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()

	me := os.Getpid()
	if ppid, err := parentPID(child.Process.Pid); err != nil || ppid != me {
		t.Errorf("parentPID(child) = %d, %v; want %d", ppid, err, me)
	}
	tests := []struct {
		name string
		pid  int
		want bool
	}{
		{"Self", me, true},
		{"Child", child.Process.Pid, true},
		{"Parent", os.Getppid(), false},
		{"Init", 1, false},
		{"NoSuchProcess", 1 << 30, false},
	}
	for _, tt := range tests {
		if got := descendsFrom(tt.pid, me); got != tt.want {
			t.Errorf("%s: descendsFrom(%d, %d) = %v, want %v", tt.name, tt.pid, me, got, tt.want)
		}
	}
}
