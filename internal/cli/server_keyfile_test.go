package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// accountsDown is a store that cannot create accounts.
type accountsDown struct{ idlegrid.Store }

func (accountsDown) CreateAccount(context.Context, *idlegrid.Account) error {
	return errors.New("database gone")
}

func (accountsDown) CreateAccountWithKey(context.Context, *idlegrid.Account, *idlegrid.APIKey) error {
	return errors.New("database gone")
}

// mustBootstrapServer opens a coordinator on a new SQLite database in dir,
// its store wrapped by wrap.
func mustBootstrapServer(t *testing.T, dir string, wrap func(idlegrid.Store) idlegrid.Store) (idlegrid.Store, *server.Server) {
	t.Helper()
	store, err := sqlstore.Open(context.Background(), filepath.Join(dir, "idlegrid.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s := wrap(store)
	srv, err := server.Open(server.Config{Store: s, PayoutHold: -1, HeartbeatInterval: time.Hour, StartTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return s, srv
}

// TestBootstrapAdmin_keyFile: the admin's key replaces what the key file
// held, mode 0600, with no temporary file left beside it; a start that
// cannot make the key leaves no key file at all, where an empty one would
// read as a key lost.
func TestBootstrapAdmin_keyFile(t *testing.T) {
	ctx := context.Background()
	t.Run("kept", func(t *testing.T) {
		dir, keys := t.TempDir(), t.TempDir()
		store, srv := mustBootstrapServer(t, dir, func(s idlegrid.Store) idlegrid.Store { return s })
		keyFile := filepath.Join(keys, "admin.key")
		if err := os.WriteFile(keyFile, []byte("a key revoked long ago, and longer than the new one's line\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		secret, err := bootstrapAdmin(ctx, store, srv, keyFile, nil, nil)
		if err != nil || secret == "" {
			t.Fatalf("bootstrapAdmin: %q, %v", secret, err)
		}
		got, err := os.ReadFile(keyFile)
		if err != nil || string(got) != secret+"\n" {
			t.Errorf("key file holds %q (%v), want the key %q alone", got, err, secret)
		}
		if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("key file: %v, %v; want mode 0600", fi, err)
		}
		if entries, err := os.ReadDir(keys); err != nil || len(entries) != 1 {
			t.Errorf("key file's directory holds %v (%v), want the key file alone", entries, err)
		}
	})
	t.Run("notMade", func(t *testing.T) {
		dir, keys := t.TempDir(), t.TempDir()
		store, srv := mustBootstrapServer(t, dir, func(s idlegrid.Store) idlegrid.Store { return accountsDown{s} })
		keyFile := filepath.Join(keys, "admin.key")
		if _, err := bootstrapAdmin(ctx, store, srv, keyFile, nil, nil); err == nil || !strings.Contains(err.Error(), "database gone") {
			t.Fatalf("bootstrapAdmin on a store that cannot create accounts: %v, want its error", err)
		}
		if entries, err := os.ReadDir(keys); err != nil || len(entries) != 0 {
			t.Errorf("key file's directory holds %v (%v) after no key was made, want nothing", entries, err)
		}
	})
}
