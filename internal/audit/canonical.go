package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
)

// Canonicalize rewrites one JSON value in canonical form: no insignificant
// white space, object keys sorted bytewise (a repeated key keeps its last
// value), strings escaped as encoding/json escapes them without HTML
// escaping, and numbers exactly as written. Two encodings of the same value
// (say, compact and indented) canonicalize to the same bytes, so a payload
// that passed through a pretty-printer still hashes to its leaf.
//
// Every audit entry's payload is canonicalized twice (when it is made and
// when its leaf is hashed), on the path of every placement, so it works on
// the bytes: it checks the value with json.Valid, then copies numbers,
// literals and plain ASCII strings as they are and sorts each object's
// members, decoding and re-encoding only the strings and keys that hold an
// escape or a non-ASCII byte. TestCanonicalizeMatchesDecoder and
// FuzzCanonicalizeMatchesDecoder hold it to the same bytes as decoding into
// Go values and encoding them again.
func Canonicalize(raw []byte) (json.RawMessage, error) {
	if !json.Valid(raw) {
		return nil, notJSON(raw)
	}
	c := canonicalizer{data: raw}
	return c.value(make([]byte, 0, len(raw))), nil
}

// notJSON says what is wrong with raw, as encoding/json sees it.
func notJSON(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var v any
	if err := dec.Decode(&v); err != nil {
		return errors.New("not JSON: " + err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("not JSON: more than one value")
	}
	return errors.New("not JSON")
}

// canonicalizer walks one valid JSON value. Each depth of objects reuses
// one scratch buffer and one member list, so that a payload costs a few
// allocations, not a few per member.
type canonicalizer struct {
	data    []byte
	i       int
	depth   int
	scratch [][]byte
	members [][]member
}

func (c *canonicalizer) space() {
	for c.i < len(c.data) {
		switch c.data[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// value appends the canonical form of the value at c.i to out.
func (c *canonicalizer) value(out []byte) []byte {
	c.space()
	switch c.data[c.i] {
	case '{':
		return c.object(out)
	case '[':
		return c.array(out)
	case '"':
		return appendCanonicalString(out, c.str())
	}
	start := c.i // a number, true, false or null
	for c.i < len(c.data) && !endsLiteral(c.data[c.i]) {
		c.i++
	}
	return append(out, c.data[start:c.i]...)
}

func endsLiteral(b byte) bool {
	switch b {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// str returns the string token at c.i, quotes included, and moves past it.
func (c *canonicalizer) str() []byte {
	start := c.i
	for c.i++; c.data[c.i] != '"'; c.i++ {
		if c.data[c.i] == '\\' {
			c.i++
		}
	}
	c.i++
	return c.data[start:c.i]
}

// member is one member of an object: its decoded key, and its canonical
// "key":value bytes in the object's scratch buffer.
type member struct {
	key        []byte
	start, end int
}

func (c *canonicalizer) object(out []byte) []byte {
	c.i++ // {
	d := c.depth
	if d == len(c.scratch) {
		c.scratch, c.members = append(c.scratch, nil), append(c.members, nil)
	}
	c.depth++
	defer func() { c.depth-- }()
	members, scratch := c.members[d][:0], c.scratch[d][:0]
	for {
		c.space()
		if c.data[c.i] == '}' {
			c.i++
			break
		}
		raw := c.str()
		start := len(scratch)
		scratch = appendCanonicalString(scratch, raw)
		c.space()
		c.i++ // :
		scratch = c.value(append(scratch, ':'))
		members = append(members, member{key: decodedKey(raw), start: start, end: len(scratch)})
		c.space()
		if c.data[c.i] == ',' {
			c.i++
		}
	}
	c.members[d], c.scratch[d] = members, scratch
	slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	out = append(out, '{')
	first := true
	for k, m := range members {
		if k+1 < len(members) && bytes.Equal(members[k+1].key, m.key) {
			continue // a repeated key keeps its last value
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, scratch[m.start:m.end]...)
	}
	return append(out, '}')
}

func (c *canonicalizer) array(out []byte) []byte {
	c.i++ // [
	out = append(out, '[')
	for n := 0; ; n++ {
		c.space()
		if c.data[c.i] == ']' {
			c.i++
			return append(out, ']')
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = c.value(out)
		c.space()
		if c.data[c.i] == ',' {
			c.i++
		}
	}
}

// plainString reports whether a string token is already canonical: only
// printable ASCII and no escape, which encoding/json writes unchanged.
func plainString(raw []byte) bool {
	for _, b := range raw[1 : len(raw)-1] {
		if b == '\\' || b < 0x20 || b >= 0x80 {
			return false
		}
	}
	return true
}

// decodedKey is the string a string token stands for, as bytes.
func decodedKey(raw []byte) []byte {
	if plainString(raw) {
		return raw[1 : len(raw)-1]
	}
	return []byte(decodedString(raw))
}

// decodedString is the string a string token stands for.
func decodedString(raw []byte) string {
	var s string
	_ = json.Unmarshal(raw, &s) // valid: json.Valid passed
	return s
}

// appendCanonicalString appends the canonical form of a string token.
func appendCanonicalString(out, raw []byte) []byte {
	if plainString(raw) {
		return append(out, raw...)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(decodedString(raw)) // a string always encodes
	return append(out, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
