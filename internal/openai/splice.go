package openai

import (
	"bytes"
	"encoding/json"
	"errors"
)

// ErrNotObject is SetField's error for a body that is not a JSON object.
var ErrNotObject = errors.New("not a JSON object")

// SetField returns body, a JSON object, with its top-level field key set
// to value, a JSON value: every occurrence of key is replaced, or the
// field is added at the end. The rest of the body is kept byte for byte,
// so that a request changes no more than it must on its way and costs a
// scan rather than a decoding into a map and an encoding back.
func SetField(body []byte, key string, value []byte) ([]byte, error) {
	open, ms, err := members(body)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(body)+len(key)+len(value)+4)
	copied, found := 0, false
	for _, m := range ms {
		if keyIs(body[m.start:m.keyEnd], key) {
			out = append(append(out, body[copied:m.value]...), value...)
			copied, found = m.end, true
		}
	}
	if found {
		return append(out, body[copied:]...), nil
	}
	closing := skipSpace(body, open+1)
	if len(ms) > 0 {
		closing = skipSpace(body, ms[len(ms)-1].end)
	}
	out = append(out, body[:closing]...)
	if len(ms) > 0 {
		out = append(out, ',')
	}
	name, _ := json.Marshal(key)
	out = append(append(append(out, name...), ':'), value...)
	return append(out, body[closing:]...), nil
}

// DeleteField returns body, a JSON object, without its top-level field
// key (every occurrence). The other fields are kept byte for byte; the
// space between them may change.
func DeleteField(body []byte, key string) ([]byte, error) {
	open, ms, err := members(body)
	if err != nil {
		return nil, err
	}
	out := append(make([]byte, 0, len(body)), body[:open+1]...)
	kept := 0
	for _, m := range ms {
		if keyIs(body[m.start:m.keyEnd], key) {
			continue
		}
		if kept > 0 {
			out = append(out, ',')
		}
		out = append(out, body[m.start:m.end]...)
		kept++
	}
	closing := skipSpace(body, open+1)
	if len(ms) > 0 {
		closing = skipSpace(body, ms[len(ms)-1].end)
	}
	return append(out, body[closing:]...), nil
}

// member is where one field of an object lies: its key from start to
// keyEnd, its value from value to end.
type member struct{ start, keyEnd, value, end int }

// members checks that body is a JSON object and finds its fields; open is
// where its opening brace is.
func members(body []byte) (open int, ms []member, err error) {
	if !json.Valid(body) {
		return 0, nil, ErrNotObject
	}
	open = skipSpace(body, 0)
	if body[open] != '{' {
		return 0, nil, ErrNotObject
	}
	i := skipSpace(body, open+1)
	for body[i] != '}' {
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
		m := member{start: i, keyEnd: skipString(body, i)}
		m.value = skipSpace(body, skipSpace(body, m.keyEnd)+1) // past the colon
		m.end = skipValue(body, m.value)
		ms = append(ms, m)
		i = skipSpace(body, m.end)
	}
	return open, ms, nil
}

// keyIs reports whether name, a JSON string, is key.
func keyIs(name []byte, key string) bool {
	inner := name[1 : len(name)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == key
	}
	var s string
	return json.Unmarshal(name, &s) == nil && s == key
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the end of the valid JSON string at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue returns the end of the valid JSON value at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for ; i < len(b); i++ { // a number, true, false or null
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return i
}
