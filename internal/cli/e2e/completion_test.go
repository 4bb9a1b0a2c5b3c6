package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCompletion_shells: each shell, with the script "idlegrid completion
// SHELL" prints loaded, completes a flag's values and a subcommand by
// calling the idlegrid binary back, and offers files where idlegrid knows
// no words. Under CI (CI=true) a missing shell fails the test, because
// .ci/run installs zsh and fish; elsewhere the test skips it.
func TestCompletion_shells(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.yaml"), []byte("image: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		shell, script, want string
	}{
		{"bash", `source <(idlegrid completion bash)
			try() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _idlegrid; printf '%s\n' "${COMPREPLY[@]}"; }
			try idlegrid job submit --tier ""
			try idlegrid job lo
			complete -p idlegrid`,
			"gold\nsilver\nbronze\nlogs\ncomplete -o default -F _idlegrid idlegrid\n"}, // -o default: files where it offers nothing
		{"zsh", `compdef() { print "compdef $*"; }
			compadd() { print -l -- "${@[2,-1]}"; }
			_files() { print "(files)"; }
			source <(idlegrid completion zsh)
			words=(idlegrid job submit --tier ""); CURRENT=5; _idlegrid
			words=(idlegrid job lo); CURRENT=3; _idlegrid
			words=(idlegrid job submit -f ""); CURRENT=5; _idlegrid`,
			"compdef _idlegrid idlegrid\ngold\nsilver\nbronze\nlogs\n(files)\n"},
		{"fish", `idlegrid completion fish | source
			complete -C "idlegrid job submit --tier "
			complete -C "idlegrid job lo"
			complete -C "idlegrid job submit -f ` + dir + `/jo"`,
			"bronze\ngold\nsilver\nlogs\n" + dir + "/job.yaml\n"},
	} {
		t.Run(c.shell, func(t *testing.T) {
			sh, err := exec.LookPath(c.shell)
			if err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatalf("no %s, and CI=true: .ci/run should have installed it", c.shell)
				}
				t.Skipf("no %s to try its completion in (apt-get install %s)", c.shell, c.shell)
			}
			cmd := exec.Command(sh, "-c", c.script)
			if c.shell == "zsh" {
				cmd.Args = []string{sh, "-f", "-c", c.script} // no startup files
			}
			cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+dir)
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != c.want {
				t.Errorf("%s completed:\n%s(%v)\nwant:\n%s", c.shell, out, err, c.want)
			}
		})
	}
}
