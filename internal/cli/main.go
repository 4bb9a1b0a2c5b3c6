// Package cli is every subcommand of the idlegrid binary and all of its
// wiring: which store, which matcher, which runtime, which addresses. Each
// subcommand is a small struct with a Run(ctx, args) error method that takes
// its standard streams and environment from an env, so tests call Main
// directly with buffers (Litestream's cmd/litestream habit).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// Stdio is the standard streams of one invocation.
type Stdio struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// env is what every subcommand gets: its streams and its environment.
type env struct {
	Stdio
	getenv func(string) string
	// addr and key are the global --addr and --key given before the
	// command ("idlegrid --addr URL job ls"); a command's own flags win.
	addr, key string
	// ran is the flags of the command that ran, and args its positional
	// arguments, once parsed: errors name the flags the caller typed, and
	// hints the command's own objects.
	ran  *flagSet
	args []string
	// probing, when set, is a completion's probe of a command (probe):
	// a group records its subcommands in it.
	probing *probed
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

func commands() []command {
	return []command{
		{"dev", "run a whole market on this machine: server, providers, a renter submitting jobs", func(ctx context.Context, e *env, a []string) error { return (&devCommand{env: e}).Run(ctx, a) }},
		{"server", "run the coordinator: the HTTP API, the market engine and the ledger", func(ctx context.Context, e *env, a []string) error { return (&serverCommand{env: e}).Run(ctx, a) }},
		{"agent", "run the provider agent that offers this machine's GPUs", func(ctx context.Context, e *env, a []string) error { return (&agentCommand{env: e}).Run(ctx, a) }},
		{"job", "submit, list, inspect and cancel jobs; read their logs", func(ctx context.Context, e *env, a []string) error { return (&jobCommand{env: e}).Run(ctx, a) }},
		{"lease", "list and inspect leases and their events; export and verify their signed usage receipts", func(ctx context.Context, e *env, a []string) error { return (&leaseCommand{env: e}).Run(ctx, a) }},
		{"node", "list and inspect nodes; quarantine, schedule, drain and retire them", func(ctx context.Context, e *env, a []string) error { return (&nodeCommand{env: e}).Run(ctx, a) }},
		{"market", "prices, supply, demand and suggested asks per GPU model and region", func(ctx context.Context, e *env, a []string) error { return (&marketCommand{env: e}).Run(ctx, a) }},
		{"status", "the market at a glance (admins): jobs, GPUs, nodes and money; --watch follows it", func(ctx context.Context, e *env, a []string) error { return (&statusCommand{env: e}).Run(ctx, a) }},
		{"inference", "the OpenAI-compatible gateway: models served, latency and price per model, your metered requests", func(ctx context.Context, e *env, a []string) error { return (&inferenceCommand{env: e}).Run(ctx, a) }},
		{"sim", "replay real traces through the market engine and baselines: fill, savings, earnings, waits", func(ctx context.Context, e *env, a []string) error { return (&simCommand{env: e}).Run(ctx, a) }},
		{"estimate", "what a provider would earn, or a renter pay, from the live market or a trace replay", func(ctx context.Context, e *env, a []string) error { return (&estimateCommand{env: e}).Run(ctx, a) }},
		{"token", "create, list and revoke join tokens (providers)", func(ctx context.Context, e *env, a []string) error { return (&tokenCommand{env: e}).Run(ctx, a) }},
		{"key", "create, list and revoke your API keys; set their spend limits and inference routing", func(ctx context.Context, e *env, a []string) error { return (&keyCommand{env: e}).Run(ctx, a) }},
		{"registry", "your logins to private container registries, for your jobs' images", func(ctx context.Context, e *env, a []string) error { return (&registryCommand{env: e}).Run(ctx, a) }},
		{"account", "your money: balances, holds, spend, earnings, statements, limits", func(ctx context.Context, e *env, a []string) error { return (&accountCommand{env: e}).Run(ctx, a) }},
		{"payout", "request, list, settle and reject payouts of providers' earnings", func(ctx context.Context, e *env, a []string) error { return (&payoutCommand{env: e}).Run(ctx, a) }},
		{"bond", "stake and release a provider's bond against penalties", func(ctx context.Context, e *env, a []string) error { return (&bondCommand{env: e}).Run(ctx, a) }},
		{"dispute", "offences charged to providers, their evidence and penalties", func(ctx context.Context, e *env, a []string) error { return (&disputeCommand{env: e}).Run(ctx, a) }},
		{"backup", "copy a running SQLite market to a new file, and check the copy", func(ctx context.Context, e *env, a []string) error { return (&backupCommand{env: e}).Run(ctx, a) }},
		{"audit", "verify the audit log: your entries are in it, and it was only ever appended to", func(ctx context.Context, e *env, a []string) error { return (&auditCommand{env: e}).Run(ctx, a) }},
		{"completion", "print the script that makes bash, zsh or fish complete idlegrid's commands and flags", func(ctx context.Context, e *env, a []string) error { return (&completionCommand{env: e}).Run(ctx, a) }},
		{"version", "print the version", func(ctx context.Context, e *env, a []string) error { return (&versionCommand{env: e}).Run(ctx, a) }},
	}
}

// Main runs the idlegrid command line with args (without the program name)
// and returns the process exit code: 0 on success, 1 on failure, 2 for a
// usage error, or a command's own (the agent's ExitHandedOver). It prints
// errors itself, as "idlegrid: message" and a hint.
func Main(ctx context.Context, args []string, stdio Stdio, getenv func(string) string) int {
	if stdio.In == nil {
		stdio.In = strings.NewReader("")
	}
	e := &env{Stdio: stdio, getenv: getenv}
	err := e.dispatch(ctx, args)
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(*usageError)):
		fmt.Fprintf(e.Err, "idlegrid: %s\n", err)
		return 2
	}
	if es := (*exitStatus)(nil); errors.As(err, &es) {
		return es.code
	}
	err = e.inCommandTerms(err)
	printError(e.Err, err)
	if e.typedFlagWrong(err) {
		return 2
	}
	return 1
}

func (e *env) dispatch(ctx context.Context, args []string) error {
	args, err := e.globalFlags(args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		e.rootUsage(e.Err)
		return usagef("no command given")
	}
	name := args[0]
	if name == completeWord {
		return e.complete(ctx, args[1:])
	}
	if isHelpWord(name) {
		// "help job submit" is "job submit --help"; "help help" and
		// "help --help" are "help".
		rest := slices.DeleteFunc(slices.Clone(args[1:]), isHelpWord)
		if len(rest) > 0 {
			return e.dispatch(ctx, append(rest, "--help"))
		}
		e.rootUsage(e.Out)
		return nil
	}
	if name == "--version" || name == "-version" {
		name = "version"
	}
	names := []string{"help"}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, e, args[1:])
		}
		names = append(names, c.name)
	}
	if strings.HasPrefix(name, "-") {
		// A flag before the command that is not --addr or --key: a
		// command's own flags go after it ("idlegrid job ls --json").
		flagName, _, _ := strings.Cut(strings.TrimLeft(name, "-"), "=")
		msg := "unknown flag " + flagText(flagName) + " before the command" + didYouMean(flagName, []string{"addr", "key"}, func(s string) string { return "--" + s })
		return usagef("%s%sonly --addr and --key go before the command, its own flags after it, e.g. idlegrid job ls --json", msg, thenSep(msg))
	}
	msg := fmt.Sprintf("unknown command %q", name) + didYouMean(name, names, func(s string) string { return "'idlegrid " + s + "'" })
	return usagef("%s%srun 'idlegrid help' to list the commands", msg, thenSep(msg))
}

// isHelpWord reports whether arg asks for help: help, -h, -help or --help.
func isHelpWord(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "--help" || arg == "-help"
}

// globalFlags consumes --addr and --key given before the command.
func (e *env) globalFlags(args []string) ([]string, error) {
	for len(args) > 0 {
		name, value, hasValue, ok := addrOrKey(args[0])
		if !ok {
			return args, nil
		}
		args = args[1:]
		if !hasValue {
			if len(args) == 0 {
				return nil, usagef("flag needs an argument: --%s", name)
			}
			value, args = args[0], args[1:]
		}
		if name == "addr" {
			e.addr = value
		} else {
			e.key = value
		}
	}
	return args, nil
}

// addrOrKey reads arg as --addr or --key (or -addr, -key), with its value
// when it is written in (--addr=URL); ok is false for any other word.
func addrOrKey(arg string) (name, value string, hasValue, ok bool) {
	name, value, hasValue = strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return name, value, hasValue, strings.HasPrefix(arg, "-") && (name == "addr" || name == "key")
}

func (e *env) rootUsage(w io.Writer) {
	fmt.Fprint(w, `idlegrid turns idle GPU time into rentable compute.

Usage:

	idlegrid <command> [arguments]

Commands:

`)
	cs := commands()
	width := 0
	for _, c := range cs {
		width = max(width, len(c.name))
	}
	for _, c := range cs {
		fmt.Fprintf(w, "\t%-*s   %s\n", width, c.name, c.summary)
	}
	fmt.Fprint(w, `
Start here:

	idlegrid dev                 # a whole market on this machine, with a live summary
	idlegrid help <command>      # what a command does, with examples

Commands that talk to a server read its address and your API key from
--addr and --key, or IDLEGRID_ADDR and IDLEGRID_KEY (default address
`+defaultAddr+`).
`)
}

// usageError is a mistake in how the command was called; it exits with 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// exitStatus ends a command with its code and nothing printed: the
// command has said what happened (the agent's hand-over).
type exitStatus struct{ code int }

func (e *exitStatus) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// printError prints err as "idlegrid: message" followed by what to do next.
func printError(w io.Writer, err error) {
	if faults := faultList(err); faults != nil {
		fmt.Fprintf(w, "idlegrid: %d problems:\n", len(faults))
		for _, f := range faults {
			fmt.Fprintf(w, "  %s\n", f)
		}
	} else {
		fmt.Fprintf(w, "idlegrid: %s\n", errorText(err))
	}
	if hint := hintFor(err); hint != "" {
		fmt.Fprintf(w, "  %s\n", hint)
	}
}

// errorText is the message of err. Domain errors carry a caller-safe message
// already; other errors (files, flags, the network) are shown as they are,
// since the CLI runs on the caller's own machine.
func errorText(err error) string {
	var e *idlegrid.Error
	if errors.As(err, &e) {
		return e.Error()
	}
	return err.Error()
}

// faultList is the text of each field at fault when err names several,
// and nil otherwise.
func faultList(err error) []string {
	var e *idlegrid.Error
	if !errors.As(err, &e) || len(e.More) == 0 {
		return nil
	}
	var faults []string
	for _, p := range e.All() {
		faults = append(faults, p.Error())
	}
	return faults
}

// faultLines is err's text, a line for each field at fault when it names
// several.
func faultLines(err error) string {
	if faults := faultList(err); faults != nil {
		return strings.Join(faults, "\n")
	}
	return errorText(err)
}

// hintFor says what to do next about err, or "".
func hintFor(err error) string {
	var h *hintError
	if errors.As(err, &h) {
		return h.hint
	}
	switch idlegrid.ErrorCode(err) {
	case idlegrid.EUNAUTHORIZED:
		return unauthorizedHint(idlegrid.ErrorMessage(err))
	case idlegrid.EFORBIDDEN:
		if strings.Contains(idlegrid.ErrorMessage(err), "API key's access is") {
			return "this takes a key of wider access: set --key or IDLEGRID_KEY to one ('idlegrid key ls', with a key of access all, shows each key's access)"
		}
		return "this needs another role: use the API key of an account that may do it (see 'idlegrid account ls' as an admin)"
	case idlegrid.ENOTFOUND:
		return notFoundHint(idlegrid.ErrorMessage(err))
	case idlegrid.EPAYMENT:
		if strings.Contains(idlegrid.ErrorMessage(err), "spend limit") {
			return "an admin raises an account's limit with 'idlegrid account limit ACCOUNT_ID AMOUNT'; the renter raises a key's with 'idlegrid key limit'"
		}
		return "not enough balance: an admin can add funds with 'idlegrid account topup ACCOUNT_ID AMOUNT'"
	case idlegrid.EINVALID:
		if faultList(err) != nil {
			return "fix the fields named above and try again; 'idlegrid help <command>' shows the flags"
		}
		return "fix the field named above and try again; 'idlegrid help <command>' shows the flags"
	case idlegrid.ECONFLICT:
		return "it is not in a state that allows this now; the message above says what state it is in"
	case idlegrid.EUNAVAILABLE:
		return "the server is busy or starting; try again in a moment"
	}
	return ""
}

// unauthorizedHint says what to do about a refused identity: an agent's
// node key the server does not hold for its node, a node it does not
// know, or else an API key.
func unauthorizedHint(msg string) string {
	switch {
	case strings.Contains(msg, nodekey.BadSignatureWords):
		return "the server knows this node by another key: put the node's own key back (node.key in the agent's data dir), " +
			"or move node.json there away and give the agent a join token, to join as a new node; 'idlegrid agent --check' says which"
	case strings.Contains(msg, nodekey.UnknownWords):
		return "the server does not know this node (its database was reset, or restored from before the node joined): " +
			"move node.json in the agent's data dir away and give the agent a join token, to join as a new node"
	}
	return "set --key or IDLEGRID_KEY to a valid API key (a fresh server writes the first admin key to its --bootstrap-admin-key-file)"
}

// listOf is the command that lists each kind of object the server says
// it did not find ("API key \"key_x\" not found").
var listOf = map[string]string{
	"job": "idlegrid job ls", "lease": "idlegrid lease ls", "node": "idlegrid node ls",
	"account": "idlegrid account ls", "provider": "idlegrid account ls", "API key": "idlegrid key ls",
	"join token": "idlegrid token ls", "dispute": "idlegrid dispute ls", "payout": "idlegrid payout ls",
}

// idKinds are the kinds of object whose IDs begin with each prefix, as
// the server's messages name them, and the command that shows one.
var idKinds = []struct{ prefix, kind, show string }{
	{"job_", "job", "idlegrid job get ID"}, {"node_", "node", "idlegrid node get ID"},
	{"lease_", "lease", "idlegrid lease get ID"}, {"acct_", "account", "idlegrid account show ID"},
	{"key_", "API key", "idlegrid key ls"}, {"jt_", "join token", "idlegrid token ls"},
	{"dispute_", "dispute", "idlegrid dispute show ID"}, {"payout_", "payout", "idlegrid payout ls"},
}

// wrongKindHint says, when msg says an object of one kind was not found
// (`job "node_x" not found`) and its ID is one of another kind, which kind
// it is and the command that shows it; "" otherwise.
func wrongKindHint(msg string) string {
	kind, rest, ok := strings.Cut(msg, ` "`)
	id, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 {
		return ""
	}
	if kind == "provider" { // a provider is an account
		kind = "account"
	}
	for _, k := range idKinds {
		if strings.HasPrefix(id, k.prefix) && k.kind != kind {
			return fmt.Sprintf("%s is %s ID, not %s: see it with '%s'", id, withArticle(k.kind+"'s"), withArticle(kind+"'s"),
				strings.Replace(k.show, "ID", id, 1))
		}
	}
	return ""
}

// withArticle is s after "a", or "an" before a vowel.
func withArticle(s string) string {
	if s != "" && strings.ContainsRune("aeiouAEIOU", rune(s[0])) {
		return "an " + s
	}
	return "a " + s
}

// notFoundHint points to the listing of the kind of object msg says was
// not found, or to the common ones; or, given an ID of another kind, to
// the command for that kind.
func notFoundHint(msg string) string {
	if strings.HasPrefix(msg, "no such endpoint") {
		// No ID is at fault: the address has a path of its own (the
		// dashboard's page), or the server is older than this CLI.
		return "check the server address (--addr or IDLEGRID_ADDR): its scheme, host and port only, e.g. " + defaultAddr +
			", with no path; or the server runs an older idlegrid than this one, without this command"
	}
	if hint := wrongKindHint(msg); hint != "" {
		return hint
	}
	kind, _, ok := strings.Cut(msg, ` "`)
	if list := listOf[kind]; ok && list != "" {
		return "check the ID, e.g. with '" + list + "'"
	}
	return "check the ID, e.g. with 'idlegrid job ls', 'idlegrid node ls' or 'idlegrid account ls'"
}

// hintError wraps an error with a specific hint.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

func withHint(err error, hint string) error {
	if err == nil {
		return nil
	}
	return &hintError{err: err, hint: hint}
}
