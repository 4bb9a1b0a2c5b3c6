package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
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

// TestDeployKubernetes_server runs the server as deploy/kubernetes's
// StatefulSet does, its volume in a temporary directory, and asks it
// what the pod's probes ask: each answers 200 once the server is up.
func TestDeployKubernetes_server(t *testing.T) {
	spec := serverPodSpec(t)
	state := t.TempDir()
	var args []string
	for _, a := range spec.Args {
		switch {
		case a == "0.0.0.0:7070":
			a = "127.0.0.1:0"
		case strings.HasPrefix(a, spec.Mount):
			a = state + strings.TrimPrefix(a, spec.Mount)
		}
		args = append(args, a)
	}
	server := startMain(t, args...)
	url := server.waitForMatch(t, regexp.MustCompile(`(?m)^idlegrid server listening on (http://\S+)$`))
	if !strings.Contains(server.err.String(), "its API key (shown once, keep it safe):\nigk_") {
		t.Errorf("the first start's log does not show the admin's key, as the manifest says:\n%s", server.err.String())
	}
	for _, path := range spec.Probes {
		eventually(t, "GET "+path+" answering 200", func() error {
			resp, err := http.Get(url + path)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s", resp.Status)
			}
			return nil
		})
	}
}

// podSpec is what TestDeployKubernetes_server reads of the server's pod:
// its container's arguments, where its volume is mounted, and its probes'
// paths.
type podSpec struct {
	Args   []string
	Mount  string
	Probes []string
}

func serverPodSpec(t *testing.T) podSpec {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", "idlegrid-server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type probe struct {
		HTTPGet struct{ Path string } `yaml:"httpGet"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	for {
		var doc struct {
			Kind string
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Args         []string
							VolumeMounts []struct {
								MountPath string `yaml:"mountPath"`
							} `yaml:"volumeMounts"`
							Liveness  probe `yaml:"livenessProbe"`
							Readiness probe `yaml:"readinessProbe"`
							Startup   probe `yaml:"startupProbe"`
						}
					}
				}
			}
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			t.Fatal("deploy/kubernetes/idlegrid-server.yaml has no StatefulSet")
		} else if err != nil {
			t.Fatalf("deploy/kubernetes/idlegrid-server.yaml: %v", err)
		}
		if doc.Kind != "StatefulSet" {
			continue
		}
		c := doc.Spec.Template.Spec.Containers
		if len(c) != 1 || len(c[0].VolumeMounts) != 1 || c[0].VolumeMounts[0].MountPath == "" {
			t.Fatalf("the StatefulSet's pod: %+v, want one container with one volume", c)
		}
		probes := []string{c[0].Liveness.HTTPGet.Path, c[0].Readiness.HTTPGet.Path, c[0].Startup.HTTPGet.Path}
		if slices.Contains(probes, "") {
			t.Fatalf("the StatefulSet's probes: %q, want a liveness, a readiness and a startup probe", probes)
		}
		return podSpec{Args: c[0].Args, Mount: c[0].VolumeMounts[0].MountPath, Probes: probes}
	}
}
