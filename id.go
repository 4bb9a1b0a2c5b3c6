package idlegrid

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
	"time"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// idDigits is base32 in the order of its characters, so that IDs sort as
// the numbers they encode.
const idDigits = "0123456789abcdefghijklmnopqrstuv"

var sortableEncoding = base32.NewEncoding(idDigits).WithPadding(base32.NoPadding)

// NewID returns an identifier with a readable prefix, e.g. "job_…": the
// millisecond it was made, in 9 characters, then 80 random bits, in 16.
// IDs are made by the coordinator, not the database, so that several
// servers can share one PostgreSQL.
//
// The time goes first so that rows made together sit together in the
// indexes keyed by ID: a batch of placements then changes a few pages at
// the end of each index instead of one page per row across it, which is
// what a commit writes. It is the wall clock's, not the server's injected
// clock's, because nothing reads it back: an ID orders nothing but pages.
func NewID(prefix string) string {
	return idAt(prefix, time.Now())
}

// idAt is NewID's identifier for a given time.
func idAt(prefix string, t time.Time) string {
	var b [9 + 16]byte
	ms := uint64(t.UnixMilli()) // 45 bits reach the year 3084
	for i := 8; i >= 0; i-- {
		b[i] = idDigits[ms&31]
		ms >>= 5
	}
	var r [10]byte
	rand.Read(r[:])
	sortableEncoding.Encode(b[9:], r[:])
	return prefix + "_" + string(b[:])
}

// IsMadeID reports whether s is shaped as NewID makes identifiers: a
// prefix of lower-case letters, '_', then 25 digits of the sortable base32.
func IsMadeID(s string) bool {
	prefix, digits, ok := strings.Cut(s, "_")
	return ok && prefix != "" && strings.Trim(prefix, "abcdefghijklmnopqrstuvwxyz") == "" &&
		len(digits) == 9+16 && strings.Trim(digits, idDigits) == ""
}

// NewSecret returns a random secret of 32 bytes with a readable prefix, e.g.
// "igk_…" for API keys. Only its hash is ever stored.
func NewSecret(prefix string) string {
	b := make([]byte, 32)
	rand.Read(b)
	return prefix + "_" + strings.ToLower(idEncoding.EncodeToString(b))
}
