package nodekey_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/nodekey"
)

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent", "node.key")
	first, err := nodekey.LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	} else if got := fi.Mode().Perm(); got != 0o600 {
		t.Fatalf("key file mode = %v, want 0600", got)
	}
	again, err := nodekey.LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	} else if !first.Equal(again) {
		t.Fatal("second load returned a different key; the node's identity must survive restarts")
	}

	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := nodekey.LoadOrCreate(path); err == nil {
		t.Fatal("a corrupt key file loaded; want an error saying to move it away")
	}
}

// TestCreate: a new key is written whole, mode 0600, under its name alone
// (no temporary file left beside it), and never over a file already there.
func TestCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	path := filepath.Join(dir, "node.key")
	priv, err := nodekey.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if loaded, err := nodekey.LoadOrCreate(path); err != nil || !loaded.Equal(priv) {
		t.Fatalf("LoadOrCreate after Create: %v; want the created key", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v; want mode 0600", fi, err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
		t.Errorf("key directory holds %v (%v), want the key file alone", entries, err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodekey.Create(path); !errors.Is(err, os.ErrExist) {
		t.Errorf("Create over a key: %v, want os.ErrExist", err)
	}
	if after, err := os.ReadFile(path); err != nil || string(after) != string(before) {
		t.Errorf("Create over a key changed the file: %v", err)
	}
}

// TestLoadOrCreate_race: agents that start at once on one new key path
// each get the key on disk; none goes on with a key it made but lost.
func TestLoadOrCreate_race(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.key")
	keys := make([]ed25519.PrivateKey, 8)
	errs := make([]error, len(keys))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			<-start
			keys[i], errs[i] = nodekey.LoadOrCreate(path)
		})
	}
	close(start)
	wg.Wait()
	onDisk, err := nodekey.LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if errs[i] != nil || !onDisk.Equal(k) {
			t.Errorf("start %d: %v; want the key on disk", i, errs[i])
		}
	}
}

func TestVerify(t *testing.T) {
	priv, err := nodekey.LoadOrCreate(filepath.Join(t.TempDir(), "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := nodekey.ParsePublic(nodekey.PublicString(priv.Public().(ed25519.PublicKey)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_800_000_000_000)
	ms := now.UnixMilli()
	body := []byte(`{"state":"running"}`)
	sig := nodekey.Sign(priv, "POST", "/v1/agent/leases/l1/report", ms, body)
	stamp := strconv.FormatInt(ms, 10)

	tests := []struct {
		name   string
		method string
		path   string
		stamp  string
		body   []byte
		now    time.Time
		ok     bool
	}{
		{"Valid", "POST", "/v1/agent/leases/l1/report", stamp, body, now, true},
		{"WithinSkew", "POST", "/v1/agent/leases/l1/report", stamp, body, now.Add(nodekey.MaxSkew - time.Second), true},
		{"OtherPath", "POST", "/v1/agent/leases/l2/report", stamp, body, now, false},
		{"OtherMethod", "PUT", "/v1/agent/leases/l1/report", stamp, body, now, false},
		{"OtherBody", "POST", "/v1/agent/leases/l1/report", stamp, []byte(`{"state":"succeeded"}`), now, false},
		{"Stale", "POST", "/v1/agent/leases/l1/report", stamp, body, now.Add(nodekey.MaxSkew + time.Second), false},
		{"FromTheFuture", "POST", "/v1/agent/leases/l1/report", stamp, body, now.Add(-nodekey.MaxSkew - time.Second), false},
		{"BadTime", "POST", "/v1/agent/leases/l1/report", "soon", body, now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := nodekey.Verify(pub, tt.method, tt.path, tt.stamp, tt.body, sig, tt.now)
			if got := err == nil; got != tt.ok {
				t.Fatalf("Verify ok = %v (%v), want %v", got, err, tt.ok)
			}
		})
	}
	if _, err := nodekey.ParsePublic("AAAA"); err == nil {
		t.Fatal("ParsePublic accepted a short key")
	}
	// A signature has one spelling: the same bytes written with other
	// spare bits before the padding are refused, or a request captured on
	// the way could be sent again under a signature the replay check has
	// not seen (httpapi's replays).
	if err := nodekey.Verify(pub, "POST", "/v1/agent/leases/l1/report", stamp, body, otherSpelling(t, sig), now); err == nil {
		t.Fatal("Verify took a signature spelt another way")
	}
}

// otherSpelling is base64 sig, of 64 bytes ("…x=="), with the spare bits
// of its last character set: the same bytes to a lenient decoder.
func otherSpelling(t *testing.T, sig string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	if !strings.HasSuffix(sig, "==") {
		t.Fatalf("signature %q: want two pad characters", sig)
	}
	i := strings.IndexByte(alphabet, sig[len(sig)-3])
	other := sig[:len(sig)-3] + string(alphabet[i|0x0f]) + "=="
	if other == sig {
		other = sig[:len(sig)-3] + string(alphabet[i&^0x0f|0x01]) + "=="
	}
	if a, _ := base64.StdEncoding.DecodeString(other); string(a) != string(must64(t, sig)) {
		t.Fatalf("%q is not another spelling of %q", other, sig)
	}
	return other
}

func must64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
