// Package nodekey is a node's ed25519 identity: creating and keeping the key,
// and signing and checking agent requests with it.
//
// A signed request carries four headers: the node ID (or, for a join, the
// public key), the protocol version, the time in Unix milliseconds, and an
// ed25519 signature over
//
//	"idlegrid-agent-v1\n" + METHOD + "\n" + PATH?QUERY + "\n" + TIME + "\n" + hex(sha256(BODY))
//
// The server refuses signatures older or newer than MaxSkew.
package nodekey

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid/internal/atomicfile"
)

// Header names of a signed agent request.
const (
	HeaderNode      = "X-Idlegrid-Node"
	HeaderPublicKey = "X-Idlegrid-Public-Key"
	HeaderTime      = "X-Idlegrid-Time"
	HeaderSignature = "X-Idlegrid-Signature"
	HeaderProtocol  = "X-Idlegrid-Protocol"
)

// MaxSkew is how far a request's signed time may be from the server's clock.
const MaxSkew = 2 * time.Minute

// Words of the server's refusals of a signed request that the node mends
// by signing it again: its time off the server's clock (NTP mends it), or
// its signature taken before (a replay). An agent asks again on those.
const (
	SkewWords   = "off the server's clock"
	ReplayWords = "taken before"
)

// UnknownWords are in the server's 401 for a node it has no record of (its
// database was reset, or restored from before the node joined).
const UnknownWords = "unknown node"

// BadSignatureWords are in the server's 401 for a request the node's key
// did not sign: the server knows the node by another key.
const BadSignatureWords = "bad node signature"

// LoadOrCreate reads the private key at path, creating it (Create) when
// it does not exist yet. Two processes that start on one new path get the
// same key: the one that loses the race reads the other's.
func LoadOrCreate(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		priv, cerr := Create(path)
		if !errors.Is(cerr, os.ErrExist) {
			if cerr != nil {
				return nil, fmt.Errorf("write node key: %w", cerr)
			}
			return priv, nil
		}
		data, err = os.ReadFile(path) // made meanwhile by another process: that is the key
	}
	if err != nil {
		return nil, fmt.Errorf("read node key: %w", err)
	}
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("node key %s is corrupt; move it away to create a new identity", path)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// Create makes a new private key and writes its base64 seed to path, mode
// 0600, creating the directory (0700). It never replaces a file there: it
// returns an error that is os.ErrExist instead. The key is on disk when
// Create returns, since its public half goes to a server that then knows
// the node, or the log's users, by it: the seed is written to a temporary
// file and synced, the file is linked to path (a link, unlike a rename,
// fails rather than replace a key made meanwhile) and the directory is
// synced. A power cut leaves the whole key at path, or no file; never an
// empty one, which would keep the agent or server from starting.
func Create(path string) (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Create(path, []byte(base64.StdEncoding.EncodeToString(priv.Seed())+"\n")); err != nil {
		return nil, err
	}
	return priv, nil
}

// PublicString encodes a public key for the wire.
func PublicString(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }

// ParsePublic decodes a public key from the wire.
func ParsePublic(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, errors.New("not a base64 ed25519 public key")
	}
	return ed25519.PublicKey(b), nil
}

func message(method, pathAndQuery string, unixMillis int64, body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte("idlegrid-agent-v1\n" + method + "\n" + pathAndQuery + "\n" +
		strconv.FormatInt(unixMillis, 10) + "\n" + hex.EncodeToString(sum[:]))
}

// Sign returns the base64 signature of a request.
func Sign(priv ed25519.PrivateKey, method, pathAndQuery string, unixMillis int64, body []byte) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(priv, message(method, pathAndQuery, unixMillis, body)))
}

// Verify checks a request's signature and that its time is within MaxSkew of now.
func Verify(pub ed25519.PublicKey, method, pathAndQuery, unixMillis string, body []byte, sig string, now time.Time) error {
	ms, err := strconv.ParseInt(unixMillis, 10, 64)
	if err != nil {
		return errors.New("missing or malformed " + HeaderTime)
	}
	if d := now.Sub(time.UnixMilli(ms)); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("request time is %s %s; check the node's clock (NTP)", d.Round(time.Second), SkewWords)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(sig) // one spelling of a signature: a replay is known by it
	if err != nil || !ed25519.Verify(pub, message(method, pathAndQuery, ms, body), raw) {
		return errors.New(BadSignatureWords)
	}
	return nil
}
