package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// backupCommand is "idlegrid backup".
type backupCommand struct{ env *env }

func (c *backupCommand) Run(ctx context.Context, args []string) error {
	fs := c.env.flags("backup", help{
		usage: "idlegrid backup --db idlegrid.db --to FILE [--json]",
		about: `Copy a SQLite market to a new file while its server runs, and check the
copy: SQLite's integrity check, every foreign key, and a ledger whose
transfers and balances sum to zero. The copy is one moment of the market;
it appears under its name only once checked, and never replaces a file.

To restore, stop the server, put the copy in place of the database (and
remove the old database's -wal and -shm files), and start the server with
the same audit log key. The key is not in the database: keep audit.key
with the backups. For PostgreSQL use pg_dump.`,
		examples: `idlegrid backup --db idlegrid.db --to backups/idlegrid-$(date -u +%Y%m%dT%H%M%SZ).db
		idlegrid backup --db /var/lib/idlegrid/idlegrid.db --to /mnt/backup/idlegrid.db --json`,
	})
	dsn := fs.String("db", "idlegrid.db", "the server's SQLite database")
	to := fs.String("to", "", "the new file to write the copy to (required)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if _, err := fs.parseArgs(args, 0, 0, "no arguments"); err != nil {
		return err
	} else if *to == "" {
		return usagef("--to is required: the new file to copy the market to")
	} else if storeKind(*dsn) == "postgres" {
		// Refused before the "copying" line, which would print the URL,
		// a password in it too.
		return usagef("--db: idlegrid backup copies a SQLite database, not PostgreSQL: back PostgreSQL up with pg_dump " +
			"(deploy/server.md, \"PostgreSQL\"), and keep audit.key with the dumps")
	} else if err := checkBackupTo(*to); err != nil {
		return err
	}
	fmt.Fprintf(c.env.Err, "idlegrid backup: copying %s to %s and checking the copy…\n", *dsn, *to)
	r, err := sqlstore.Backup(ctx, *dsn, *to)
	switch {
	case errors.Is(err, sqlstore.ErrBackupExists):
		return withHint(err, "choose another --to; a backup never replaces a file")
	case errors.Is(err, os.ErrNotExist) && !dirExists(filepath.Dir(*to)): // gone since checkBackupTo
		return withHint(err, "check --to: its directory "+filepath.Dir(*to)+" must exist")
	case errors.Is(err, os.ErrNotExist):
		return withHint(err, "check --db: the SQLite file the server was started with")
	case err != nil:
		return err
	}
	if *asJSON {
		return printJSON(c.env.Out, r)
	}
	c.printReport(r)
	return nil
}

// checkBackupTo refuses a --to that cannot be a new backup, before any
// copying: a file that is there already (a backup never replaces one), or
// one in a directory that is not.
func checkBackupTo(to string) error {
	if _, err := os.Lstat(to); err == nil {
		return usagef("--to: %s exists already, and a backup never replaces a file; choose another --to", to)
	}
	if dir := filepath.Dir(to); !dirExists(dir) {
		return usagef("--to: the directory %s does not exist; create it first (mkdir -p %s), or choose another --to", dir, dir)
	}
	return nil
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

func (c *backupCommand) printReport(r *sqlstore.BackupReport) {
	out := c.env.Out
	fmt.Fprintf(out, "backed up to %s (%s): integrity, foreign keys and ledger checked\n", r.Path, mib(r.Bytes))
	fmt.Fprintf(out, "  schema %d; %d accounts, %d nodes, %d jobs, %d leases, %d transfers; audit log of %d entries\n",
		r.SchemaVersion, r.Accounts, r.Nodes, r.Jobs, r.Leases, r.Transfers, r.AuditEntries)
	if r.AuditSigner != "" {
		fmt.Fprintf(out, "  the audit log is signed with %s: keep its key file (audit.key) with this backup, which does not hold it\n", r.AuditSigner)
	}
}

// mib writes a size in MiB, or KiB when smaller.
func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
