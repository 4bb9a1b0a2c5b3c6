package audit

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Kind says what an entry records.
type Kind string

// The kinds the market logs. A new kind needs no new leaf format: the kind
// is one line of the leaf.
const (
	KindPosting         Kind = "ledger.posting"   // one balanced transfer of the ledger
	KindReceipt         Kind = "receipt"          // one usage receipt the server accepted
	KindLeaseTransition Kind = "lease.transition" // one state change of a lease
	KindLevelChange     Kind = "reputation.level" // a promotion or demotion
	KindPolicy          Kind = "trust.policy"     // the trust policy in force changed
	KindDispute         Kind = "trust.dispute"    // a dispute opened or resolved, with its penalty
)

// Limits of an entry, so that no single leaf can be made enormous.
const (
	MaxSubjects     = 32
	maxSubjectLen   = 128
	MaxPayloadBytes = 64 << 10
)

var kindRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// Entry is one record of the log. Subjects name every account, lease, job
// and node the entry concerns, so that each of them can find and check it;
// Payload is the record itself as JSON (a transfer, a receipt, a lease
// event). An entry is never changed once logged.
type Entry struct {
	Kind     Kind            `json:"kind"`
	Subjects []string        `json:"subjects"`
	Payload  json.RawMessage `json:"payload"`
	At       time.Time       `json:"at"` // to the microsecond, like every time in idlegrid

	// canonical says Payload is canonical JSON already: NewEntry wrote it
	// so, and Validate and Leaf need not read it again. An entry decoded
	// or built by hand has it false, and its payload is checked and
	// canonicalized as it is hashed.
	canonical bool
}

// leafTag starts every leaf. It differs from the tags of receipts and tree
// heads, so no signed or hashed object of one kind can pass for another.
const leafTag = "idlegrid-audit-entry-v1"

// Validate checks an entry before it is logged.
func (e *Entry) Validate() error {
	switch {
	case !kindRE.MatchString(string(e.Kind)):
		return idlegrid.Invalid("entry.kind", "must be 1-64 lower-case letters, digits, '.', '_' or '-', starting with a letter")
	case len(e.Subjects) > MaxSubjects:
		return idlegrid.Invalid("entry.subjects", "at most %d, got %d", MaxSubjects, len(e.Subjects))
	case e.At.IsZero():
		return idlegrid.Invalid("entry.at", "required")
	case len(e.Payload) > MaxPayloadBytes:
		return idlegrid.Invalid("entry.payload", "at most %d bytes, got %d", MaxPayloadBytes, len(e.Payload))
	case !e.canonical && !json.Valid(e.Payload):
		return idlegrid.Invalid("entry.payload", "must be one JSON value")
	}
	for _, s := range e.Subjects {
		if s == "" || len(s) > maxSubjectLen || hasControl(s) {
			return idlegrid.Invalid("entry.subjects", "each must be 1-%d characters without control characters, got %q", maxSubjectLen, s)
		}
	}
	return nil
}

// Leaf is the entry's leaf encoding, the byte string its leaf hash covers:
// one "name=value" line each, in this order, each ending in "\n":
//
//	idlegrid-audit-entry-v1
//	kind=<Kind>
//	at=<At, unix microseconds, decimal>
//	subject=<one line per subject, sorted bytewise, duplicates dropped>
//	payload=<Payload in canonical JSON, see CanonicalJSON>
//
// Validate refuses control characters in the kind and subjects, and
// canonical JSON has none, so no value can forge a line. Leaf fails only
// when the payload is not JSON. The encoding never changes for version 1; a
// new field means a new tag.
func (e *Entry) Leaf() ([]byte, error) {
	payload := e.Payload
	if !e.canonical {
		var err error
		if payload, err = Canonicalize(e.Payload); err != nil {
			return nil, idlegrid.Invalid("entry.payload", "%v", err)
		}
	}
	subjects := slices.Clone(e.Subjects)
	slices.Sort(subjects)
	subjects = slices.Compact(subjects)

	b := make([]byte, 0, 64+len(payload)+32*len(subjects))
	b = append(b, leafTag+"\n"...)
	b = append(b, "kind="+string(e.Kind)+"\n"...)
	b = append(b, "at="...)
	b = strconv.AppendInt(b, e.At.UnixMicro(), 10)
	b = append(b, '\n')
	for _, s := range subjects {
		b = append(b, "subject="+s+"\n"...)
	}
	b = append(b, "payload="...)
	b = append(b, payload...)
	return append(b, '\n'), nil
}

// LeafHash is the entry's leaf hash: HashLeaf(Leaf()).
func (e *Entry) LeafHash() (Hash, error) {
	leaf, err := e.Leaf()
	if err != nil {
		return Hash{}, err
	}
	return HashLeaf(leaf), nil
}

// Concerns reports whether the entry names subject.
func (e *Entry) Concerns(subject string) bool { return slices.Contains(e.Subjects, subject) }

// CanonicalJSON encodes v as canonical JSON (see Canonicalize).
func CanonicalJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	// The encoder wrote one valid value: no need to check it again.
	c := canonicalizer{data: buf.Bytes()}
	return c.value(make([]byte, 0, buf.Len())), nil
}

func hasControl(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}
