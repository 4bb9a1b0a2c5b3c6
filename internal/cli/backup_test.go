package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// TestBackupCommand backs up a market while its server runs, and starts a
// server on the copy with the same audit key: the accounts are there.
func TestBackupCommand(t *testing.T) {
	dir := t.TempDir()
	db, adminKeyFile := filepath.Join(dir, "idlegrid.db"), filepath.Join(dir, "admin.key")
	srv := startMain(t, "server", "--listen", "127.0.0.1:0", "--db", db, "--bootstrap-admin-key-file", adminKeyFile)
	url := srv.waitForMatch(t, regexp.MustCompile(`(?m)^idlegrid server listening on (http://127\.0\.0\.1:\d+)$`))
	key, err := os.ReadFile(adminKeyFile)
	mustOK(t, err)
	admin := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": strings.TrimSpace(string(key))}
	must(t, admin, "account", "create", "--name", "lab", "--role", "renter")

	to := filepath.Join(dir, "backup.db")
	out := must(t, nil, "backup", "--db", db, "--to", to)
	for _, want := range []string{"backed up to " + to, "integrity, foreign keys and ledger checked", "2 accounts", "the audit log is signed with "} {
		if !strings.Contains(out, want) {
			t.Errorf("backup printed:\n%s\nwant %q", out, want)
		}
	}
	// A --to that cannot be a new backup is refused before any copying,
	// naming --to.
	if r := run(t, nil, "backup", "--db", db, "--to", to); r.code != 2 || !strings.Contains(r.err, "--to: "+to+" exists already") ||
		!strings.Contains(r.err, "choose another --to") || strings.Contains(r.err, "copying") {
		t.Errorf("a second backup onto the first: %s, want refused, naming --to, before copying", r)
	}
	noDir := filepath.Join(dir, "nonexistent", "dir")
	if r := run(t, nil, "backup", "--db", db, "--to", filepath.Join(noDir, "x.db")); r.code != 2 ||
		!strings.Contains(r.err, "--to: the directory "+noDir+" does not exist") || strings.Contains(r.err, "copying") || strings.Contains(r.err, "--db") {
		t.Errorf("a backup into a directory that is not there: %s, want refused, naming --to's directory", r)
	}
	var report sqlstore.BackupReport
	mustJSON(t, nil, &report, "backup", "--db", db, "--to", filepath.Join(dir, "backup2.db"))
	if report.Accounts != 2 || report.AuditSigner == "" {
		t.Errorf("--json report %+v, want the admin and the renter, and the log's signer", report)
	}
	if r := run(t, nil, "backup", "--db", db); r.code != 2 || !strings.Contains(r.err, "--to is required") {
		t.Errorf("backup without --to: %s, want a usage error", r)
	}

	restored := startMain(t, "server", "--listen", "127.0.0.1:0", "--db", to, "--audit-key", filepath.Join(dir, "audit.key"),
		"--meter-journal", filepath.Join(dir, "restored-journal"))
	url = restored.waitForMatch(t, regexp.MustCompile(`(?m)^idlegrid server listening on (http://127\.0\.0\.1:\d+)$`))
	admin["IDLEGRID_ADDR"] = url
	var accounts []*idlegrid.Account
	mustJSON(t, admin, &accounts, "account", "ls")
	if len(accounts) != 2 {
		b, _ := json.Marshal(accounts)
		t.Errorf("accounts on the restored copy: %s, want the admin and lab", b)
	}
}

// TestBackupCommand_postgres: backup copies SQLite only. A PostgreSQL URL
// is a mistake in --db, refused before anything is printed about copying,
// so that a password in the URL is never shown, and the refusal says what
// to do instead.
func TestBackupCommand_postgres(t *testing.T) {
	to := filepath.Join(t.TempDir(), "backup.db")
	r := run(t, nil, "backup", "--db", "postgres://idlegrid:s3cret@db.internal:5432/idlegrid?sslmode=verify-full", "--to", to)
	if r.code != 2 || !strings.Contains(r.err, "--db: ") || !strings.Contains(r.err, "pg_dump") || !strings.Contains(r.err, "audit.key") {
		t.Errorf("backup of a PostgreSQL URL: %s\nwant exit 2 naming --db, with pg_dump and audit.key", r)
	}
	if strings.Contains(r.err+r.out, "s3cret") || strings.Contains(r.err, "copying") {
		t.Errorf("backup of a PostgreSQL URL printed its password, or that it was copying:\n%s", r)
	}
	if _, err := os.Lstat(to); err == nil {
		t.Errorf("backup of a PostgreSQL URL left %s", to)
	}
}
