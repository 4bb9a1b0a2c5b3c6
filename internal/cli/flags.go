package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid/client"
)

// defaultAddr is where the CLI looks for a server when neither --addr nor
// IDLEGRID_ADDR says otherwise.
const defaultAddr = "http://127.0.0.1:7070"

// help is the text of a subcommand's --help, around its flags.
type help struct {
	usage    string // e.g. "idlegrid job ls [flags]"
	about    string // what it does, in a few sentences
	examples string // one example per line
}

// flagSet is a flag.FlagSet that prints its help to stdout on --help and
// turns parse errors into usage errors, and that accepts flags after
// positional arguments ("job get ID --json").
type flagSet struct {
	*flag.FlagSet
	e    *env
	help help
	// subwords are the words that make another command of this one
	// ("agent init"), offered when an argument it takes none of is near one.
	subwords []string
	// choices are the words its first argument may be, which the shell
	// completes ("completion bash").
	choices []string
}

func (e *env) flags(name string, h help) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, e: e, help: h}
}

// parse parses args, interleaving flags and positional arguments; everything
// after "--" is positional. On --help it prints the help and returns
// flag.ErrHelp.
func (fs *flagSet) parse(args []string) ([]string, error) {
	fs.e.ran = fs
	positional, err := fs.parseAll(args)
	fs.e.args = positional
	return positional, err
}

func (fs *flagSet) parseAll(args []string) ([]string, error) {
	var positional []string
	for {
		err := fs.Parse(args)
		if n := fs.negativeNumber(err, args); n != "" { // an argument such as an amount, -5, is no flag
			positional, args = append(positional, n), fs.Args()
			continue
		}
		if errors.Is(err, flag.ErrHelp) {
			fs.printHelp(fs.e.Out)
			return nil, err
		} else if err != nil {
			return nil, usagef("%s\n  run '%s --help' for the flags", fs.parseError(err), fs.commandPath())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// badValueRE is how flag.Parse refuses a value its own flags cannot
// parse (a duration, a number): "parse error", which says not what to
// write instead.
var badValueRE = regexp.MustCompile(`^invalid value (".*") for flag -(\S+): parse error$`)

// badBoolRE is how flag.Parse refuses a boolean flag's value ("--json=3").
var badBoolRE = regexp.MustCompile(`^invalid boolean value (".*") for -(\S+): parse error$`)

// parseError is the text of Parse's err, saying what a value of the
// flag looks like where Parse says only "parse error".
func (fs *flagSet) parseError(err error) string {
	return flagDashRE.ReplaceAllStringFunc(fs.parseErrorText(err), func(m string) string {
		sub := flagDashRE.FindStringSubmatch(m)
		return sub[1] + flagText(sub[2])
	})
}

// flagDashRE is a flag named in Parse's errors, which write every flag
// with one dash ("for flag -max-price"), where help and the other errors
// write --max-price, as the caller typed it.
var flagDashRE = regexp.MustCompile(`(for flag |for |argument: )-([A-Za-z0-9][-A-Za-z0-9_.]*)`)

func (fs *flagSet) parseErrorText(err error) string {
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		return fmt.Sprintf("unknown flag %s for %s%s", flagText(name), fs.commandPath(), didYouMean(name, names, flagText))
	}
	if m := badBoolRE.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Sprintf("invalid value %s for flag -%s: must be true or false (or the flag alone for true), got %s", m[1], m[2], m[1])
	}
	m := badValueRE.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	f := fs.Lookup(m[2])
	if f == nil {
		return err.Error()
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err.Error()
	}
	v, _ := strconv.Unquote(m[1])
	var want string
	switch g.Get().(type) {
	case time.Duration:
		want = "a duration such as 30m, 24h or 1h30m"
		if _, err := strconv.ParseFloat(v, 64); err == nil {
			want += " (a number needs its unit: s, m or h)"
		}
	case int, int64, uint, uint64:
		want = "a whole number"
	case float64:
		want = "a number such as 0.5"
	default:
		return err.Error()
	}
	return fmt.Sprintf("invalid value %s for flag -%s: must be %s, got %s", m[1], m[2], want, m[1])
}

// flagText is the flag name as help and errors write it: --name, or -f
// for a one-letter flag.
func flagText(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// negativeNumber is the argument that Parse of args refused with err as
// an unknown flag when it is a number below zero, "-5" or "-12.50": an
// argument, not a flag. Otherwise "". Parse has consumed it: the rest of
// args is fs.Args().
func (fs *flagSet) negativeNumber(err error, args []string) string {
	i := len(args) - len(fs.Args()) - 1
	if err == nil || i < 0 || err.Error() != "flag provided but not defined: "+args[i] {
		return ""
	}
	if _, perr := strconv.ParseFloat(args[i], 64); perr != nil || !strings.HasPrefix(args[i], "-") || strings.HasPrefix(args[i], "--") {
		return ""
	}
	return args[i]
}

func (fs *flagSet) commandPath() string {
	return "idlegrid " + fs.Name()
}

func (fs *flagSet) printHelp(w io.Writer) {
	fmt.Fprintf(w, "Usage:\n\n\t%s\n\n", fs.help.usage)
	if fs.help.about != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(fs.help.about))
	}
	if fs.help.examples != "" {
		fmt.Fprint(w, "Examples:\n\n")
		for _, line := range strings.Split(strings.TrimSpace(fs.help.examples), "\n") {
			fmt.Fprintf(w, "\t%s\n", strings.TrimSpace(line))
		}
		fmt.Fprintln(w)
	}
	hasFlags := false
	fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprint(w, "Flags:\n\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// wantsHelp reports whether args, before any "--", ask for help, for the
// commands that parse no flags ("dev workload", "agent gpu-probe").
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// helpOnly prints the help, for a command that parses no flags, and
// returns flag.ErrHelp as parse does.
func (fs *flagSet) helpOnly() error {
	fs.e.ran = fs
	fs.printHelp(fs.e.Out)
	return flag.ErrHelp
}

// parseArgs is parse followed by wantArgs: the positional arguments, when
// there are between min and max of them (max < 0: no limit).
func (fs *flagSet) parseArgs(args []string, min, max int, names string) ([]string, error) {
	args, err := fs.parse(args)
	if err != nil {
		return nil, err
	}
	return args, fs.wantArgs(args, min, max, names)
}

// parseStates reads a comma-separated --state flag into states of what
// (a lease, a payout), each checked by valid; hint lists the states a user
// may give.
func parseStates[S ~string](list string, valid func(S) bool, what, hint string) ([]S, error) {
	var out []S
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !valid(S(s)) {
			return nil, usagef("--state: unknown %s state %q; use %s", what, s, hint)
		}
		out = append(out, S(s))
	}
	return out, nil
}

// wantArgs checks the number of positional arguments.
func (fs *flagSet) wantArgs(args []string, min, max int, names string) error {
	if len(args) < min || (max >= 0 && len(args) > max) {
		if len(args) > max && max >= 0 && len(fs.subwords) > 0 {
			if s := suggest(args[max], fs.subwords); s != "" {
				return usagef("%s takes %s, got %d argument(s); did you mean '%s %s'?\n  run '%s --help' for examples", fs.commandPath(), names, len(args), fs.commandPath(), s, fs.commandPath())
			}
		}
		return usagef("%s takes %s, got %d argument(s)\n  run '%s --help' for examples", fs.commandPath(), names, len(args), fs.commandPath())
	}
	return nil
}

// remote holds the flags of a command that talks to a server.
type remote struct {
	e    *env
	addr string
	key  string
}

func (e *env) remoteFlags(fs *flagSet) *remote {
	r := &remote{e: e}
	fs.StringVar(&r.addr, "addr", "", "server address (default $IDLEGRID_ADDR or "+defaultAddr+")")
	fs.StringVar(&r.key, "key", "", "API key (default $IDLEGRID_KEY)")
	return r
}

// address is the server the remote flags name, from the flags or the
// environment. The API's paths begin with /v1, so an address written with
// it, as the API's URLs are ("http://127.0.0.1:7070/v1"), is the server's
// without it: kept, the client would ask for /v1/v1/jobs.
func (r *remote) address() string {
	return serverAddr(firstNonEmpty(r.addr, r.e.addr, r.e.getenv("IDLEGRID_ADDR"), defaultAddr))
}

// serverAddr is addr without a trailing /v1 (or /v1/).
func serverAddr(addr string) string {
	trimmed := strings.TrimRight(strings.TrimSpace(addr), "/")
	if base, ok := strings.CutSuffix(trimmed, "/v1"); ok && base != "" && !strings.HasSuffix(base, "/") && !strings.HasSuffix(base, ":") {
		return base
	}
	return addr
}

// client returns a client for the server, from the flags or the environment.
func (r *remote) client() (*client.Client, error) {
	addr := r.address()
	from := "--key"
	if r.key == "" && r.e.key == "" {
		from = "IDLEGRID_KEY"
	}
	// A key read from a file may end with a line break (a CRLF file's
	// "\r" survives $(cat FILE)): it is no part of the key, and left in,
	// the request could not be sent, said as a server not reached.
	key := strings.TrimSpace(firstNonEmpty(r.key, r.e.key, r.e.getenv("IDLEGRID_KEY")))
	if key == "" {
		return nil, withHint(errors.New("no API key"),
			"set --key or IDLEGRID_KEY; with 'idlegrid dev' running: export IDLEGRID_KEY=$(cat DATA_DIR/admin.key)")
	}
	if strings.ContainsFunc(key, func(c rune) bool { return c < 0x21 || c == 0x7f }) {
		return nil, withHint(fmt.Errorf("%s: the API key holds a space or a control character, which no key has", from),
			"set "+from+" to the key alone, as 'idlegrid key create' or 'idlegrid account create' printed it")
	}
	return client.New(addr, key), nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// subcommands runs one of a group's subcommands ("job ls", "job get").
type subcommand struct {
	name    string
	summary string
	run     func(args []string) error
}

func (e *env) runGroup(group, about string, subs []subcommand, args []string) error {
	if e.probing != nil {
		e.probing.subs = nil
		for _, s := range subs {
			e.probing.subs = append(e.probing.subs, s.name)
		}
	}
	if len(args) > 1 && args[0] == "help" { // "job help submit" is "job submit --help"
		args = append(slices.Clone(args[1:]), "--help")
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" || args[0] == "-help" {
		w := e.Out
		if len(args) == 0 {
			w = e.Err
		}
		fmt.Fprintf(w, "Usage:\n\n\tidlegrid %s <command> [arguments]\n\n%s\n\nCommands:\n\n", group, about)
		width := 0
		for _, s := range subs {
			width = max(width, len(s.name))
		}
		for _, s := range subs {
			fmt.Fprintf(w, "\t%-*s   %s\n", width, s.name, s.summary)
		}
		fmt.Fprintf(w, "\nRun 'idlegrid %s <command> --help' for a command's flags.\n", group)
		if len(args) == 0 {
			return usagef("idlegrid %s needs a command", group)
		}
		return nil
	}
	var names []string
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(args[1:])
		}
		names = append(names, s.name)
	}
	msg := fmt.Sprintf("unknown command %q for 'idlegrid %s'", args[0], group) +
		didYouMean(args[0], names, func(s string) string { return "'idlegrid " + group + " " + s + "'" })
	if isID(args[0]) && !strings.HasSuffix(msg, "?") { // "job job_x": the command that shows one
		for _, show := range []string{"get", "show"} {
			if slices.Contains(names, show) {
				msg += fmt.Sprintf("; did you mean 'idlegrid %s %s %s'?", group, show, strings.Join(args, " "))
				break
			}
		}
	}
	return usagef("%s%srun 'idlegrid %s --help'", msg, thenSep(msg), group)
}
