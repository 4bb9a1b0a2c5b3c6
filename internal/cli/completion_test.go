package cli

import (
	"slices"
	"strings"
	"testing"
)

// complete returns what "idlegrid __complete words…" offers.
func complete(t *testing.T, words ...string) []string {
	t.Helper()
	r := run(t, nil, append([]string{completeWord}, words...)...)
	if r.code != 0 || r.err != "" {
		t.Fatalf("__complete %q: %s\nwant exit 0 and no stderr", words, r)
	}
	return strings.Fields(r.out)
}

// TestComplete: the words offered for what is being typed (the last word,
// maybe empty): commands, a group's subcommands, a command's subwords,
// flags and the first argument's choices, a flag's values; none where
// nothing is known, and no command run to learn them (a server would
// not return).
func TestComplete(t *testing.T) {
	jobCommands := []string{"submit", "ls", "get", "cancel", "watch", "explain", "leases", "logs"}
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"jo"}, []string{"job"}},
		{[]string{"job", ""}, jobCommands},
		{[]string{"job", "l"}, []string{"ls", "leases", "logs"}},
		{[]string{"help", "jo"}, []string{"job"}},
		{[]string{"--addr", "http://127.0.0.1:1", "job", "lo"}, []string{"logs"}},
		{[]string{"--key=k", "jo"}, []string{"job"}},
		{[]string{"--a"}, []string{"--addr"}},
		{[]string{"job", "logs", "job_1", "--t"}, []string{"--tail", "--timestamps"}},
		{[]string{"job", "logs", "--tail", "5", "--n"}, []string{"--node"}},
		{[]string{"job", "submit", "--tier", ""}, []string{"gold", "silver", "bronze"}},
		{[]string{"job", "submit", "--tier", "s"}, []string{"silver"}},
		{[]string{"job", "submit", "--tier", "=", "b"}, []string{"bronze"}}, // bash splits --tier=b at the "="
		{[]string{"job", "submit", "--tier=g"}, []string{"--tier=gold"}},
		{[]string{"job", "submit", "--kind", "fi"}, []string{"fine-tuning"}},
		{[]string{"job", "submit", "--json", ""}, nil}, // a boolean flag takes no value
		{[]string{"job", "submit", "--image", ""}, nil},
		{[]string{"job", "submit", "--", "python", "--t"}, nil}, // the workload's own arguments
		{[]string{"account", "create", "--role", ""}, []string{"renter", "provider", "admin"}},
		{[]string{"agent", ""}, []string{"init", "gpu-probe", "net-probe", "hand-over"}},
		{[]string{"agent", "init", "--reg"}, []string{"--region"}},
		{[]string{"agent", "--run"}, []string{"--runtime"}},
		{[]string{"agent", "--runtime", ""}, []string{"docker", "fake"}},
		{[]string{"sim", "c"}, []string{"cheaters"}},
		{[]string{"completion", ""}, []string{"bash", "fish", "zsh"}},
		{[]string{"server", "--db", ""}, nil},
		{[]string{"server", "--db", "x.db", "--listen", "127.0.0.1:0", ""}, nil},
		{[]string{"dev", ""}, nil},
		{[]string{"nosuch", ""}, nil},
		{[]string{"job", "nosuch", ""}, nil},
	} {
		if got := complete(t, c.words...); !slices.Equal(got, c.want) {
			t.Errorf("__complete %q = %q, want %q", c.words, got, c.want)
		}
	}

	all := complete(t, "")
	for _, want := range []string{"dev", "job", "completion", "version", "help"} {
		if !slices.Contains(all, want) {
			t.Errorf("__complete \"\" = %q, want %q among them", all, want)
		}
	}
	if slices.Contains(all, completeWord) {
		t.Errorf("__complete \"\" offers itself: %q", all)
	}
	flags := complete(t, "job", "submit", "-")
	for _, want := range []string{"--help", "--max-price", "--gpus", "--addr", "--key", "--json"} {
		if !slices.Contains(flags, want) {
			t.Errorf("__complete job submit - = %q, want %q among them", flags, want)
		}
	}
}

// TestComplete_everyCommand: every command line is reached word by word,
// and offers its own flags.
func TestComplete_everyCommand(t *testing.T) {
	for _, cmd := range everyCommand {
		if slices.Equal(cmd, []string{"dev", "workload"}) { // run inside the demo's containers, not by hand
			continue
		}
		for i, w := range cmd {
			if got := complete(t, append(slices.Clone(cmd[:i]), w[:1])...); !slices.Contains(got, w) {
				t.Errorf("__complete %q = %q, want %q among them", append(slices.Clone(cmd[:i]), w[:1]), got, w)
			}
		}
		if got := complete(t, append(slices.Clone(cmd), "--he")...); !slices.Contains(got, "--help") {
			t.Errorf("__complete %q = %q, want --help among them", append(slices.Clone(cmd), "--he"), got)
		}
	}
}

// TestCompletion_scripts: a script for each shell, each calling back with
// the hidden word; any other shell is the command line's mistake.
func TestCompletion_scripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		r := run(t, nil, "completion", sh)
		if r.code != 0 || !strings.Contains(r.out, " "+completeWord+" ") || !strings.Contains(r.out, "idlegrid") {
			t.Errorf("completion %s: %s", sh, r)
		}
	}
	if r := run(t, nil, "completion", "tcsh"); r.code != 2 || !strings.Contains(r.err, `unknown shell "tcsh"; idlegrid completes in bash, zsh and fish`) {
		t.Errorf("completion tcsh: %s\nwant exit 2 naming the shells", r)
	}
}
