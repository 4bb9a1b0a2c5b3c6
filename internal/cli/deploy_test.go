package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The systemd units in deploy/ name the binary and the server's state
// directory by their installed paths; the tests put them elsewhere.
const (
	unitBinary   = "/usr/local/bin/idlegrid"
	unitStateDir = "/var/lib/idlegrid-server"
)

// TestDeployUnits_serverAndBackup runs the commands of deploy/'s server
// and backup units, with the state directory in a temporary one: the
// server starts and writes what deploy/server.md says it keeps there, and
// the backup unit's command copies its database into backups/. Where
// systemd-analyze is installed, it checks the units too.
func TestDeployUnits_serverAndBackup(t *testing.T) {
	state := t.TempDir()
	args := unitCommand(t, "idlegrid-server.service", state)
	for i, a := range args {
		if a == "127.0.0.1:7070" && i > 0 && args[i-1] == "--listen" {
			args[i] = "127.0.0.1:0"
		}
	}
	server := startMain(t, args...)
	server.waitForMatch(t, regexp.MustCompile(`(?m)^idlegrid server listening on (http://\S+)$`))
	for _, name := range []string{"idlegrid.db", "audit.key", "meter-journal", "admin.key"} {
		if _, err := os.Stat(filepath.Join(state, name)); err != nil {
			t.Errorf("the server unit's state directory lacks %s: %v", name, err)
		}
	}

	if err := os.Mkdir(filepath.Join(state, "backups"), 0o700); err != nil { // the unit's StateDirectory= makes it
		t.Fatal(err)
	}
	backup := unitCommand(t, "idlegrid-backup.service", state)
	if r := run(t, nil, backup...); r.code != 0 {
		t.Fatalf("the backup unit's command: %s", r)
	}
	if copies, _ := filepath.Glob(filepath.Join(state, "backups", "idlegrid-*.db")); len(copies) != 1 {
		t.Errorf("backups after the backup unit's command: %v, want one copy", copies)
	}
	verifyUnits(t, "idlegrid-server.service", "idlegrid-backup.service", "idlegrid-backup.timer", "idlegrid-agent.service")
}

// unitCommand is the idlegrid command line of a deploy/ unit's ExecStart=,
// without the binary, its state directory moved to state. A shell's
// $(date …) becomes a fixed time.
func unitCommand(t *testing.T, unit, state string) []string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "deploy", unit))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^ExecStart=.*$`).FindString(string(text))
	_, command, ok := strings.Cut(line, unitBinary+" ")
	if !ok {
		t.Fatalf("%s: no ExecStart= running %s", unit, unitBinary)
	}
	command = strings.TrimSuffix(command, "'") // the end of a sh -c '…'
	command = regexp.MustCompile(`\$\(date [^)]*\)`).ReplaceAllString(command, "20261203T000000Z")
	command = strings.ReplaceAll(command, unitStateDir, state)
	return strings.Fields(command)
}

// verifyUnits runs systemd-analyze verify on deploy/'s units, with the
// binary they start put at this test's own, where the tool is installed.
func verifyUnits(t *testing.T, units ...string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed; the units' syntax is not checked")
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for _, u := range units {
		text, err := os.ReadFile(filepath.Join("..", "..", "deploy", u))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, u)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(text), unitBinary, self)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out, err := exec.Command(analyze, append([]string{"verify"}, paths...)...).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
