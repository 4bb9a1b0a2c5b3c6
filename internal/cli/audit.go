package cli

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/atomicfile"
	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/server"
)

// auditCommand is "idlegrid audit".
type auditCommand struct{ env *env }

func (c *auditCommand) Run(ctx context.Context, args []string) error {
	return c.env.runGroup("audit", `The audit log is an append-only Merkle tree of every ledger posting, receipt
and lease transition, whose heads the server signs (docs/trust.md). Check
it here, without trusting the server.`, []subcommand{
		{"verify", "check that the log only grew and that your entries are in it", func(a []string) error { return c.verify(ctx, a) }},
		{"head", "print the log's signed tree head", func(a []string) error { return c.head(ctx, a) }},
	}, args)
}

// auditKeepHeads is how many tree heads of distinct sizes the state file
// keeps, newest first. Consistency is transitive, so the newest verified
// head alone carries the proof that all before it were extended; a few
// more give each run a second look at recent history.
const auditKeepHeads = 16

// auditState is what "audit verify" keeps between runs: the log key it
// trusts and the tree heads it has seen and verified.
type auditState struct {
	Server string                 `json:"server"`
	LogKey string                 `json:"log_key"`
	Heads  []audit.SignedTreeHead `json:"heads"`
}

// auditVerdict is the --json form of "audit verify".
type auditVerdict struct {
	Server    string               `json:"server"`
	State     string               `json:"state"`
	LogKey    string               `json:"log_key"`
	KeySource string               `json:"key_source"` // flag, state, or "server, on first use"
	ServerKey string               `json:"server_key"` // the key the server says it signs with
	Head      audit.SignedTreeHead `json:"head"`
	Entries   int                  `json:"entries"`
	Report    *audit.Report        `json:"report"`
	Verified  bool                 `json:"verified"`
}

func (c *auditCommand) verify(ctx context.Context, args []string) error {
	fs := c.env.flags("audit verify", help{
		usage: "idlegrid audit verify [--state FILE] [--log-key KEY] [--account ID] [--json]",
		about: `Check the audit log without trusting the server. It fetches the log's
latest signed tree head, a consistency proof from every head kept in the
state file to the next, and your own entries (ledger postings, receipts,
lease transitions) with proofs of inclusion, and checks them all here:

  - every head is signed with the log key;
  - no two heads of one size differ (the log was not rewritten);
  - each head extends the one before (the log was only ever appended to);
  - each of your entries is in the log.

The log key is the one given with --log-key (or $IDLEGRID_LOG_KEY), else
the one kept in the state file, else, on first use, the one the server
reports: compare that with the key your operator publishes. On success the
new head is kept in the state file; on any failure nothing is kept, every
problem is named, and the command exits non-zero.`,
		examples: `idlegrid audit verify
		idlegrid audit verify --log-key "$(cat log-key.pub)" --json`,
	})
	r := c.env.remoteFlags(fs)
	statePath := fs.String("state", "", "file of the heads seen so far (default: idlegrid/audit/SERVER.json under your config directory)")
	logKey := fs.String("log-key", "", "the log's public key, base64 (default $IDLEGRID_LOG_KEY, else the state file's)")
	accountID := fs.String("account", "", "check another account's entries (admins)")
	asJSON := fs.Bool("json", false, "print the verdict as JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	}
	// A key given is checked before the server is asked: a mistake in
	// the command line (exit 2), or in the environment, named as such.
	if *logKey != "" {
		if _, err := audit.ParsePublicKey(*logKey); err != nil {
			return usagef("--log-key: %q is %v; give the key your operator publishes, e.g. --log-key \"$(cat log-key.pub)\"", *logKey, err)
		}
	} else if k := c.env.getenv("IDLEGRID_LOG_KEY"); k != "" {
		if _, err := audit.ParsePublicKey(k); err != nil {
			return withHint(fmt.Errorf("IDLEGRID_LOG_KEY: %q is %v", k, err), "set IDLEGRID_LOG_KEY to the key your operator publishes, or give it with --log-key")
		}
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	server := r.address()
	if *statePath == "" {
		if *statePath, err = c.defaultStatePath(server); err != nil {
			return err
		}
	}
	state, err := loadAuditState(*statePath)
	if err != nil {
		return err
	}
	v, ev, err := c.gather(ctx, cl, state, server, firstNonEmpty(*logKey, c.env.getenv("IDLEGRID_LOG_KEY")), *accountID)
	if err != nil {
		return err
	}
	v.State = *statePath
	pub, err := audit.ParsePublicKey(v.LogKey)
	if err != nil {
		return withHint(fmt.Errorf("log key %q: %w", v.LogKey, err), "give the key your operator publishes with --log-key")
	}
	v.Report = audit.Check(pub, ev)
	if v.ServerKey != v.LogKey {
		v.Report.Problems = append(v.Report.Problems, audit.Problem{Kind: audit.ProblemSignature,
			Message: fmt.Sprintf("the server says it signs with log key %s, not the key checked with (%s)", v.ServerKey, v.LogKey)})
	}
	if v.Report.OK() && v.Report.HeadsVerified == 0 {
		v.Report.Problems = append(v.Report.Problems, audit.Problem{Kind: audit.ProblemNoHead, Message: "no tree head to check"})
	}
	v.Verified = v.Report.OK()
	if v.Verified {
		if err := saveAuditState(*statePath, keptState(server, v.LogKey, ev.Heads)); err != nil {
			return err
		}
	}
	if *asJSON {
		err = printJSON(c.env.Out, v)
	} else {
		printAuditVerdict(c.env, v)
	}
	if err != nil || v.Verified {
		return err
	}
	return auditFailure(v.Report)
}

// gather fetches what the check needs, and names the key it will use.
func (c *auditCommand) gather(ctx context.Context, cl *client.Client, state *auditState, server, flagKey, accountID string) (*auditVerdict, *audit.Evidence, error) {
	latest, err := cl.AuditHead(ctx)
	if err != nil {
		return nil, nil, err
	}
	v := &auditVerdict{Server: server, Head: latest.Head, ServerKey: latest.LogKey}
	switch {
	case flagKey != "":
		v.LogKey, v.KeySource = flagKey, "flag"
	case state.LogKey != "":
		v.LogKey, v.KeySource = state.LogKey, "state"
	default:
		v.LogKey, v.KeySource = latest.LogKey, "server, on first use"
	}
	heads, entries, err := cl.AllAuditEntries(ctx, accountID, latest.Head.Size)
	if err != nil {
		return nil, nil, err
	}
	v.Entries = len(entries)
	ev := &audit.Evidence{Heads: slices.Concat(state.Heads, []audit.SignedTreeHead{latest.Head}, heads), Entries: entries}
	for _, need := range audit.ConsistencyNeeded(ev.Heads) {
		p, err := cl.AuditConsistency(ctx, need.From, need.To)
		if err != nil {
			// The server cannot prove it: Check reports the proof missing.
			fmt.Fprintf(c.env.Err, "idlegrid: no consistency proof from %d to %d: %v\n", need.From, need.To, errorText(err))
			continue
		}
		ev.Consistency = append(ev.Consistency, *p)
	}
	return v, ev, nil
}

func printAuditVerdict(e *env, v *auditVerdict) {
	verdict := "VERIFIED"
	if !v.Verified {
		verdict = "FAILED"
	}
	fmt.Fprintf(e.Out, "Audit log of %s: %s\n\n", v.Server, verdict)
	t := newTable(e.Out, "Log key", v.LogKey+" (from "+v.KeySource+")")
	t.row("Latest head", fmt.Sprintf("size %d, root %s, signed %s", v.Head.Size, v.Head.RootHash, v.Head.Timestamp.UTC().Format(time.RFC3339)))
	t.row("Heads", fmt.Sprintf("%d signed head(s) of %d size(s) checked; %d extension(s) proven", v.Report.HeadsVerified, len(v.Report.Sizes), v.Report.ExtensionsShown))
	t.row("Your entries", fmt.Sprintf("%d of %d proven included", v.Report.EntriesIncluded, v.Entries))
	t.row("State", v.State)
	_ = t.flush()
	if v.KeySource == "server, on first use" && v.Verified {
		fmt.Fprintln(e.Out, "\nThe log key came from the server on first use and is now kept in the state file:\ncompare it with the key your operator publishes.")
	}
	if len(v.Report.Problems) > 0 {
		fmt.Fprintln(e.Out, "\nProblems:")
		printProblems(e.Out, v.Report.Problems)
	}
}

// shownPerKind is how many problems of one kind the report prints; the
// rest are counted (--json lists them all). A wrong log key makes every
// head's signature fail and every entry's proof lack a head: the first
// few say it, and the cause comes first.
const shownPerKind = 5

// printProblems prints problems, at most shownPerKind of each kind, and
// how many more of that kind there are.
func printProblems(w io.Writer, problems []audit.Problem) {
	shown, more := map[audit.ProblemKind]int{}, map[audit.ProblemKind]int{}
	var kinds []audit.ProblemKind
	for _, p := range problems {
		if shown[p.Kind] == 0 && more[p.Kind] == 0 {
			kinds = append(kinds, p.Kind)
		}
		if shown[p.Kind] == shownPerKind {
			more[p.Kind]++
			continue
		}
		shown[p.Kind]++
		fmt.Fprintf(w, "  %s: %s\n", p.Kind, p.Message)
	}
	for _, k := range kinds {
		if n := more[k]; n > 0 {
			fmt.Fprintf(w, "  … and %d more %s (all of them: --json)\n", n, k)
		}
	}
}

// auditFailure is the command's error for a report with problems.
func auditFailure(r *audit.Report) error {
	var kinds []string
	for _, p := range r.Problems {
		if !slices.Contains(kinds, string(p.Kind)) {
			kinds = append(kinds, string(p.Kind))
		}
	}
	return withHint(fmt.Errorf("the audit log failed verification: %d problem(s): %s", len(r.Problems), strings.Join(kinds, ", ")),
		"keep the state file and this output as evidence, and report them to the operator; nothing was kept from this run")
}

// keptState is the state to keep after a successful check: the newest
// auditKeepHeads heads of distinct sizes.
func keptState(server, logKey string, heads []audit.SignedTreeHead) *auditState {
	bySize := map[uint64]audit.SignedTreeHead{}
	for _, h := range heads {
		if old, ok := bySize[h.Size]; !ok || h.Timestamp.After(old.Timestamp) {
			bySize[h.Size] = h
		}
	}
	out := &auditState{Server: server, LogKey: logKey}
	for _, h := range bySize {
		out.Heads = append(out.Heads, h)
	}
	slices.SortFunc(out.Heads, func(a, b audit.SignedTreeHead) int { return cmp.Compare(a.Size, b.Size) })
	if len(out.Heads) > auditKeepHeads {
		out.Heads = out.Heads[len(out.Heads)-auditKeepHeads:]
	}
	return out
}

func loadAuditState(path string) (*auditState, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &auditState{}, nil
	} else if err != nil {
		return nil, err
	}
	var s auditState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, withHint(fmt.Errorf("audit state %s is corrupt: %w", path, err),
			"restore it from a backup, or move it away to start over (the heads it kept are then forgotten)")
	}
	return &s, nil
}

// saveAuditState writes s to path atomically and durably (atomicfile),
// mode 0600.
func saveAuditState(path string, s *auditState) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(data, '\n')); err != nil {
		return fmt.Errorf("audit state: %w", err)
	}
	return nil
}

// defaultStatePath is the state file for server under the user's config
// directory ($XDG_CONFIG_HOME, or ~/.config).
func (c *auditCommand) defaultStatePath(server string) (string, error) {
	dir := c.env.getenv("XDG_CONFIG_HOME")
	if dir == "" {
		if home := c.env.getenv("HOME"); home != "" {
			dir = filepath.Join(home, ".config")
		} else if d, err := os.UserConfigDir(); err == nil {
			dir = d
		} else {
			return "", withHint(errors.New("no config directory for the audit state"), "give one with --state FILE")
		}
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, strings.TrimRight(strings.TrimPrefix(strings.TrimPrefix(server, "http://"), "https://"), "/"))
	return filepath.Join(dir, "idlegrid", "audit", name+".json"), nil
}

// defaultAuditKeyFile is where "idlegrid server" keeps the log's key
// without --audit-key: next to a SQLite database, or in the working
// directory for PostgreSQL (coordinators sharing one database must share
// the key too).
func defaultAuditKeyFile(dsn string) string { return besideDatabase(dsn, "audit.key") }

// besideDatabase is where the server keeps a file of its own by default:
// next to a SQLite --db, else in the working directory.
func besideDatabase(dsn, name string) string {
	if storeKind(dsn) == "postgres" {
		return name
	}
	path, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if path == ":memory:" {
		return name
	}
	return filepath.Join(filepath.Dir(path), name)
}

// loadAuditKey reads the log's signing key, creating it on first start.
// Without a file the server signs with a throwaway key. A missing file is
// not created when the database's log already has a signer: the server
// was started from elsewhere, or the file is lost, and a new key would
// orphan every head users hold (server.ErrAuditKeyReplaced).
func loadAuditKey(ctx context.Context, cfg serveConfig, store idlegrid.AuditStore) (ed25519.PrivateKey, error) {
	if cfg.auditKeyFile == "" {
		return nil, nil
	}
	if _, err := os.Stat(cfg.auditKeyFile); errors.Is(err, os.ErrNotExist) {
		signer, err := store.AuditSigner(ctx)
		if err != nil {
			return nil, err
		}
		if !signer.IsZero() {
			return nil, withHint(fmt.Errorf("no audit log key at %s, but this database's log has been signed with %s since %s",
				cfg.auditKeyFile, signer.PublicKey, signer.Since.Format(time.RFC3339)),
				"point --audit-key at the file that holds that key (the server creates audit.key beside a SQLite --db, else in the directory it was started from); a new key would break every user's 'idlegrid audit verify'")
		}
	}
	key, err := audit.LoadOrCreateKey(cfg.auditKeyFile)
	if err != nil {
		return nil, withHint(err, "check --audit-key: the log's key file, readable and writable by the server")
	}
	return key, nil
}

// logAuditKey logs the public half of the log's key for the operator to
// publish.
func logAuditKey(cfg serveConfig, srv *server.Server) {
	cfg.logger.Info("audit log key: publish it for 'idlegrid audit verify --log-key'", "file", cfg.auditKeyFile,
		"public_key", audit.PublicKeyString(srv.AuditKey()))
}

func (c *auditCommand) head(ctx context.Context, args []string) error {
	fs := c.env.flags("audit head", help{
		usage: "idlegrid audit head [--json]",
		about: `Print the audit log's signed tree head now: its size, root hash, time and
signature, and the key the server says it signs with. The signature is
checked here with that key; only 'idlegrid audit verify' checks it against
the key you trust.`,
		examples: "idlegrid audit head\n idlegrid audit head --json",
	})
	r := c.env.remoteFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	h, err := cl.AuditHead(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, h)
	}
	signed := "valid with the log key"
	if err := verifyWith(h.LogKey, &h.Head); err != nil {
		signed = "INVALID: " + err.Error()
	}
	t := newTable(c.env.Out, "Size", fmt.Sprint(h.Head.Size))
	t.row("Root", h.Head.RootHash)
	t.row("Signed", h.Head.Timestamp.UTC().Format(time.RFC3339Nano))
	t.row("Signature", base64.StdEncoding.EncodeToString(h.Head.Signature)+" ("+signed+")")
	t.row("Log key", h.LogKey)
	return t.flush()
}

func verifyWith(key string, h *audit.SignedTreeHead) error {
	pub, err := audit.ParsePublicKey(key)
	if err != nil {
		return err
	} else if len(pub) != ed25519.PublicKeySize {
		return errors.New("not an ed25519 key")
	}
	return h.Verify(pub)
}
