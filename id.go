package idlegrid

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewID returns a random identifier with a readable prefix, e.g. "job_…".
// IDs are made by the coordinator, not the database, so that several
// servers can share one PostgreSQL.
func NewID(prefix string) string {
	b := make([]byte, 10)
	rand.Read(b)
	return prefix + "_" + strings.ToLower(idEncoding.EncodeToString(b))
}

// NewSecret returns a random secret of 32 bytes with a readable prefix, e.g.
// "igk_…" for API keys. Only its hash is ever stored.
func NewSecret(prefix string) string {
	b := make([]byte, 32)
	rand.Read(b)
	return prefix + "_" + strings.ToLower(idEncoding.EncodeToString(b))
}
