package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// completeWord is the hidden command the shells' completion scripts call:
// "idlegrid __complete WORD… TYPED" prints the words that may stand where
// TYPED (maybe "") is being typed, one a line.
const completeWord = "__complete"

// completionCommand is "idlegrid completion SHELL": the script that makes
// a shell complete idlegrid's commands, subcommands, flags and the values
// of some flags.
type completionCommand struct{ env *env }

func (c *completionCommand) Run(ctx context.Context, args []string) error {
	fs := c.env.flags("completion", help{
		usage: "idlegrid completion bash|zsh|fish",
		about: `Print the script that makes the shell complete idlegrid's commands,
subcommands and flags; the values of flags that take one of a few words
(--tier, --kind, --role, --access, --runtime, --log-level, --log-format,
--bad-rows, --align, --offence, --fallbacks, --sticky, and the listings'
--state, a comma-separated list, and --sort); and, as the server lists
them to your key (IDLEGRID_ADDR and IDLEGRID_KEY, or --addr and --key on
the line, asked for at most 2 s), the IDs of jobs, leases, nodes,
disputes, payouts, API keys, join tokens and (for admins) accounts, and
the registries you logged in to (at most 100 of each, the newest where a
listing is newest first, and nodes' names) where a command takes one,
those of jobs and nodes for --from and --node, and the market's GPU
models and regions for --gpu-model and --region. Elsewhere the shell
offers file names. The script asks idlegrid itself, so it stays true
across upgrades.`,
		examples: `source <(idlegrid completion bash)        # in ~/.bashrc
		idlegrid completion zsh > "${fpath[1]}/_idlegrid"   # then start a new shell
		idlegrid completion fish > ~/.config/fish/completions/idlegrid.fish`,
	})
	fs.choices = slices.Sorted(maps.Keys(completionScripts))
	args, err := fs.parseArgs(args, 1, 1, "one shell: bash, zsh or fish")
	if err != nil {
		return err
	}
	script, ok := completionScripts[args[0]]
	if !ok {
		return usagef("unknown shell %q; idlegrid completes in bash, zsh and fish", args[0])
	}
	_, err = io.WriteString(c.env.Out, script)
	return err
}

// completionScripts are the scripts, by shell. Each calls the idlegrid the
// user is typing (its first word) with completeWord and the words so far,
// the one being typed last, even when empty.
var completionScripts = map[string]string{
	"bash": `# bash completion for idlegrid: source <(idlegrid completion bash)
_idlegrid() {
	local IFS=$'\n'
	COMPREPLY=($("${COMP_WORDS[0]}" ` + completeWord + ` "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _idlegrid idlegrid
`,
	"zsh": `#compdef idlegrid
# zsh completion for idlegrid: idlegrid completion zsh > "${fpath[1]}/_idlegrid"
_idlegrid() {
	local out
	out=$("${words[1]}" ` + completeWord + ` "${(@)words[2,CURRENT]}" 2>/dev/null)
	if [[ -n $out ]]; then
		compadd -- "${(@f)out}"
	else
		_files
	fi
}
if [[ $funcstack[1] == _idlegrid ]]; then
	_idlegrid "$@"
else
	compdef _idlegrid idlegrid
fi
`,
	"fish": `# fish completion for idlegrid: idlegrid completion fish > ~/.config/fish/completions/idlegrid.fish
function __idlegrid_complete
	set -l words (commandline -opc)
	$words[1] ` + completeWord + ` $words[2..-1] (commandline -ct | string collect) 2>/dev/null
end
function __idlegrid_completes
	test -n "$(__idlegrid_complete)"
end
complete -c idlegrid -f -n __idlegrid_completes -a '(__idlegrid_complete)'
complete -c idlegrid -F -n 'not __idlegrid_completes'
`,
}

// flagValueWords are the values the shell offers for flags of these
// names, whichever command they belong to.
var flagValueWords = map[string][]string{
	"tier":       wordsOf(idlegrid.Tiers),
	"kind":       wordsOf(idlegrid.WorkloadKinds),
	"role":       {"renter", "provider", "admin"},
	"access":     {"all", "use", "read"},
	"runtime":    {"docker", "fake"},
	"log-format": {"text", "json"},
	"bad-rows":   {"fail", "skip"},
	"log-level":  {"debug", "info", "warn", "error"},
	"align":      {"auto", "median", "none"},
	"offence":    wordsOf(trustpolicy.Offences),
	"fallbacks":  {"true", "false"},
	"sticky":     {"true", "false"},
}

// commandFlagValues are the values offered for flags whose words depend
// on the command, by its path; a --state takes several, comma-separated.
var commandFlagValues = map[string]map[string][]string{
	"job ls":          {"state": wordsOf(idlegrid.JobStates)},
	"lease ls":        {"state": wordsOf(idlegrid.LeaseStates)},
	"node ls":         {"state": wordsOf(idlegrid.NodeStates), "sort": wordsOf(idlegrid.NodeSorts)},
	"node challenges": {"state": wordsOf(idlegrid.ChallengeStates)},
	"dispute ls":      {"state": wordsOf(idlegrid.DisputeStates)},
	"payout ls":       {"state": wordsOf(idlegrid.PayoutStates)},
	"key routing":     {"sort": append(slices.Clone(idlegrid.RoutingSorts), "none")},
}

// flagServerWords are the flags whose values the server lists: the kind
// of them (serverListers).
var flagServerWords = map[string]string{
	"node":      "node_id",   // job logs --node, lease ls --node, dispute open --node
	"from":      "job",       // job submit --from
	"gpu-model": "gpu_model", // job submit, node ls, estimate
	"region":    "region",    // job submit, node ls, agent init, key routing
}

func wordsOf[S ~string](list []S) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = string(s)
	}
	return out
}

// complete prints, one a line, the words that may stand where the last of
// words is being typed and that begin with what is typed of it. It runs
// no command: it asks each, silently, for its help, to learn its
// subcommands or flags.
func (e *env) complete(ctx context.Context, words []string) error {
	if len(words) == 0 {
		words = []string{""}
	}
	typed, before := words[len(words)-1], words[:len(words)-1]
	for _, w := range e.candidates(ctx, before, typed) {
		if strings.HasPrefix(w, typed) {
			fmt.Fprintln(e.Out, w)
		}
	}
	return nil
}

// candidates are the words that may follow before, typed being what is
// typed of the next.
func (e *env) candidates(ctx context.Context, before []string, typed string) []string {
	before, err := e.globalFlags(before) // kept, to ask the server for IDs
	if err != nil {                      // "--addr" before its value is typed
		return nil
	}
	if len(before) > 0 && isHelpWord(before[0]) { // "help job sub…" completes as "job sub…", without flags
		if strings.HasPrefix(typed, "-") {
			return nil
		}
		before = before[1:]
	}
	if len(before) == 0 {
		if strings.HasPrefix(typed, "-") {
			return []string{"--addr", "--key", "--help", "--version"}
		}
		return append(commandNames(), "help")
	}
	subs, fs, path, rest := e.locate(ctx, before)
	switch {
	case fs == nil && len(rest) == 0:
		return subs
	case fs == nil:
		return nil
	}
	return e.commandWords(ctx, fs, path, rest, typed)
}

// locate finds the command that before begins with, by asking each word's
// command for its help: a group (its subcommands, fs nil), or a command
// (its flag set fs), with the words that name it (path) and the rest; fs
// and subs are nil when before names no command.
func (e *env) locate(ctx context.Context, before []string) (subs []string, fs *flagSet, path, rest []string) {
	if !slices.Contains(commandNames(), before[0]) {
		return nil, nil, nil, before
	}
	path, rest = before[:1], before[1:]
	subs, fs = e.probe(ctx, path)
	for fs == nil && len(rest) > 0 && slices.Contains(subs, rest[0]) { // a group's subcommand
		path, rest = before[:len(path)+1], rest[1:]
		subs, fs = e.probe(ctx, path)
	}
	if fs != nil && len(rest) > 0 && slices.Contains(fs.subwords, rest[0]) { // "agent init"
		if _, sub := e.probe(ctx, before[:len(path)+1]); sub != nil {
			fs, path, rest = sub, before[:len(path)+1], rest[1:]
		}
	}
	return subs, fs, path, rest
}

// commandWords are what may follow rest in the command that path names,
// of flag set fs: a flag's values, its flags, its subwords, the choices
// of its first argument, or the IDs the server lists for it.
func (e *env) commandWords(ctx context.Context, fs *flagSet, path, rest []string, typed string) []string {
	if slices.Contains(rest, "--") { // the command's arguments ("job submit -- python train.py")
		return nil
	}
	if f, prefix := valueTyped(fs, rest, typed); f != nil {
		return e.flagValues(ctx, path, f, prefix, rest)
	}
	if strings.HasPrefix(typed, "-") {
		out := []string{"--help"}
		fs.VisitAll(func(f *flag.Flag) { out = append(out, "--"+f.Name) })
		slices.Sort(out)
		return out
	}
	var words []string
	if len(rest) == 0 {
		words = append(slices.Clone(fs.subwords), fs.choices...)
	}
	if kind := idArgument(fs, path); kind != "" && positionals(fs, rest) == 0 {
		words = append(words, e.serverWords(ctx, kind, rest)...)
	}
	return words
}

// valueTyped is the flag of fs whose value is being typed, after rest
// ("--tier g", or bash's "--tier = g") or in typed itself ("--tier=g",
// then prefix is "--tier="), and what the value offered goes after: the
// prefix, and the values before the last comma of a list ("--state
// queued,ru"); nil when typed is no flag's value.
func valueTyped(fs *flagSet, rest []string, typed string) (f *flag.Flag, prefix string) {
	f, prefix = flagTyped(fs, rest, typed)
	if f != nil {
		if i := strings.LastIndexByte(typed, ','); i >= len(prefix) {
			prefix = typed[:i+1]
		}
	}
	return f, prefix
}

// flagTyped is valueTyped without the lists.
func flagTyped(fs *flagSet, rest []string, typed string) (f *flag.Flag, prefix string) {
	if name, _, ok := strings.Cut(typed, "="); ok && strings.HasPrefix(name, "-") {
		if f := fs.Lookup(strings.TrimLeft(name, "-")); f != nil && !isBoolFlag(f) {
			return f, name + "="
		}
		return nil, ""
	}
	if n := len(rest); n > 0 && rest[n-1] == "=" { // bash splits --tier=go at the "="
		rest = rest[:n-1]
	}
	n := len(rest)
	if n == 0 || !strings.HasPrefix(rest[n-1], "-") || strings.Contains(rest[n-1], "=") {
		return nil, ""
	}
	if f := fs.Lookup(strings.TrimLeft(rest[n-1], "-")); f != nil && !isBoolFlag(f) {
		return f, ""
	}
	return nil, ""
}

// flagValues are the values offered for flag f of the command that path
// names, each after prefix: the words known for it, or the IDs the server
// lists for it, but those a list's prefix already gives.
func (e *env) flagValues(ctx context.Context, path []string, f *flag.Flag, prefix string, rest []string) []string {
	values := flagValueWords[f.Name]
	if words, ok := commandFlagValues[strings.Join(path, " ")][f.Name]; ok {
		values = words
	} else if kind := flagServerWords[f.Name]; kind != "" {
		values = e.serverWords(ctx, kind, rest)
	}
	given := strings.Split(prefix[strings.LastIndexByte(prefix, '=')+1:], ",")
	var out []string
	for _, v := range values {
		if !slices.Contains(given, v) {
			out = append(out, prefix+v)
		}
	}
	return out
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// probe runs the command that path names with --help, its output thrown
// away, and returns what it learnt: a group's subcommands (fs nil), or a
// command's flag set.
func (e *env) probe(ctx context.Context, path []string) (subs []string, fs *flagSet) {
	p := &env{Stdio: Stdio{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard}, getenv: e.getenv, probing: &probed{}}
	_ = p.dispatch(ctx, append(slices.Clone(path), "--help"))
	if p.ran != nil {
		return nil, p.ran
	}
	return p.probing.subs, nil
}

// probed is what a probe learns of a group: its subcommands.
type probed struct{ subs []string }

// commandNames are the top-level commands.
func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}

// serverCompletions is how many IDs of a kind the shell is offered: the
// newest.
const serverCompletions = 100

// serverCompletionWait bounds the server's answer: a shell waits for it.
const serverCompletionWait = 2 * time.Second

// serverListers list what the caller may name, by kind: the group of a
// command that takes an ID ("job logs ID", "node get ID|NAME", "key
// revoke ID": the newest jobs', leases', disputes' or payouts' IDs, the
// nodes' names and IDs, the caller's keys, join tokens and registry
// logins, the accounts an admin sees), or a flag's (flagServerWords):
// node_id, the nodes' IDs alone; gpu_model and region, the GPU models and
// regions the market has seen.
var serverListers = map[string]func(ctx context.Context, cl *client.Client) ([]string, error){
	"job": func(ctx context.Context, cl *client.Client) ([]string, error) {
		jobs, err := cl.ListJobs(ctx, idlegrid.JobFilter{Limit: serverCompletions})
		return distinctWords(jobs, func(j *idlegrid.Job) []string { return []string{j.ID} }), err
	},
	"lease": func(ctx context.Context, cl *client.Client) ([]string, error) {
		leases, err := cl.ListLeases(ctx, idlegrid.LeaseFilter{Limit: serverCompletions})
		return distinctWords(leases, func(l *idlegrid.Lease) []string { return []string{l.ID} }), err
	},
	"node": func(ctx context.Context, cl *client.Client) ([]string, error) {
		nodes, err := cl.ListNodes(ctx, idlegrid.NodeFilter{Limit: serverCompletions})
		return distinctWords(nodes, func(n *idlegrid.Node) []string { return []string{n.Name, n.ID} }), err
	},
	"dispute": func(ctx context.Context, cl *client.Client) ([]string, error) {
		disputes, err := cl.ListDisputes(ctx, idlegrid.DisputeFilter{Limit: serverCompletions})
		return distinctWords(disputes, func(d *idlegrid.Dispute) []string { return []string{d.ID} }), err
	},
	"payout": func(ctx context.Context, cl *client.Client) ([]string, error) {
		payouts, err := cl.ListPayouts(ctx, idlegrid.PayoutFilter{Limit: serverCompletions})
		return distinctWords(payouts, func(p *idlegrid.Payout) []string { return []string{p.ID} }), err
	},
	"key": func(ctx context.Context, cl *client.Client) ([]string, error) {
		keys, err := cl.ListAPIKeys(ctx, "")
		return distinctWords(keys, func(k *idlegrid.APIKey) []string { return liveID(k.ID, k.RevokedAt) }), err
	},
	"token": func(ctx context.Context, cl *client.Client) ([]string, error) {
		tokens, err := cl.ListJoinTokens(ctx)
		return distinctWords(tokens, func(t *idlegrid.JoinToken) []string { return liveID(t.ID, t.RevokedAt) }), err
	},
	"account": func(ctx context.Context, cl *client.Client) ([]string, error) { // admins only: others are refused, and offered none
		accounts, err := cl.ListAccounts(ctx, idlegrid.AccountFilter{Limit: serverCompletions})
		return distinctWords(accounts, func(a *idlegrid.Account) []string { return []string{a.ID} }), err
	},
	"registry": func(ctx context.Context, cl *client.Client) ([]string, error) {
		logins, err := cl.ListRegistryLogins(ctx, "")
		return distinctWords(logins, func(l *idlegrid.RegistryLogin) []string { return []string{l.Registry} }), err
	},
	"node_id": func(ctx context.Context, cl *client.Client) ([]string, error) {
		nodes, err := cl.ListNodes(ctx, idlegrid.NodeFilter{Limit: serverCompletions})
		return distinctWords(nodes, func(n *idlegrid.Node) []string { return []string{n.ID} }), err
	},
	"gpu_model": func(ctx context.Context, cl *client.Client) ([]string, error) {
		stats, err := cl.Market(ctx)
		return distinctWords(stats, func(m wire.MarketStat) []string { return []string{m.GPUModel} }), err
	},
	"region": func(ctx context.Context, cl *client.Client) ([]string, error) {
		stats, err := cl.Market(ctx)
		return distinctWords(stats, func(m wire.MarketStat) []string { return []string{m.Region} }), err
	},
}

// liveID is id, unless it was revoked.
func liveID(id string, revokedAt *time.Time) []string {
	if revokedAt != nil {
		return nil
	}
	return []string{id}
}

// distinctWords are the words of each of list, each once, in order.
func distinctWords[T any](list []T, words func(T) []string) []string {
	var out []string
	for _, x := range list {
		for _, w := range words(x) {
			if w != "" && !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	return out
}

// idArgument is the group whose IDs the command that path names takes as
// its first argument, as its usage says ("idlegrid job logs ID …"; a
// registry's host for "idlegrid registry logout REGISTRY"), when the shell
// can be offered them; otherwise "".
func idArgument(fs *flagSet, path []string) string {
	rest, ok := strings.CutPrefix(fs.help.usage, "idlegrid "+strings.Join(path, " ")+" ")
	if !ok || serverListers[path[0]] == nil {
		return ""
	}
	switch arg, _, _ := strings.Cut(rest, " "); strings.Trim(arg, "[]") {
	case "ID", "ID|NAME", "REGISTRY":
		return path[0]
	}
	return ""
}

// positionals counts the arguments in words that are no flag nor a
// flag's value.
func positionals(fs *flagSet, words []string) int {
	n := 0
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "--" {
			return n + len(words) - i - 1
		}
		if !strings.HasPrefix(w, "-") || w == "-" {
			n++
			continue
		}
		if f := fs.Lookup(strings.TrimLeft(w, "-")); f != nil && !isBoolFlag(f) && !strings.Contains(w, "=") {
			i++ // its value
		}
	}
	return n
}

// serverWords asks the server, as the caller (the --addr and --key among
// words, else the environment's), for what it may name of kind; nothing
// when it has no key or the server does not answer in time.
func (e *env) serverWords(ctx context.Context, kind string, words []string) []string {
	r := &remote{e: e}
	for i, w := range words {
		name, value, hasValue, ok := addrOrKey(w)
		if !ok {
			continue
		}
		if !hasValue && i+1 < len(words) {
			value = words[i+1]
		}
		if name == "addr" {
			r.addr = value
		} else {
			r.key = value
		}
	}
	cl, err := r.client()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, serverCompletionWait)
	defer cancel()
	ids, _ := serverListers[kind](ctx, cl)
	return ids
}
