package agent_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/agent"
)

// TestHandOverAtStop: an ask to hand over at the next stop holds until
// its deadline, is taken by one stop only, and a stop after the deadline
// takes it without handing over.
func TestHandOverAtStop(t *testing.T) {
	dir, now := t.TempDir(), time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC)
	take := func(at time.Time) bool {
		t.Helper()
		ok, err := agent.TakeHandOverAtStop(dir, at)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if take(now) {
		t.Error("a stop hands over with nothing asked")
	}
	if err := agent.AskHandOverAtStop(dir, now, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, agent.HandOverAtStopFile)); err != nil || fi.Mode().Perm()&0o044 != 0o044 {
		t.Errorf("the ask: %v, %v; want a file the agent's user can read", fi, err)
	}
	if !take(now.Add(30 * time.Minute)) {
		t.Error("a stop at the ask's deadline does not hand over")
	}
	if take(now.Add(31 * time.Minute)) {
		t.Error("a second stop hands over too: an ask is for one stop")
	}
	agent.AskHandOverAtStop(dir, now, 30*time.Minute)
	if take(now.Add(31 * time.Minute)) {
		t.Error("a stop after the ask's deadline hands over")
	}
	if _, err := os.Stat(filepath.Join(dir, agent.HandOverAtStopFile)); !os.IsNotExist(err) {
		t.Errorf("a stale ask is left behind: %v", err)
	}
	os.WriteFile(filepath.Join(dir, agent.HandOverAtStopFile), []byte("{"), 0o644)
	if ok, err := agent.TakeHandOverAtStop(dir, now); ok || !errors.Is(err, agent.ErrBadHandOverAsk) {
		t.Errorf("a corrupt ask: %v, %v; want no hand-over, and ErrBadHandOverAsk", ok, err)
	}
	if _, err := os.Stat(filepath.Join(dir, agent.HandOverAtStopFile)); !os.IsNotExist(err) {
		t.Errorf("a corrupt ask is left behind: %v", err)
	}
}
