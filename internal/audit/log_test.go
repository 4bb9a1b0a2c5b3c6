package audit

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// stepClock is a clock that moves a second each time it is read.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { c.now = c.now.Add(time.Second); return c.now }

func mustKey(tb testing.TB, seed byte) ed25519.PrivateKey {
	tb.Helper()
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	return ed25519.NewKeyFromSeed(s)
}

func TestSignedTreeHead_Verify(t *testing.T) {
	key := mustKey(t, 1)
	pub := key.Public().(ed25519.PublicKey)
	sth := SignTreeHead(key, TreeHead{Size: 8, RootHash: mustHex(t, rfcRoots[7]), Timestamp: t0})
	if err := sth.Verify(pub); err != nil {
		t.Fatalf("a good head: %v", err)
	}
	if !sth.Timestamp.Equal(t0.Truncate(time.Millisecond)) {
		t.Errorf("timestamp: got %s, want it truncated to the millisecond", sth.Timestamp)
	}

	t.Run("survives JSON", func(t *testing.T) {
		b, err := json.Marshal(sth)
		if err != nil {
			t.Fatal(err)
		}
		var back SignedTreeHead
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if err := back.Verify(pub); err != nil {
			t.Errorf("after a JSON round trip: %v (%s)", err, b)
		}
	})
	for name, change := range map[string]func(h *SignedTreeHead){
		"size":      func(h *SignedTreeHead) { h.Size++ },
		"root":      func(h *SignedTreeHead) { h.RootHash[31] ^= 1 },
		"timestamp": func(h *SignedTreeHead) { h.Timestamp = h.Timestamp.Add(time.Millisecond) },
		"signature": func(h *SignedTreeHead) { h.Signature[0] ^= 1 },
		"no sig":    func(h *SignedTreeHead) { h.Signature = nil },
	} {
		t.Run(name, func(t *testing.T) {
			h := sth
			h.Signature = append([]byte(nil), sth.Signature...)
			change(&h)
			if h.Verify(pub) == nil {
				t.Error("a changed head verifies")
			}
		})
	}
	t.Run("other key", func(t *testing.T) {
		if sth.Verify(mustKey(t, 2).Public().(ed25519.PublicKey)) == nil {
			t.Error("verifies with another key")
		}
	})
	t.Run("malformed key", func(t *testing.T) {
		if sth.Verify(ed25519.PublicKey{1, 2, 3}) == nil {
			t.Error("verifies with a short key")
		}
	})
}

func TestLog_SignedHead(t *testing.T) {
	ctx := context.Background()
	clock := &stepClock{now: t0}
	log := NewLog(&MemoryStore{}, mustKey(t, 1), clock)

	h0, err := log.SignedHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h0.Size != 0 || h0.RootHash != EmptyRoot() || h0.Verify(log.PublicKey()) != nil {
		t.Errorf("empty log: got %+v", h0)
	}
	entries := mustEntries(t, 3)
	first, err := log.AppendEntries(ctx, entries...)
	if err != nil || first != 0 {
		t.Fatalf("AppendEntries: %d, %v", first, err)
	}
	h1, err := log.SignedHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := refRoot([]Hash{mustLeafHash(t, entries[0]), mustLeafHash(t, entries[1]), mustLeafHash(t, entries[2])})
	if h1.Size != 3 || h1.RootHash != want || !h1.Timestamp.After(h0.Timestamp) {
		t.Errorf("got %+v, want size 3 root %s, later than %s", h1.TreeHead, want, h0.Timestamp)
	}
	if err := h1.Verify(log.PublicKey()); err != nil {
		t.Error(err)
	}

	bad := entries[0]
	bad.Kind = ""
	if _, err := log.AppendEntries(ctx, entries[1], bad); err == nil {
		t.Error("appended an invalid entry")
	}
	if n, _ := log.Size(ctx); n != 3 {
		t.Errorf("a refused batch changed the log: size %d, want 3", n)
	}
}

func mustEntries(tb testing.TB, n int) []Entry {
	tb.Helper()
	out := make([]Entry, n)
	for i := range out {
		payload, err := CanonicalJSON(map[string]int{"seq": i})
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = Entry{Kind: KindReceipt, Subjects: []string{"lea_1", "rnt_a"}, Payload: payload, At: t0.Add(time.Duration(i) * time.Second)}
	}
	return out
}

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "log.key")
	k1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v; want mode 0600", fi, err)
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("reloaded a different key: %v", err)
	}
	pub, err := ParsePublicKey(PublicKeyString(k1.Public().(ed25519.PublicKey)))
	if err != nil || !pub.Equal(k1.Public()) {
		t.Errorf("public key round trip: %v", err)
	}
	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(path); err == nil {
		t.Error("loaded a corrupt key")
	}
}

// TestLoadOrCreateKey_race: servers that start at once on one new key
// path each sign with the key on disk, never one that lost the race.
func TestLoadOrCreateKey_race(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.key")
	keys := make([]ed25519.PrivateKey, 8)
	errs := make([]error, len(keys))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			<-start
			keys[i], errs[i] = LoadOrCreateKey(path)
		})
	}
	close(start)
	wg.Wait()
	onDisk, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if errs[i] != nil || !onDisk.Equal(k) {
			t.Errorf("start %d: %v; want the key on disk", i, errs[i])
		}
	}
	if entries, err := os.ReadDir(filepath.Dir(path)); err != nil || len(entries) != 1 {
		t.Errorf("key directory holds %v (%v), want the key file alone", entries, err)
	}
}
