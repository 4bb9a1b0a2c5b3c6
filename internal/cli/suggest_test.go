package cli

import "testing"

// TestMain_Suggestions: a command, subcommand or flag typed a little wrong,
// or named as other tools name it, is answered with the one meant, still
// as a usage error (exit 2).
func TestMain_Suggestions(t *testing.T) {
	key := map[string]string{"IDLEGRID_KEY": "igk_test", "IDLEGRID_ADDR": "127.0.0.1:1"}
	for _, tt := range []struct {
		name string
		args []string
		want string // all of stderr's first line
	}{
		{"SwappedLetters", []string{"jbo", "ls"}, `idlegrid: unknown command "jbo"; did you mean 'idlegrid job'? run 'idlegrid help' to list the commands`},
		{"MissingLetter", []string{"nod", "ls"}, `idlegrid: unknown command "nod"; did you mean 'idlegrid node'? run 'idlegrid help' to list the commands`},
		{"Help", []string{"hlep"}, `idlegrid: unknown command "hlep"; did you mean 'idlegrid help'? run 'idlegrid help' to list the commands`},
		{"Plural", []string{"jobs"}, `idlegrid: unknown command "jobs"; did you mean 'idlegrid job'? run 'idlegrid help' to list the commands`},
		{"Prefix", []string{"acc", "ls"}, `idlegrid: unknown command "acc"; did you mean 'idlegrid account'? run 'idlegrid help' to list the commands`},
		{"SubcommandTypo", []string{"job", "lss"}, `idlegrid: unknown command "lss" for 'idlegrid job'; did you mean 'idlegrid job ls'? run 'idlegrid job --help'`},
		{"SubcommandSynonym", []string{"job", "list"}, `idlegrid: unknown command "list" for 'idlegrid job'; did you mean 'idlegrid job ls'? run 'idlegrid job --help'`},
		{"ShowForGet", []string{"job", "show", "job_x"}, `idlegrid: unknown command "show" for 'idlegrid job'; did you mean 'idlegrid job get'? run 'idlegrid job --help'`},
		{"GetForShow", []string{"dispute", "get", "dispute_x"}, `idlegrid: unknown command "get" for 'idlegrid dispute'; did you mean 'idlegrid dispute show'? run 'idlegrid dispute --help'`},
		{"DeleteForRevoke", []string{"key", "delete", "key_x"}, `idlegrid: unknown command "delete" for 'idlegrid key'; did you mean 'idlegrid key revoke'? run 'idlegrid key --help'`},
		{"NestedGroup", []string{"node", "quarantine", "lst"}, `idlegrid: unknown command "lst" for 'idlegrid node quarantine'; did you mean 'idlegrid node quarantine ls'? run 'idlegrid node quarantine --help'`},
		// An ID where the command goes: the command that shows it.
		{"IDForCommand", []string{"job", "job_1k8u", "--json"}, `idlegrid: unknown command "job_1k8u" for 'idlegrid job'; did you mean 'idlegrid job get job_1k8u --json'? run 'idlegrid job --help'`},
		{"IDForCommandShow", []string{"account", "acct_1k8u"}, `idlegrid: unknown command "acct_1k8u" for 'idlegrid account'; did you mean 'idlegrid account show acct_1k8u'? run 'idlegrid account --help'`},
		// A command whose other commands are words after it.
		{"AgentInitTypo", []string{"agent", "int"}, "idlegrid: idlegrid agent takes no arguments, got 1 argument(s); did you mean 'idlegrid agent init'?"},
		{"SimCheatersTypo", []string{"sim", "cheatrs"}, "idlegrid: idlegrid sim takes no arguments, got 1 argument(s); did you mean 'idlegrid sim cheaters'?"},
		{"SimNothingNear", []string{"sim", "xyzzy"}, "idlegrid: idlegrid sim takes no arguments, got 1 argument(s)"},
		{"NothingNear", []string{"job", "frobnicate"}, `idlegrid: unknown command "frobnicate" for 'idlegrid job'; run 'idlegrid job --help'`},
		{"FlagTypo", []string{"job", "ls", "--stat", "queued"}, "idlegrid: unknown flag --stat for idlegrid job ls; did you mean --state?"},
		{"FlagTypoSubmit", []string{"job", "submit", "--max-prise", "1"}, "idlegrid: unknown flag --max-prise for idlegrid job submit; did you mean --max-price?"},
		{"ShortFlag", []string{"job", "logs", "job_x", "-F"}, "idlegrid: unknown flag -F for idlegrid job logs; did you mean -f?"},
		{"UnknownFlagNothingNear", []string{"job", "ls", "--bogus"}, "idlegrid: unknown flag --bogus for idlegrid job ls"},
		// Before the command only --addr and --key are read; anything
		// else was taken for the command's name.
		{"GlobalFlagTypo", []string{"--adr", "http://x", "job", "ls"}, "idlegrid: unknown flag --adr before the command; did you mean --addr? only --addr and --key go before the command, its own flags after it, e.g. idlegrid job ls --json"},
		{"CommandFlagFirst", []string{"--json", "job", "ls"}, "idlegrid: unknown flag --json before the command; only --addr and --key go before the command, its own flags after it, e.g. idlegrid job ls --json"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, key, tt.args...)
			first, _, _ := cutLine(r.err)
			if r.code != 2 || first != tt.want {
				t.Fatalf("got %s\nwant exit 2 and stderr's first line\n%s", r, tt.want)
			}
		})
	}
}

func cutLine(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func TestSuggest(t *testing.T) {
	names := []string{"submit", "ls", "get", "cancel", "watch", "explain", "leases", "logs"}
	for typed, want := range map[string]string{
		"sumbit": "submit", "sub": "submit", "lst": "ls", "list": "ls", "show": "get", "kill": "cancel",
		"wacth": "watch", "lease": "leases", "log": "logs", "x": "", "zzzzzz": "", "": "", "l": "ls",
	} {
		if got := suggest(typed, names); got != want {
			t.Errorf("suggest(%q) = %q, want %q", typed, got, want)
		}
	}
}
