package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/server"
)

// auditMarket is a real server on a SQLite file and a key file that
// survive a restart, and a renter with money.
type auditMarket struct {
	dir, dsn, keyFile, state string
	rs                       *runningServer
	admin                    *client.Client
	renterID, renterKey      string
	topUps                   int
}

func mustAuditMarket(t *testing.T, topUps int) *auditMarket {
	t.Helper()
	dir := t.TempDir()
	m := &auditMarket{dir: dir, dsn: filepath.Join(dir, "idlegrid.db"), keyFile: filepath.Join(dir, "audit.key"),
		state: filepath.Join(dir, "state", "audit.json")}
	m.start(t)
	adminKey, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	mustOK(t, err)
	m.admin = client.New(m.rs.url, strings.TrimSpace(string(adminKey)))
	renter, _, key, err := m.admin.CreateAccount(context.Background(), "ren", idlegrid.RoleRenter)
	mustOK(t, err)
	m.renterID, m.renterKey = renter.ID, key
	for range topUps {
		m.topUp(t)
	}
	return m
}

// start starts (or restarts) the server on the market's files.
func (m *auditMarket) start(t *testing.T) {
	t.Helper()
	rs, err := startServer(context.Background(), serveConfig{
		listen: "127.0.0.1:0", dsn: m.dsn, adminKeyFile: filepath.Join(m.dir, "admin.key"),
		auditKeyFile: m.keyFile, logger: slog.New(slog.DiscardHandler),
	})
	mustOK(t, err)
	m.rs = rs
	t.Cleanup(func() {
		if m.rs == rs { // tamper stopped the ones before
			rs.stop()
		}
	})
	if m.admin != nil {
		m.admin = client.New(rs.url, m.adminKeyString(t))
	}
}

func (m *auditMarket) adminKeyString(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(m.dir, "admin.key"))
	mustOK(t, err)
	return strings.TrimSpace(string(b))
}

func (m *auditMarket) topUp(t *testing.T) {
	t.Helper()
	m.topUps++
	_, err := m.admin.TopUp(context.Background(), m.renterID, idlegrid.MicrosPerUnit, fmt.Sprintf("top-up %d", m.topUps))
	mustOK(t, err)
}

// tamper stops the server, runs stmt on its database and starts it again.
func (m *auditMarket) tamper(t *testing.T, stmt string, args ...any) {
	t.Helper()
	mustOK(t, m.rs.stop())
	db, err := sql.Open("sqlite", m.dsn+"?_pragma=busy_timeout(10000)") // as the store waits for the file's lock
	mustOK(t, err)
	res, err := db.Exec(stmt, args...)
	mustOK(t, err)
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s changed %d rows, want 1", stmt, n)
	}
	mustOK(t, db.Close())
	m.start(t)
}

func (m *auditMarket) verify(t *testing.T, extra ...string) result {
	t.Helper()
	vars := map[string]string{"IDLEGRID_ADDR": m.rs.url, "IDLEGRID_KEY": m.renterKey}
	return run(t, vars, append([]string{"audit", "verify", "--state", m.state}, extra...)...)
}

func (m *auditMarket) logKey(t *testing.T) string {
	key, err := audit.LoadOrCreateKey(m.keyFile)
	mustOK(t, err)
	return audit.PublicKeyString(key.Public().(ed25519.PublicKey))
}

func mustVerdict(t *testing.T, r result) auditVerdict {
	t.Helper()
	var v auditVerdict
	if err := json.Unmarshal([]byte(r.out), &v); err != nil {
		t.Fatalf("--json output: %v\n%s", err, r)
	}
	return v
}

func mustAuditState(t *testing.T, path string) auditState {
	t.Helper()
	b, err := os.ReadFile(path)
	mustOK(t, err)
	var s auditState
	mustOK(t, json.Unmarshal(b, &s))
	return s
}

func TestAudit_Verify(t *testing.T) {
	m := mustAuditMarket(t, 20) // more than 16 entries: the tree keeps subtree roots

	t.Run("FirstUse", func(t *testing.T) {
		r := m.verify(t)
		if r.code != 0 {
			t.Fatalf("got %s, want exit 0", r)
		}
		for _, want := range []string{"VERIFIED", "20 of 20 proven included", "from server, on first use", "compare it with the key your operator publishes"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("output lacks %q:\n%s", want, r.out)
			}
		}
		s := mustAuditState(t, m.state)
		if s.LogKey != m.logKey(t) || len(s.Heads) != 1 || s.Heads[0].Size < 20 {
			t.Errorf("state = key %s, %d heads, want key %s and one head of 20 or more", s.LogKey, len(s.Heads), m.logKey(t))
		}
	})
	t.Run("Grown", func(t *testing.T) {
		m.topUp(t)
		r := m.verify(t, "--json")
		if r.code != 0 {
			t.Fatalf("got %s, want exit 0", r)
		}
		v := mustVerdict(t, r)
		if !v.Verified || v.KeySource != "state" || v.Entries != 21 || v.Report.EntriesIncluded != 21 || v.Report.ExtensionsShown != 1 {
			t.Errorf("verdict = %+v, report %+v; want 21 entries included and one extension proven with the kept key", v, v.Report)
		}
		if s := mustAuditState(t, m.state); len(s.Heads) != 2 {
			t.Errorf("state keeps %d heads, want 2", len(s.Heads))
		}
	})
	t.Run("WrongKey", func(t *testing.T) {
		pub, _, err := ed25519.GenerateKey(nil)
		mustOK(t, err)
		before, err := os.ReadFile(m.state)
		mustOK(t, err)
		r := m.verify(t, "--log-key", audit.PublicKeyString(pub))
		if r.code != 1 || !strings.Contains(r.out, "bad_signature") || !strings.Contains(r.err, "failed verification") {
			t.Errorf("got %s, want exit 1 naming bad signatures", r)
		}
		if after, _ := os.ReadFile(m.state); string(after) != string(before) {
			t.Error("a failed run changed the state file")
		}
	})
	t.Run("Head", func(t *testing.T) {
		vars := map[string]string{"IDLEGRID_ADDR": m.rs.url, "IDLEGRID_KEY": m.renterKey}
		r := run(t, vars, "audit", "head")
		if r.code != 0 || !strings.Contains(r.out, "valid with the log key") || !strings.Contains(r.out, m.logKey(t)) {
			t.Errorf("got %s, want the head, its signature valid, and the log key", r)
		}
	})
}

// TestAudit_Verify_rewrittenHistory changes the stored log between two
// runs of "audit verify", as an operator rewriting history would, and
// expects the second run to fail and to say how.
func TestAudit_Verify_rewrittenHistory(t *testing.T) {
	for _, tt := range []struct {
		name   string
		stmt   string
		args   []any
		grow   bool   // append an entry after the change
		want   string // the problem kind
		entryX string // an entry index whose proof must fail, or ""
	}{
		{"LeafSameSize", `UPDATE audit_entries SET leaf_hash = $1 WHERE idx = 3`, []any{strings.Repeat("ab", 32)}, false, "fork", ""},
		{"LeafGrown", `UPDATE audit_entries SET leaf_hash = $1 WHERE idx = 3`, []any{strings.Repeat("ab", 32)}, true, "inconsistent", ""},
		{"EntryRewritten", `UPDATE audit_entries SET entry = REPLACE(entry, '1000000', '9000000') WHERE idx = 5`, nil, false, "not_included", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := mustAuditMarket(t, 20)
			if r := m.verify(t); r.code != 0 {
				t.Fatalf("first run: got %s, want exit 0", r)
			}
			m.tamper(t, tt.stmt, tt.args...)
			if tt.grow {
				m.topUp(t)
			}
			r := m.verify(t, "--json")
			if r.code != 1 {
				t.Fatalf("after the change: got %s, want exit 1", r)
			}
			v := mustVerdict(t, r)
			if v.Verified || len(v.Report.Problems) == 0 || v.Report.Problems[0].Kind != audit.ProblemKind(tt.want) {
				t.Errorf("report = %+v, want a %s problem first", v.Report, tt.want)
			}
			if !strings.Contains(r.err, "failed verification") || !strings.Contains(r.err, tt.want) {
				t.Errorf("stderr = %q, want it to name %s", r.err, tt.want)
			}
		})
	}
}

func TestKeptState(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var heads []audit.SignedTreeHead
	for size := range uint64(20) {
		heads = append(heads, audit.SignedTreeHead{TreeHead: audit.TreeHead{Size: size, Timestamp: t0}})
	}
	newer := audit.SignedTreeHead{TreeHead: audit.TreeHead{Size: 19, Timestamp: t0.Add(time.Minute)}}
	heads = append([]audit.SignedTreeHead{newer}, heads...) // a later head of a size seen before
	s := keptState("http://x", "key", heads)
	if len(s.Heads) != auditKeepHeads {
		t.Fatalf("kept %d heads, want %d", len(s.Heads), auditKeepHeads)
	}
	for i, h := range s.Heads {
		if want := uint64(20 - auditKeepHeads + i); h.Size != want {
			t.Errorf("head %d has size %d, want %d", i, h.Size, want)
		}
	}
	if last := s.Heads[len(s.Heads)-1]; !last.Timestamp.Equal(newer.Timestamp) {
		t.Errorf("kept the head of size 19 signed %s, want the newer, %s", last.Timestamp, newer.Timestamp)
	}
}

func TestDefaultAuditPaths(t *testing.T) {
	for dsn, want := range map[string]string{
		"/var/lib/idlegrid/idlegrid.db":                 "/var/lib/idlegrid/audit.key",
		"idlegrid.db":                                   "audit.key",
		"file:/data/x.db?_pragma=synchronous(FULL)":     "/data/audit.key",
		"postgres://u@db:5432/idlegrid?sslmode=require": "audit.key",
	} {
		if got := defaultAuditKeyFile(dsn); got != want {
			t.Errorf("defaultAuditKeyFile(%q) = %q, want %q", dsn, got, want)
		}
		if got, want := besideDatabase(dsn, "meter-journal"), strings.TrimSuffix(want, "audit.key")+"meter-journal"; got != want {
			t.Errorf("besideDatabase(%q, meter-journal) = %q, want %q", dsn, got, want)
		}
	}
	c := &auditCommand{env: &env{getenv: func(k string) string { return map[string]string{"HOME": "/home/ada"}[k] }}}
	got, err := c.defaultStatePath("https://market.example:7070/")
	mustOK(t, err)
	if want := "/home/ada/.config/idlegrid/audit/market.example_7070.json"; got != want {
		t.Errorf("defaultStatePath = %q, want %q", got, want)
	}
}

// TestServer_auditKeyLost: a server whose log key file is missing (started
// from another directory, or the file lost) or holds another key refuses
// to start, and creates no new key; with the key back it starts.
func TestServer_auditKeyLost(t *testing.T) {
	m := mustAuditMarket(t, 1)
	mustOK(t, m.rs.stop())
	original, err := os.ReadFile(m.keyFile)
	mustOK(t, err)
	startWith := func() error {
		rs, err := startServer(context.Background(), serveConfig{
			listen: "127.0.0.1:0", dsn: m.dsn, adminKeyFile: filepath.Join(m.dir, "admin.key"),
			auditKeyFile: m.keyFile, logger: slog.New(slog.DiscardHandler),
		})
		if err == nil {
			mustOK(t, rs.stop())
		}
		return err
	}

	mustOK(t, os.Remove(m.keyFile))
	err = startWith()
	if err == nil || !strings.Contains(err.Error(), "no audit log key at "+m.keyFile) || !strings.Contains(hintOf(err), "--audit-key") {
		t.Fatalf("start without the key file: %v (hint %q), want a refusal naming the file and --audit-key", err, hintOf(err))
	}
	if _, err := os.Stat(m.keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused start left a key file behind: %v", err)
	}

	_, other, err := ed25519.GenerateKey(nil)
	mustOK(t, err)
	mustOK(t, os.WriteFile(m.keyFile, []byte(base64.StdEncoding.EncodeToString(other.Seed())+"\n"), 0o600))
	if err := startWith(); !errors.Is(err, server.ErrAuditKeyReplaced) || !strings.Contains(hintOf(err), "--audit-key") {
		t.Fatalf("start with another key: %v (hint %q), want ErrAuditKeyReplaced and a hint", err, hintOf(err))
	}

	mustOK(t, os.WriteFile(m.keyFile, original, 0o600))
	mustOK(t, startWith())
}

// hintOf is the hint err carries for the user, if any.
func hintOf(err error) string {
	var h *hintError
	if errors.As(err, &h) {
		return h.hint
	}
	return ""
}

// TestPrintProblems: a report prints a few problems of each kind and
// counts the rest, so that a wrong log key's hundreds of entries without
// a head do not bury the cause.
func TestPrintProblems(t *testing.T) {
	ps := []audit.Problem{{Kind: audit.ProblemSignature, Message: "head 1 not signed by the log key"}}
	for i := range 12 {
		ps = append(ps, audit.Problem{Kind: audit.ProblemNoHead, Message: fmt.Sprintf("entry %d", i)})
	}
	var out bytes.Buffer
	printProblems(&out, ps)
	got := out.String()
	if strings.Count(got, "no_head:") != shownPerKind || !strings.Contains(got, "bad_signature: head 1") ||
		!strings.Contains(got, "… and 7 more no_head (all of them: --json)") {
		t.Errorf("printed:\n%s\nwant the signature problem, %d of the no_head ones and the other 7 counted", got, shownPerKind)
	}
}
