package audit

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// Log is the server's side of the transparency log: a Tree over the store's
// leaves, and the key and clock it signs tree heads with.
type Log struct {
	*Tree
	key   ed25519.PrivateKey
	clock idlegrid.Clock
}

// NewLog returns the log over store, signing with key at the clock's time.
func NewLog(store LeafStore, key ed25519.PrivateKey, clock idlegrid.Clock) *Log {
	return &Log{Tree: NewTree(store), key: key, clock: clock}
}

// PublicKey is the key users check tree heads with. Publish it out of band
// (the operator's site, the CLI's configuration): a user who took it from
// the server it checks would take the server's word after all.
func (l *Log) PublicKey() ed25519.PublicKey { return l.key.Public().(ed25519.PublicKey) }

// AppendEntries checks and logs entries, in order, and returns the index of
// the first. A caller that must log an entry atomically with the change it
// records appends its leaf hash in that change's transaction instead, through
// its own LeafStore; the Tree catches up on its next call.
func (l *Log) AppendEntries(ctx context.Context, entries ...Entry) (uint64, error) {
	hashes := make([]Hash, len(entries))
	for i := range entries {
		if err := entries[i].Validate(); err != nil {
			return 0, err
		}
		h, err := entries[i].LeafHash()
		if err != nil {
			return 0, err
		}
		hashes[i] = h
	}
	return l.Append(ctx, hashes...)
}

// SignedHead signs the log's current head at the clock's time.
func (l *Log) SignedHead(ctx context.Context) (SignedTreeHead, error) {
	size, root, err := l.Head(ctx)
	if err != nil {
		return SignedTreeHead{}, err
	}
	return SignTreeHead(l.key, TreeHead{Size: size, RootHash: root, Timestamp: l.clock.Now()}), nil
}

// LoadOrCreateKey reads the log's private key at path, creating it when it
// does not exist yet: as a node key is (nodekey.Create), mode 0600, on disk
// before the log signs with it, and never over a key another process made
// meanwhile, which is then read. The file holds the base64 ed25519 seed.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		priv, cerr := nodekey.Create(path)
		if !errors.Is(cerr, os.ErrExist) {
			if cerr != nil {
				return nil, fmt.Errorf("write log key: %w", cerr)
			}
			return priv, nil
		}
		data, err = os.ReadFile(path) // made meanwhile by another server: that is the key
	}
	if err != nil {
		return nil, fmt.Errorf("read log key: %w", err)
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(seed) != ed25519.SeedSize {
		// Unlike a node key, a log key must not simply be replaced: every
		// head users hold was signed with it.
		return nil, fmt.Errorf("log key %s is corrupt; restore it from backup (a new key would orphan every tree head users hold)", path)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// PublicKeyString encodes a log's public key for users: base64, as node keys.
func PublicKeyString(pub ed25519.PublicKey) string { return nodekey.PublicString(pub) }

// ParsePublicKey decodes a log's public key from PublicKeyString.
func ParsePublicKey(s string) (ed25519.PublicKey, error) { return nodekey.ParsePublic(s) }
