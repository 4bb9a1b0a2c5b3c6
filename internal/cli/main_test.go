package cli

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// result is what one run of Main printed and returned.
type result struct {
	code     int
	out, err string
}

// run calls Main with args and the environment vars.
func run(tb testing.TB, vars map[string]string, args ...string) result {
	tb.Helper()
	return runIn(context.Background(), vars, args...)
}

// runUntil runs a command that should return by itself, as run does, but
// cancels it when d has passed: one that serves (a server, an agent) then
// returns instead of hanging the test.
func runUntil(tb testing.TB, d time.Duration, vars map[string]string, args ...string) result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return runIn(ctx, vars, args...)
}

func runIn(ctx context.Context, vars map[string]string, args ...string) result {
	var out, errOut bytes.Buffer
	code := Main(ctx, args, Stdio{Out: &out, Err: &errOut}, func(k string) string { return vars[k] })
	return result{code: code, out: out.String(), err: errOut.String()}
}

func (r result) String() string {
	return "exit " + string(rune('0'+r.code)) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err
}

func TestMain_Help(t *testing.T) {
	t.Run("NoArguments", func(t *testing.T) {
		r := run(t, nil)
		if r.code != 2 {
			t.Fatalf("code = %d, want 2\n%s", r.code, r)
		}
		for _, want := range []string{"Usage:", "idlegrid <command>", "dev ", "job ", "idlegrid: no command given"} {
			if !strings.Contains(r.err, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.err)
			}
		}
	})
	t.Run("Help", func(t *testing.T) {
		r := run(t, nil, "help")
		if r.code != 0 || r.err != "" {
			t.Fatalf("got %s, want exit 0 and no stderr", r)
		}
		for _, c := range commands() {
			if !strings.Contains(r.out, "\t"+c.name) || !strings.Contains(r.out, c.summary) {
				t.Errorf("help does not list %q", c.name)
			}
		}
		checkAligned(t, r.out, commands()[0].name)
	})
	t.Run("HelpCommand", func(t *testing.T) {
		got, want := run(t, nil, "help", "server"), run(t, nil, "server", "--help")
		if got.code != 0 || got.out != want.out {
			t.Fatalf("'help server' = %s\nwant the output of 'server --help':\n%s", got, want.out)
		}
	})
	t.Run("HelpSubcommand", func(t *testing.T) {
		got, want := run(t, nil, "help", "job", "submit"), run(t, nil, "job", "submit", "--help")
		if got.code != 0 || got.out != want.out || !strings.HasPrefix(got.out, "Usage:\n\n\tidlegrid job submit") {
			t.Fatalf("'help job submit' = %s\nwant the output of 'job submit --help':\n%s", got, want.out)
		}
	})
	t.Run("HelpOfHelp", func(t *testing.T) {
		// Once, each of these recursed until the stack ran out.
		want := run(t, nil, "help")
		for _, args := range [][]string{{"help", "--help"}, {"help", "help"}, {"--help", "-h"}, {"-h", "help", "--help"}} {
			if got := run(t, nil, args...); got.code != 0 || got.out != want.out {
				t.Errorf("%v = %s\nwant the output of 'help'", args, got)
			}
		}
		got, want := run(t, nil, "help", "help", "job", "--help"), run(t, nil, "job", "--help")
		if got.code != 0 || got.out != want.out {
			t.Errorf("help help job --help = %s\nwant the output of 'job --help'", got)
		}
	})
	t.Run("GroupHelpSubcommand", func(t *testing.T) {
		for _, tt := range []struct{ args, sub []string }{
			{[]string{"job", "help", "submit"}, []string{"job", "submit", "--help"}},
			{[]string{"node", "quarantine", "help", "ls"}, []string{"node", "quarantine", "ls", "--help"}},
		} {
			args, sub := tt.args, tt.sub
			got, want := run(t, nil, args...), run(t, nil, sub...)
			if got.code != 0 || got.out != want.out || !strings.HasPrefix(got.out, "Usage:\n\n\tidlegrid "+strings.Join(sub[:len(sub)-1], " ")) {
				t.Errorf("%v = %s\nwant the output of %v:\n%s", args, got, sub, want.out)
			}
		}
	})
	t.Run("UnknownCommand", func(t *testing.T) {
		r := run(t, nil, "xyzzy", "ls")
		if want := "idlegrid: unknown command \"xyzzy\"; run 'idlegrid help' to list the commands\n"; r.code != 2 || r.err != want {
			t.Fatalf("got %s\nwant exit 2 and stderr %q", r, want)
		}
	})
	t.Run("UnknownSubcommand", func(t *testing.T) {
		r := run(t, nil, "job", "frobnicate")
		if want := "idlegrid: unknown command \"frobnicate\" for 'idlegrid job'; run 'idlegrid job --help'\n"; r.code != 2 || r.err != want {
			t.Fatalf("got %s\nwant exit 2 and stderr %q", r, want)
		}
	})
	t.Run("GroupHelp", func(t *testing.T) {
		for _, group := range []string{"job", "account", "inference", "node"} {
			r := run(t, nil, group, "--help")
			if r.code != 0 {
				t.Fatalf("%s --help: %s", group, r)
			}
			checkAligned(t, r.out, "")
		}
	})
	t.Run("GroupWithoutSubcommand", func(t *testing.T) {
		r := run(t, nil, "payout")
		if r.code != 2 || !strings.Contains(r.err, "\trequest ") || !strings.Contains(r.err, "idlegrid: idlegrid payout needs a command") {
			t.Fatalf("got %s", r)
		}
	})
}

// checkAligned fails unless every line of the commands table in help (a
// tab, a name, then its summary) starts its summary in the same column.
// first, when set, is the table's first name.
func checkAligned(t *testing.T, help, first string) {
	t.Helper()
	_, table, ok := strings.Cut(help, "Commands:\n\n")
	if !ok {
		t.Fatalf("help has no commands table:\n%s", help)
	}
	table, _, _ = strings.Cut(table, "\n\n")
	column := -1
	for i, line := range strings.Split(table, "\n") {
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "\t"), " ")
		if i == 0 && first != "" && name != first {
			t.Errorf("the commands table starts with %q, want %q", name, first)
		}
		rest := strings.TrimPrefix(line, "\t"+name)
		col := len(line) - len(strings.TrimLeft(rest, " "))
		if gutter := len(rest) - len(strings.TrimLeft(rest, " ")); gutter < 2 {
			t.Errorf("the summary of %q is %d space(s) after its name, want at least 2:\n%s", name, gutter, table)
		}
		if column < 0 {
			column = col
		} else if col != column {
			t.Errorf("the summary of %q starts in column %d, others in %d:\n%s", name, col, column, table)
		}
	}
}

// everyCommand lists every command line idlegrid runs, for tests that
// check them all; TestMain_everyCommandListed keeps it whole.
var everyCommand = [][]string{
	{"dev"}, {"dev", "workload"}, {"server"}, {"version"}, {"completion"},
	{"agent"}, {"agent", "init"}, {"agent", "gpu-probe"}, {"agent", "net-probe"}, {"agent", "hand-over"},
	{"job", "submit"}, {"job", "ls"}, {"job", "get"}, {"job", "cancel"}, {"job", "watch"}, {"job", "explain"},
	{"job", "leases"}, {"job", "logs"},
	{"lease", "ls"}, {"lease", "get"}, {"lease", "receipts"},
	{"node", "ls"}, {"node", "get"}, {"node", "reputation"}, {"node", "hardware"}, {"node", "challenges"},
	{"node", "quarantine", "ls"}, {"node", "quarantine", "add"}, {"node", "quarantine", "lift"},
	{"node", "schedule"}, {"node", "drain"}, {"node", "retire"},
	{"market"}, {"status"}, {"estimate"}, {"backup"},
	{"sim"}, {"sim", "cheaters"}, {"sim", "inference"},
	{"inference", "models"}, {"inference", "stats"}, {"inference", "usage"}, {"inference", "conversations"},
	{"token", "create"}, {"token", "ls"}, {"token", "revoke"},
	{"key", "create"}, {"key", "ls"}, {"key", "revoke"}, {"key", "limit"}, {"key", "routing"},
	{"registry", "login"}, {"registry", "ls"}, {"registry", "logout"},
	{"account", "show"}, {"account", "create"}, {"account", "ls"}, {"account", "balance"}, {"account", "topup"},
	{"account", "transfers"}, {"account", "statement"}, {"account", "limit"}, {"account", "notices"},
	{"payout", "request"}, {"payout", "ls"}, {"payout", "settle"}, {"payout", "reject"},
	{"bond", "post"}, {"bond", "release"},
	{"dispute", "ls"}, {"dispute", "show"}, {"dispute", "open"}, {"dispute", "uphold"}, {"dispute", "dismiss"},
	{"dispute", "verifications"},
	{"audit", "verify"}, {"audit", "head"},
}

// hiddenCommands are the command lines no help lists.
var hiddenCommands = [][]string{{"dev", "workload"}} // run inside the demo's containers, not by hand

// TestMain_everyCommandListed: everyCommand holds every command line the
// help reaches, each top-level command's subcommands and subwords, found
// as completion finds them, and the hidden ones; no other.
func TestMain_everyCommandListed(t *testing.T) {
	e := &env{getenv: func(string) string { return "" }}
	var found [][]string
	var walk func(path []string)
	walk = func(path []string) {
		subs, fs := e.probe(context.Background(), path)
		if fs == nil { // a group
			for _, sub := range subs {
				walk(append(slices.Clone(path), sub))
			}
			return
		}
		found = append(found, path)
		for _, w := range fs.subwords {
			walk(append(slices.Clone(path), w))
		}
	}
	for _, name := range commandNames() {
		walk([]string{name})
	}
	found = append(found, hiddenCommands...)
	key := func(cmd []string) string { return strings.Join(cmd, " ") }
	listed := make(map[string]bool)
	for _, cmd := range everyCommand {
		listed[key(cmd)] = true
	}
	for _, cmd := range found {
		if !listed[key(cmd)] {
			t.Errorf("%q is a command everyCommand lacks", key(cmd))
		}
		delete(listed, key(cmd))
	}
	for cmd := range listed {
		t.Errorf("everyCommand lists %q, which the help does not reach", cmd)
	}
}

func TestMain_CommandHelp(t *testing.T) {
	for _, cmd := range everyCommand {
		t.Run(strings.Join(cmd, "_"), func(t *testing.T) {
			r := run(t, nil, append(cmd, "--help")...)
			if r.code != 0 || r.err != "" {
				t.Fatalf("got %s, want exit 0 and no stderr", r)
			}
			usage := "Usage:\n\n\tidlegrid " + strings.Join(cmd, " ")
			if !strings.HasPrefix(r.out, usage) {
				t.Errorf("help starts %q, want %q", firstLines(r.out, 3), usage)
			}
			if cmd[0] != "version" && !strings.Contains(r.out, "\nExamples:\n") {
				t.Errorf("help has no examples:\n%s", r.out)
			}
		})
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

func TestMain_JobSubmitHelp(t *testing.T) {
	r := run(t, nil, "job", "submit", "-h")
	for _, want := range []string{
		"idlegrid job submit [-f job.yaml | --from JOB_ID] [flags] [-- command...]",
		"max_price: \"2.50\"",
		"  -max-price value\n",
		"  -gpu-model value\n",
		"  -addr string\n",
		"IDLEGRID_KEY",
		"idlegrid job submit -f job.yaml",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("job submit help lacks %q:\n%s", want, r.out)
		}
	}
}

func TestMain_UsageErrors(t *testing.T) {
	key := map[string]string{"IDLEGRID_KEY": "igk_test", "IDLEGRID_ADDR": "127.0.0.1:1"}
	for _, tt := range []struct {
		name string
		args []string
		want string // the first line of stderr
	}{
		{"UnknownFlag", []string{"job", "ls", "--bogus"}, "idlegrid: unknown flag --bogus for idlegrid job ls"},
		{"MissingID", []string{"job", "get"}, "idlegrid: idlegrid job get takes one job ID, got 0 argument(s)"},
		{"ExtraArgs", []string{"node", "ls", "extra"}, "idlegrid: idlegrid node ls takes no arguments, got 1 argument(s)"},
		{"BadNodeLimit", []string{"node", "ls", "--limit", "-1"}, "idlegrid: --limit: -1 is out of range; give 1 to 10000 nodes, or leave it out for 1000"},
		{"BadState", []string{"job", "ls", "--state", "queued,done"}, `idlegrid: --state: unknown job state "done"; use queued, running, succeeded, failed or cancelled`},
		{"BadPrice", []string{"job", "submit", "--max-price", "2.5.0"}, `idlegrid: invalid value "2.5.0" for flag --max-price: not a decimal amount: "2.5.0"; write a decimal amount such as 2.50`},
		{"BadDuration", []string{"job", "submit", "--duration", "soon"}, `idlegrid: invalid value "soon" for flag --duration: must be a duration such as 90m or 1h30m, got "soon"`},
		{"BadEnv", []string{"job", "submit", "--env", "NOVALUE"}, `idlegrid: invalid value "NOVALUE" for flag --env: want KEY=VALUE, got "NOVALUE"`},
		{"BadRole", []string{"account", "create", "--name", "x", "--role", "owner"}, `idlegrid: --role must be renter, provider or admin, got "owner"`},
		{"NoName", []string{"token", "create"}, "idlegrid: --name is required, e.g. idlegrid token create --name rack-3"},
		{"BadAmount", []string{"account", "topup", "acct_x", "ten"}, `idlegrid: AMOUNT: not a decimal amount: "ten"; write a decimal amount such as 100 or 12.50`},
		{"ZeroAmount", []string{"account", "topup", "acct_x", "0.00"}, "idlegrid: AMOUNT must be positive, got 0.00"},
		{"BadFee", []string{"server", "--fee-bps", "20000"}, "idlegrid: --fee-bps must be between 0 and 10000, got 20000"},
		{"BadComplaintWindow", []string{"server", "--complaint-window", "5m"}, "idlegrid: --complaint-window must be between 1h and 8760h, got 5m0s"},
		{"BadLogLevel", []string{"server", "--log-level", "loud"}, `idlegrid: --log-level must be debug, info, warn or error, got "loud"`},
		{"BadLogFormat", []string{"server", "--log-format", "xml"}, `idlegrid: --log-format must be text or json, got "xml"`},
		{"BadAgentLogFormat", []string{"agent", "--config", "agent.yaml", "--log-format", "yaml"}, `idlegrid: --log-format must be text or json, got "yaml"`},
		{"BadGCFloor", []string{"server", "--gc-floor-mib", "-1"}, "idlegrid: --gc-floor-mib must be between 0 and 1048576, got -1"},
		{"BadQueueTimeout", []string{"server", "--inference-queue-timeout", "10m"}, "idlegrid: --inference-queue-timeout must be between 0 and 5m, got 10m0s"},
		{"BadMaxQueue", []string{"server", "--inference-max-queue", "0"}, "idlegrid: --inference-max-queue must be between 1 and 1000000, got 0"},
		{"BadKeyRPS", []string{"server", "--inference-key-rps", "-1"}, "idlegrid: --inference-key-rps must be between 0 and 1000000, got -1"},
		{"SimBadRows", []string{"sim", "--bad-rows", "maybe"}, `idlegrid: --bad-rows: must be fail or skip, got "maybe"`},
		{"BadDevGCFloor", []string{"dev", "--gc-floor-mib", "-5"}, "idlegrid: --gc-floor-mib must be between 0 and 1048576, got -5"},
		{"BadAgentGCFloor", []string{"agent", "--config", "agent.yaml", "--gc-floor-mib", "2000000"}, "idlegrid: --gc-floor-mib must be between 0 and 1048576, got 2000000"},
		{"GlobalFlagWithoutValue", []string{"--addr"}, "idlegrid: flag needs an argument: --addr"},
		{"BadLogKey", []string{"audit", "verify", "--log-key", "bogus"}, `idlegrid: --log-key: "bogus" is not a base64 ed25519 public key; give the key your operator publishes, e.g. --log-key "$(cat log-key.pub)"`},
		{"CancelNothing", []string{"job", "cancel"}, "idlegrid: give the IDs of the jobs to cancel, or --name and the start of their names, e.g. idlegrid job cancel job_abc123"},
		{"CancelBoth", []string{"job", "cancel", "job_x", "--name", "lr-"}, "idlegrid: give the IDs of the jobs to cancel or --name, not both"},
		{"NegativeAmount", []string{"account", "topup", "acct_x", "-5"}, "idlegrid: AMOUNT must be positive, got -5"},
		{"NegativeAmountFirst", []string{"account", "topup", "-12.50", "acct_x"}, `idlegrid: AMOUNT: not a decimal amount: "acct_x"; write a decimal amount such as 100 or 12.50`},
		{"NegativeAmountAfterFlag", []string{"account", "topup", "acct_x", "--json", "-5"}, "idlegrid: AMOUNT must be positive, got -5"},
		// What the spec's check refuses is a mistake in the command line
		// too, and names the flag given rather than the spec's field.
		{"ZeroGPUs", []string{"job", "submit", "--image", "x/y:1", "--max-price", "1", "--duration", "1m", "--gpus", "0"}, "idlegrid: --gpus: must be between 1 and 16"},
		{"ZeroNodes", []string{"job", "submit", "--image", "x/y:1", "--max-price", "1", "--duration", "1m", "--nodes", "0"}, "idlegrid: --nodes: must be between 1 and 64, got 0"},
		{"NegativeNodes", []string{"job", "submit", "--image", "x/y:1", "--max-price", "1", "--duration", "1m", "--nodes", "-2"}, "idlegrid: --nodes: must be between 1 and 64, got -2"},
		{"PriceOverLimit", []string{"job", "submit", "--image", "x/y:1", "--max-price", "5000", "--duration", "1m"}, "idlegrid: --max-price: must be between 1 micro and 1000 per GPU-hour"},
		{"NameWithControls", []string{"job", "submit", "--name", "x\x1b[31mRED\nnewline", "--image", "x/y:1", "--max-price", "1", "--duration", "1m"},
			"idlegrid: --name: must be printable text: no control characters such as escapes, tabs or line breaks"},
		{"MissingImage", []string{"job", "submit", "--max-price", "1", "--duration", "1m"},
			"idlegrid: --image: required: give the container image, e.g. --image ghcr.io/acme/trainer:1.4, or a job file with -f"},
		{"QuarantineNoReason", []string{"node", "quarantine", "add", "node_x"}, `idlegrid: --reason is required: say why, for the provider to read, e.g. idlegrid node quarantine add node_x --reason "receipts disagree with telemetry"`},
		{"EstimateGPUsWithoutCount", []string{"estimate", "--provider", "--gpus", "RTX4090"}, `idlegrid: --gpus: must be N or NxMODEL, e.g. 1xRTX4090, got "RTX4090"`},
		{"EstimateGPUsWithoutModel", []string{"estimate", "--provider", "--gpus", "2", "--region", "eu-west", "--ask", "0.4"}, "idlegrid: --gpus: name the model too, e.g. 2xRTX4090"},
		{"EstimateWindows", []string{"estimate", "--provider", "--gpus", "1xRTX4090", "--region", "eu-west", "--ask", "0.4", "--windows", "sometimes"},
			`idlegrid: --windows: unknown window "sometimes"; use always, nights, evenings, weekends, workdays or DAYS/HH:MM-HH:MM such as mon-fri/18:00-08:00`},
		{"EstimateWindowHour", []string{"estimate", "--provider", "--gpus", "1xRTX4090", "--region", "eu-west", "--ask", "0.4", "--windows", "nights,mon-fri/25:00-08:00"},
			`idlegrid: --windows: "mon-fri/25:00-08:00": start must be HH:MM between 00:00 and 23:59, got "25:00"`},
		{"EstimateTimeZone", []string{"estimate", "--provider", "--gpus", "1xRTX4090", "--region", "eu-west", "--ask", "0.4", "--tz", "Mars/Base"},
			`idlegrid: --tz: unknown time zone "Mars/Base"`},
		{"EstimateRenterDuration", []string{"estimate", "--renter", "--gpus", "1"},
			"idlegrid: --duration: required: give the job's run time, e.g. --duration 4h, or a job file with --job"},
		{"RegistryWithPath", []string{"registry", "login", "ghcr.io/v2", "-u", "x"},
			`idlegrid: REGISTRY: "ghcr.io/v2" is not a registry host; give the host alone, as your images name it, e.g. ghcr.io or registry.example.com:5000 (here ghcr.io, without /v2)`},
		{"BadTTL", []string{"token", "create", "--name", "x", "--ttl", "5"},
			`idlegrid: invalid value "5" for flag --ttl: must be a duration such as 30m, 24h or 1h30m (a number needs its unit: s, m or h), got "5"`},
		{"BadDrainTimeout", []string{"node", "drain", "node_x", "--wait", "--timeout", "abc"},
			`idlegrid: invalid value "abc" for flag --timeout: must be a duration such as 30m, 24h or 1h30m, got "abc"`},
		{"BadWatchEvery", []string{"job", "watch", "job_x", "--every", "often"},
			`idlegrid: invalid value "often" for flag --every: must be a duration such as 30m, 24h or 1h30m, got "often"`},
		{"BadBool", []string{"job", "ls", "--json=3"}, `idlegrid: invalid value "3" for flag --json: must be true or false (or the flag alone for true), got "3"`},
		{"ShortFlagNoValue", []string{"job", "submit", "-f"}, "idlegrid: flag needs an argument: -f"},
		{"BadLimitNumber", []string{"job", "ls", "--limit", "ten"}, `idlegrid: invalid value "ten" for flag --limit: must be a whole number, got "ten"`},
		{"JobLimitZero", []string{"job", "ls", "--limit", "0"}, "idlegrid: --limit: 0 is out of range; give 1 to 10000 jobs, or leave it out for 100"},
		{"JobLimitNegative", []string{"job", "ls", "--limit", "-1"}, "idlegrid: --limit: -1 is out of range; give 1 to 10000 jobs, or leave it out for 100"},
		// A --limit of 0 is no page size: it was taken for the server's
		// default, and the next page's command repeated --limit 0.
		{"AccountLimitZero", []string{"account", "ls", "--limit", "0"}, "idlegrid: --limit: 0 is out of range; give 1 to 10000 accounts, or leave it out for 1000"},
		{"TransfersLimitZero", []string{"account", "transfers", "--limit", "0"}, "idlegrid: --limit: 0 is out of range; give 1 to 10000 transfers, or leave it out for 100"},
		{"NoticesLimitNegative", []string{"account", "notices", "--limit", "-1"}, "idlegrid: --limit: -1 is out of range; give 1 to 10000 notices, or leave it out for 50"},
		{"PayoutLimitZero", []string{"payout", "ls", "--limit", "0"}, "idlegrid: --limit: 0 is out of range; give 1 to 10000 payouts, or leave it out for 100"},
		{"DisputeLimitZero", []string{"dispute", "ls", "--limit", "0"}, "idlegrid: --limit: 0 is out of range; give 1 to 10000 disputes, or leave it out for 100"},
		{"VerificationLimitHuge", []string{"dispute", "verifications", "--limit", "20000"}, "idlegrid: --limit: 20000 is out of range; give 1 to 10000 verifications, or leave it out for 100"},
		{"QuarantineLimitZero", []string{"node", "quarantine", "ls", "--limit", "0"}, "idlegrid: --limit: 0 is out of range; give 1 to 10000 quarantines, or leave it out for 100"},
		{"ChallengeLimitZero", []string{"node", "challenges", "node_x", "--limit", "0"}, "idlegrid: --limit: 0 is out of range; give 1 to 10000 challenges, or leave it out for 100"},
		{"LeaseLimitZero", []string{"lease", "ls", "--limit", "0"}, "idlegrid: --limit: 0 is out of range; give 1 to 10000 leases, or leave it out for 100"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, key, tt.args...)
			if got := firstLines(r.err, 1); r.code != 2 || got != tt.want {
				t.Fatalf("got exit %d, stderr %q\nwant exit 2, stderr %q", r.code, got, tt.want)
			}
		})
	}
}

func TestMain_Errors(t *testing.T) {
	t.Run("NoKey", func(t *testing.T) {
		r := run(t, nil, "job", "ls")
		want := "idlegrid: no API key\n  set --key or IDLEGRID_KEY; with 'idlegrid dev' running: export IDLEGRID_KEY=$(cat DATA_DIR/admin.key)\n"
		if r.code != 1 || r.err != want {
			t.Fatalf("got %s\nwant exit 1 and stderr %q", r, want)
		}
	})
	t.Run("InvalidSpecNamesField", func(t *testing.T) {
		r := run(t, map[string]string{"IDLEGRID_KEY": "k"}, "job", "submit", "--image", "ghcr.io/acme/x:1", "--gpus", "17", "--max-price", "2", "--duration", "1h")
		want := "idlegrid: --gpus: must be between 1 and 16\n  fix the flag named above and try again; 'idlegrid help job submit' shows the flags\n"
		if r.code != 2 || r.err != want {
			t.Fatalf("got %s\nwant exit 2 and stderr %q", r, want)
		}
	})
	t.Run("InvalidSpecNamesEveryField", func(t *testing.T) {
		r := run(t, map[string]string{"IDLEGRID_KEY": "k"}, "job", "submit", "--gpus", "17", "--tier", "platinum", "--max-price", "2")
		want := "idlegrid: 4 problems:\n" +
			"  --image: required: give the container image, e.g. --image ghcr.io/acme/trainer:1.4, or a job file with -f\n" +
			"  --duration: required: give the run time, e.g. --duration 1h, or a job file with -f\n" +
			"  --gpus: must be between 1 and 16\n" +
			"  --tier: must be gold, silver or bronze, got \"platinum\"\n" +
			"  fix the flags named above and try again; 'idlegrid help job submit' shows the flags\n"
		if r.code != 2 || r.err != want {
			t.Fatalf("got %s\nwant exit 2 and stderr %q", r, want)
		}
	})
	// Without a flag, each one a job needs is named: a mistake in the
	// command line.
	t.Run("SubmitWithoutFlags", func(t *testing.T) {
		r := run(t, map[string]string{"IDLEGRID_KEY": "k"}, "job", "submit")
		want := "idlegrid: 3 problems:\n" +
			"  --image: required: give the container image, e.g. --image ghcr.io/acme/trainer:1.4, or a job file with -f\n" +
			"  --max-price: required: give the most you pay per GPU-hour, e.g. --max-price 2.50, or a job file with -f\n" +
			"  --duration: required: give the run time, e.g. --duration 1h, or a job file with -f\n" +
			"  fix the flags named above and try again; 'idlegrid help job submit' shows the flags\n"
		if r.code != 2 || r.err != want {
			t.Fatalf("got %s\nwant exit 2 and stderr %q", r, want)
		}
	})
	// A job file's fields at fault are named with the file, as a mistake
	// found while reading it is; those of the flags given, as the flags.
	t.Run("InvalidFileFieldKeepsItsName", func(t *testing.T) {
		file := mustFile(t, "job.yaml", "image: x/y:1\ngpus: 0\nmax_price: \"1\"\nduration: 1m\n")
		r := run(t, map[string]string{"IDLEGRID_KEY": "k"}, "job", "submit", "-f", file, "--tier", "gold")
		if want := "idlegrid: " + file + ": job.gpus: must be between 1 and 16\n"; r.code != 1 || firstLines(r.err, 1)+"\n" != want {
			t.Fatalf("got %s\nwant exit 1 and stderr starting %q", r, want)
		}
		file = mustFile(t, "nodur.yaml", "image: x/y:1\ngpus: 1\nmax_price: \"1\"\n")
		r = run(t, map[string]string{"IDLEGRID_KEY": "k"}, "job", "submit", "-f", file, "--tier", "platinum")
		want := "idlegrid: 2 problems:\n" +
			"  " + file + ": job.duration: required: give --duration 1h or duration in the job file\n" +
			"  --tier: must be gold, silver or bronze, got \"platinum\"\n"
		if r.code != 2 || !strings.HasPrefix(r.err, want) {
			t.Fatalf("got %s\nwant exit 2 and stderr starting %q", r, want)
		}
	})
	// A duration over a job's 30 days is refused in the flag's own terms,
	// not as a count of seconds.
	t.Run("DurationOver30Days", func(t *testing.T) {
		r := run(t, map[string]string{"IDLEGRID_KEY": "k"}, "job", "submit", "--image", "ghcr.io/acme/x:1", "--max-price", "2", "--duration", "800h")
		if want := `idlegrid: invalid value "800h" for flag --duration: must be at most 720h (30 days), got "800h"` + "\n"; r.code != 2 || firstLines(r.err, 1)+"\n" != want {
			t.Fatalf("got %s\nwant exit 2 and stderr starting %q", r, want)
		}
	})
	t.Run("MissingPrice", func(t *testing.T) {
		r := run(t, map[string]string{"IDLEGRID_KEY": "k"}, "job", "submit", "--image", "ghcr.io/acme/x:1", "--duration", "1h")
		if want := "idlegrid: --max-price: required: give the most you pay per GPU-hour, e.g. --max-price 2.50, or a job file with -f\n"; r.code != 2 || firstLines(r.err, 1)+"\n" != want {
			t.Fatalf("got %s\nwant exit 2 and stderr starting %q", r, want)
		}
	})
	t.Run("MissingJobFile", func(t *testing.T) {
		r := run(t, map[string]string{"IDLEGRID_KEY": "k"}, "job", "submit", "-f", t.TempDir()+"/nope.yaml")
		if r.code != 1 || !strings.Contains(r.err, "no such file or directory") || !strings.Contains(r.err, "give the path of a YAML or JSON job file") {
			t.Fatalf("got %s", r)
		}
	})
	t.Run("Unreachable", func(t *testing.T) {
		r := run(t, map[string]string{"IDLEGRID_KEY": "k"}, "--addr", "127.0.0.1:1", "node", "ls")
		if r.code != 1 || !strings.HasPrefix(r.err, "idlegrid: cannot reach the idlegrid server (is the server running at http://127.0.0.1:1? set --addr or IDLEGRID_ADDR)") {
			t.Fatalf("got %s", r)
		}
	})
}

func TestMain_Version(t *testing.T) {
	r := run(t, nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.out, "idlegrid "+Version) {
		t.Fatalf("got %s", r)
	}
	if r2 := run(t, nil, "--version"); r2.out != r.out {
		t.Errorf("--version printed %q, want %q", r2.out, r.out)
	}
}

func TestEnv_GlobalFlags(t *testing.T) {
	for _, tt := range []struct {
		args           []string
		wantAddr, want string
		wantRest       []string
	}{
		{[]string{"--addr", "h:1", "--key=k", "job", "ls"}, "h:1", "k", []string{"job", "ls"}},
		{[]string{"-addr=h:2", "node", "ls", "--addr", "x"}, "h:2", "", []string{"node", "ls", "--addr", "x"}},
		{[]string{"job", "--addr", "h"}, "", "", []string{"job", "--addr", "h"}},
	} {
		e := &env{}
		rest, err := e.globalFlags(tt.args)
		if err != nil || e.addr != tt.wantAddr || e.key != tt.want || strings.Join(rest, " ") != strings.Join(tt.wantRest, " ") {
			t.Errorf("globalFlags(%q) = %q, addr %q, key %q, %v; want %q, %q, %q", tt.args, rest, e.addr, e.key, err, tt.wantRest, tt.wantAddr, tt.want)
		}
	}
}

func TestFlagSet_Parse(t *testing.T) {
	e := &env{Stdio: Stdio{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}}
	for _, tt := range []struct {
		args     []string
		wantPos  string
		wantJSON bool
	}{
		{[]string{"job_1", "--json"}, "job_1", true},
		{[]string{"--json", "job_1"}, "job_1", true},
		{[]string{"job_1"}, "job_1", false},
		{[]string{"--image", "x", "--", "python", "--json"}, "python --json", false},
		{[]string{"a", "--json", "b", "--", "-c"}, "a b -c", true},
	} {
		fs := e.flags("t", help{})
		asJSON := fs.Bool("json", false, "")
		fs.String("image", "", "")
		pos, err := fs.parse(tt.args)
		if got := strings.Join(pos, " "); err != nil || got != tt.wantPos || *asJSON != tt.wantJSON {
			t.Errorf("parse(%q) = %q, json %v, %v; want %q, json %v", tt.args, got, *asJSON, err, tt.wantPos, tt.wantJSON)
		}
	}
}

// A not-found error points to the listing of its kind of object.
func TestHintFor_notFound(t *testing.T) {
	for msg, want := range map[string]string{
		`API key "key_x" not found`:                                  "'idlegrid key ls'",
		`lease "lea_x" not found`:                                    "'idlegrid lease ls'",
		`no such endpoint: GET /dashboard/v1/jobs (see docs/api.md)`: "with no path; or the server runs an older idlegrid than this one, without this command",
		`node "node_x" not found`:                                    "'idlegrid node ls'",
		`join token "tok" not found`:                                 "'idlegrid token ls'",
		// An ID of another kind is said to be one, with its command.
		`job "node_1k8u" not found`:      "node_1k8u is a node's ID, not a job's: see it with 'idlegrid node get node_1k8u'",
		`node "job_1k8u" not found`:      "job_1k8u is a job's ID, not a node's: see it with 'idlegrid job get job_1k8u'",
		`lease "acct_1k8u" not found`:    "acct_1k8u is an account's ID, not a lease's: see it with 'idlegrid account show acct_1k8u'",
		`account "key_1k8u" not found`:   "key_1k8u is an API key's ID, not an account's: see it with 'idlegrid key ls'",
		`provider "acct_1k8u" not found`: "'idlegrid account ls'",
		`not found`:                      "'idlegrid job ls', 'idlegrid node ls' or 'idlegrid account ls'",
	} {
		if got := hintFor(idlegrid.Errorf(idlegrid.ENOTFOUND, "%s", msg)); !strings.HasSuffix(got, want) {
			t.Errorf("hint for %q = %q, want it to end %s", msg, got, want)
		}
	}
}

// TestHintFor_unauthorized: an agent refused for its node key is told to
// mend the node's identity, not to set an API key.
func TestHintFor_unauthorized(t *testing.T) {
	for msg, want := range map[string]string{
		"bad node signature":         "put the node's own key back",
		"unknown node node_1k8u":     "the server does not know this node",
		"invalid or revoked API key": "set --key or IDLEGRID_KEY to a valid API key",
	} {
		if got := hintFor(idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "%s", msg)); !strings.Contains(got, want) {
			t.Errorf("hint for %q = %q, want it to say %q", msg, got, want)
		}
	}
}
