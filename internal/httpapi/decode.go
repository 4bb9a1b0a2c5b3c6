package httpapi

import (
	"bytes"
	"cmp"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idlegrid/idlegrid"
)

// readBody reads the whole request body, at most max bytes of it.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if err := checkContentType(r); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, idlegrid.Errorf(idlegrid.ETOOLARGE, "request body is over the limit of %d bytes", tooLarge.Limit)
	} else if err != nil {
		return nil, idlegrid.Errorf(idlegrid.EINVALID, "could not read the request body: %v", err)
	}
	return body, nil
}

// checkContentType refuses bodies that say they are not JSON. A missing
// Content-Type is taken to be JSON.
func checkContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return &idlegrid.Error{Code: idlegrid.EINVALID, Field: "Content-Type",
			Message: fmt.Sprintf("must be application/json, got %q", ct)}
	}
	return nil
}

// decodeJSON decodes body into v: exactly one JSON value, no unknown fields.
// Every failure is an EINVALID naming what is wrong, never an internal error.
func decodeJSON(body []byte, v any) error { return decodeOne(body, v, true) }

// decodeAgentJSON is decodeJSON for what agents send, which leaves out
// fields this server does not know. Within one agent protocol version
// (idlegrid.ProtocolVersion) a newer agent may send fields an older server
// has no use for, as it may leave out those it lacks; what would change
// their meaning moves the protocol on, and checkProtocol refuses it.
func decodeAgentJSON(body []byte, v any) error { return decodeOne(body, v, false) }

// decodeOne decodes exactly one JSON value of body into v, refusing
// fields v lacks when strict, and text no store can keep (checkNUL).
func decodeOne(body []byte, v any, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return jsonError(err, body, reflect.TypeOf(v))
	}
	if _, err := dec.Token(); err != io.EOF {
		return idlegrid.Errorf(idlegrid.EINVALID, "request body has data after the JSON value; send exactly one JSON object")
	}
	if strict {
		if err := checkStrict(body, reflect.TypeOf(v)); err != nil {
			return err
		}
	}
	return checkNUL(body)
}

// checkStrict refuses what a client's body, decoded into a t without
// fault, may still not hold: bytes that are not UTF-8 (checkUTF8) and a
// field given twice (findMember).
func checkStrict(body []byte, t reflect.Type) error {
	if err := checkUTF8(body); err != nil {
		return err
	}
	if m := findMember(body, t, "", true); m != nil {
		return idlegrid.Invalid(m.path, "%s", m.reason)
	}
	return nil
}

// checkUTF8 refuses a body that is not UTF-8, as JSON must be (RFC 8259),
// naming the string that holds the first bad byte: encoding/json would
// keep U+FFFD in its place, and the server would store text the client
// never sent.
func checkUTF8(body []byte) error {
	if utf8.Valid(body) {
		return nil
	}
	bad := int64(len(body))
	for i := 0; i < len(body); {
		r, n := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && n == 1 {
			bad = int64(i)
			break
		}
		i += n
	}
	field := ""
	eachString(body, func(path, _ string, end int64) bool {
		if end > bad {
			field = path
			return false
		}
		return true
	})
	return idlegrid.Invalid(cmp.Or(field, "request body"), "must be UTF-8 text (byte %d of the body is not UTF-8)", bad)
}

// badMember is a member of a JSON object that its body may not hold.
type badMember struct {
	path   string // where, e.g. "schedule.weekly[0].day"
	reason string
}

// findMember walks raw, as it is decoded into a t, to the first member of
// an object, in the body's order, that is given twice (two keys that
// encoding/json reads into the same field: the same key, or one that
// differs from it only in case, where the last would silently win) or,
// when strict, that t does not know; nil when none. Paths name object keys
// joined by dots, and array indices in brackets, as findBad's do.
func findMember(raw json.RawMessage, t reflect.Type, path string, strict bool) *badMember {
	if t == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if decodesItself(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := jsonFields(t)
		return findMemberOf(raw, path, strict, func(key string) (string, reflect.Type) { return fieldNamed(fields, key) })
	case reflect.Map:
		return findMemberOf(raw, path, false, func(key string) (string, reflect.Type) { return key, t.Elem() })
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for i, item := range items {
			if m := findMember(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), strict); m != nil {
				return m
			}
		}
	}
	return nil
}

// findMemberOf is findMember of each member of the JSON object raw, in
// order; member gives the name a key is read as and its type ("", nil: a
// key the type does not know).
func findMemberOf(raw json.RawMessage, path string, strict bool, member func(key string) (string, reflect.Type)) *badMember {
	seen := map[string]string{} // the name read as, to the key first sent for it
	var bad *badMember
	eachMember(raw, path, func(key, at string, v json.RawMessage) bool {
		name, t := member(key)
		switch first, twice := seen[name]; {
		case t == nil && strict:
			bad = &badMember{path: at, reason: "unknown field"}
		case t == nil:
			return true
		case twice && first == key:
			bad = &badMember{path: at, reason: "given twice; give each field once"}
		case twice:
			bad = &badMember{path: at, reason: fmt.Sprintf("given twice, as %q and %q; give each field once", first, key)}
		default:
			seen[name] = key
			bad = findMember(v, t, at, strict)
		}
		return bad == nil
	})
	return bad
}

// eachMember calls visit with each member of the JSON object raw, in
// order: its key, its path (path joined to the key by a dot) and its
// value; it stops when visit returns false, or at a body that is no
// object, which the decoder says is at fault.
func eachMember(raw json.RawMessage, path string, visit func(key, at string, v json.RawMessage) bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return
	}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		var v json.RawMessage
		if err != nil || !ok || dec.Decode(&v) != nil {
			return
		}
		at := key
		if path != "" {
			at = path + "." + key
		}
		if !visit(key, at, v) {
			return
		}
	}
}

// fieldNamed is the JSON name of the field key names, and its type, matched
// as encoding/json matches it: exactly, else whatever the case; "", nil for
// none.
func fieldNamed(fields map[string]reflect.Type, key string) (string, reflect.Type) {
	if t, ok := fields[key]; ok {
		return key, t
	}
	for name, t := range fields {
		if strings.EqualFold(name, key) {
			return name, t
		}
	}
	return "", nil
}

// notText is the error for a field whose value is not text (IsText).
func notText(field string) error {
	return idlegrid.Invalid(field, "must be UTF-8 text without the NUL character")
}

// checkNUL refuses a JSON body with a string that holds the NUL character
// (written \u0000), naming where it is, e.g. "env.HOME" or "lines.text"
// (arrays add no name). A decoded body is UTF-8 already: the decoder
// replaces invalid bytes.
func checkNUL(body []byte) error {
	if !bytes.Contains(body, []byte(`\u0000`)) { // most bodies: no walk
		return nil
	}
	field, found := "", false
	eachString(body, func(path, s string, _ int64) bool {
		field, found = path, strings.IndexByte(s, 0) >= 0
		return !found
	})
	if found {
		return notText(cmp.Or(field, "request body"))
	}
	return nil
}

// eachString calls visit with each string value in body, in order, where
// it is (the keys of the objects it is in, joined by dots, arrays adding
// no name; "" at the top) and the offset in body just past it; it stops
// when visit returns false.
func eachString(body []byte, visit func(path, s string, end int64) bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object, atKey bool
		key           string
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		top := len(stack) - 1
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' || t == '[' {
				stack = append(stack, frame{object: t == '{', atKey: t == '{'})
				continue
			}
			stack = stack[:top]
		case string:
			if top >= 0 && stack[top].atKey {
				stack[top].key, stack[top].atKey = t, false
				continue
			}
			var keys []string
			for _, f := range stack {
				if f.object {
					keys = append(keys, f.key)
				}
			}
			if !visit(strings.Join(keys, "."), t, dec.InputOffset()) {
				return
			}
		}
		if top = len(stack) - 1; top >= 0 && stack[top].object { // a value ended: a key comes next
			stack[top].atKey = true
		}
	}
}

// jsonError explains an error decoding body into a value of type t to
// the caller, naming the field at fault where it can.
func jsonError(err error, body []byte, t reflect.Type) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var e *idlegrid.Error
	switch {
	case errors.Is(err, io.EOF):
		return idlegrid.Errorf(idlegrid.EINVALID, "request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return idlegrid.Errorf(idlegrid.EINVALID, "request body is cut short: malformed JSON")
	case errors.As(err, &syntax):
		return idlegrid.Errorf(idlegrid.EINVALID, "malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ) && typ.Field == "":
		return idlegrid.Errorf(idlegrid.EINVALID, "request body must be a JSON object, got %s", typ.Value)
	case errors.As(err, &typ):
		// encoding/json names the field without the array indices or map
		// keys on the way (schedule.weekly.start, env); findBad names the
		// value itself (schedule.weekly[1].start, env.HOME), as the rules'
		// refusals do.
		if bad := findBad(body, t, ""); bad != nil && bad.path != "" {
			return idlegrid.Invalid(bad.path, "%s", bad.reason())
		}
		return idlegrid.Invalid(typ.Field, "must be %s, got %s", jsonType(typ.Type), typ.Value)
	case errors.As(err, &e):
		return e // from a type that decodes itself and names its own field (RoutingMaxPrice)
	}
	// encoding/json reports unknown fields only as text.
	// Its path is found by walking the body (findMember), so that a form
	// can mark "schedule.weekly[0].day", not a "day" of no one knows where.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if m := findMember(body, t, "", true); m != nil {
			return idlegrid.Invalid(m.path, "%s", m.reason)
		}
		name, _ = strconv.Unquote(name)
		return idlegrid.Invalid(name, "unknown field")
	}
	// A type that decodes itself (a time, base64 bytes) says why it
	// refused a value, but encoding/json does not say where.
	if bad := findBad(body, t, ""); bad != nil && bad.path != "" {
		return idlegrid.Invalid(bad.path, "%s", bad.reason())
	}
	return idlegrid.Errorf(idlegrid.EINVALID, "malformed request body: %v", err)
}

// badValue is a value of a body that the type it is decoded into refused.
type badValue struct {
	path string          // where, e.g. "schedule.one_off[0].start"; "" for the whole body
	typ  reflect.Type    // what it was decoded into
	raw  json.RawMessage // as sent
	err  error           // why the type refused it
}

// reason says what the value must be, in a JSON author's words.
func (b *badValue) reason() string {
	var b64 base64.CorruptInputError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(b.err, &typ) && !decodesItself(b.typ):
		return fmt.Sprintf("must be %s, got %s", jsonType(b.typ), typ.Value)
	case b.typ == reflect.TypeFor[time.Time]():
		return "must be an RFC 3339 time string, e.g. 2026-01-02T15:04:05Z, got " + shown(b.raw)
	case errors.As(b.err, &b64):
		return fmt.Sprintf("must be base64 (standard, padded): bad data at byte %d", int64(b64))
	}
	return strings.TrimPrefix(b.err.Error(), "json: ")
}

// shown is raw JSON as an error message quotes it: cut short when long.
func shown(raw json.RawMessage) string {
	const most = 64
	if len(raw) <= most {
		return string(raw)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(raw[cut]) {
		cut--
	}
	return string(raw[:cut]) + "…"
}

// findBad walks raw, as it is decoded into a t, to the first value, in
// the body's order, that its type refuses on its own: one of the wrong
// JSON type (a string for a number, an object for a list), or one that a
// type decoding itself refuses; nil when none is. Paths name object keys
// joined by dots, and array indices in brackets.
func findBad(raw json.RawMessage, t reflect.Type, path string) *badValue {
	if t == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if decodesItself(t) {
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			return &badValue{path: path, typ: t, raw: raw, err: err}
		}
		return nil
	}
	if bad := wrongKind(raw, t, path); bad != nil {
		return bad
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := jsonFields(t)
		return findBadMember(raw, path, func(key string) reflect.Type { return fieldType(fields, key) })
	case reflect.Map:
		return findBadMember(raw, path, func(string) reflect.Type { return t.Elem() })
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for i, item := range items {
			if bad := findBad(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); bad != nil {
				return bad
			}
		}
	}
	return nil
}

// wrongKind is raw as a bad value when it is not of the JSON type a t
// takes: for a number, a string or true or false, whatever encoding/json
// refuses to decode into a t; for an object or a list, anything but one
// (or null). nil when it is of that type, whatever it holds.
func wrongKind(raw json.RawMessage, t reflect.Type, path string) *badValue {
	var want byte
	switch t.Kind() {
	case reflect.Interface:
		return nil
	case reflect.Struct, reflect.Map:
		want = '{'
	case reflect.Slice, reflect.Array:
		want = '['
	default:
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			return &badValue{path: path, typ: t, raw: raw, err: err}
		}
		return nil
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] == want || bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	got := map[byte]string{'{': "object", '[': "array", '"': "string", 't': "bool", 'f': "bool"}[trimmed[0]]
	if got == "" {
		got = "number"
	}
	return &badValue{path: path, typ: t, raw: raw, err: &json.UnmarshalTypeError{Value: got, Type: t}}
}

// findBadMember is findBad of each member of the JSON object raw, in
// order, as the type typeOf gives for its key (nil: a key the type does
// not know).
func findBadMember(raw json.RawMessage, path string, typeOf func(key string) reflect.Type) *badValue {
	var bad *badValue
	eachMember(raw, path, func(key, at string, v json.RawMessage) bool {
		if t := typeOf(key); t != nil {
			bad = findBad(v, t, at)
		}
		return bad == nil
	})
	return bad
}

// decodesItself reports whether encoding/json hands a value of t to t's
// own code, whose errors do not say where the value was: an Unmarshaler
// (a time) or base64 bytes.
func decodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(reflect.TypeFor[json.Unmarshaler]()) || p.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) ||
		t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8
}

// jsonFields maps the JSON names of a struct's fields, those of the
// structs it embeds included, to their types, as encoding/json names
// them; a field of the struct itself hides an embedded one's.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case tag == "-":
		case f.Anonymous && name == "" && ft.Kind() == reflect.Struct:
			embedded = append(embedded, ft)
		case f.IsExported():
			out[cmp.Or(name, f.Name)] = f.Type
		}
	}
	for _, e := range embedded {
		for name, ft := range jsonFields(e) {
			if _, ok := out[name]; !ok {
				out[name] = ft
			}
		}
	}
	return out
}

// fieldType is the type of the field key names, matched as encoding/json
// matches it: exactly, else whatever the case; nil for none.
func fieldType(fields map[string]reflect.Type, key string) reflect.Type {
	if t, ok := fields[key]; ok {
		return t
	}
	for name, t := range fields {
		if strings.EqualFold(name, key) {
			return t
		}
	}
	return nil
}

// jsonType names a Go type the way a JSON author thinks of it.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "base64 text"
		}
		return "an array"
	}
	if t == reflect.TypeFor[time.Time]() {
		return "an RFC 3339 time string"
	}
	return "an object"
}

// readJSON reads and decodes the request body into v.
func (a *api) readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r, a.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// noBody is fn for a route that takes no body: a request may send none,
// or an object with nothing in it ({}, as client.ChallengeNode does), but
// one that says something (a cancel's "reason") is refused as the bodies
// of the other routes are, naming the field it does not take, rather than
// left out unread while the request goes through as if it had said it.
func (a *api) noBody(fn handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.opts.MaxBodyBytes))
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return idlegrid.Errorf(idlegrid.ETOOLARGE, "request body is over the limit of %d bytes", tooLarge.Limit)
		} else if err != nil {
			return idlegrid.Errorf(idlegrid.EINVALID, "could not read the request body: %v", err)
		}
		if len(bytes.TrimSpace(body)) > 0 {
			if err := checkContentType(r); err != nil {
				return err
			}
			if err := decodeJSON(body, &struct{}{}); err != nil {
				return err
			}
		}
		return fn(w, r)
	}
}

// readAgentJSON reads and decodes an agent's request body into v, leaving
// out the fields this server does not know (decodeAgentJSON).
func (a *api) readAgentJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r, a.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	return decodeAgentJSON(body, v)
}

// writeJSON writes v with status. It fails only when v cannot be encoded,
// before anything is written; a caller that hangs up mid-answer is not an
// error of the handler's.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}

// writeNoContent answers 204.
func writeNoContent(w http.ResponseWriter) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// query checks a request's query parameters: each given at most once, and
// only the ones the route knows.
type query struct {
	values url.Values
}

func parseQuery(r *http.Request, known ...string) (query, error) {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return query{}, idlegrid.Invalid("query", "malformed query string: %v", err) // named as ?=5 is: no parameter to name
	}
	for name, vs := range values {
		if !idlegrid.IsText(name) || !idlegrid.IsText(vs[0]) {
			return query{}, notText(strings.ToValidUTF8(name, "?"))
		}
		if name == "" { // "?=5": no name to name it by
			return query{}, idlegrid.Invalid("query", "a parameter has no name (%q); name each, as in ?limit=10", "="+vs[0])
		}
		if !slices.Contains(known, name) {
			if len(known) == 0 {
				return query{}, idlegrid.Invalid(name, "unknown query parameter; this endpoint takes none")
			}
			return query{}, idlegrid.Invalid(name, "unknown query parameter; use %s", joinComma(known))
		}
		if len(vs) > 1 {
			return query{}, idlegrid.Invalid(name, "given %d times; give it once (lists are comma-separated)", len(vs))
		}
	}
	return query{values: values}, nil
}

func (q query) string(name string) string { return q.values.Get(name) }

// int returns the parameter as an integer in [min, max], or def when absent.
func (q query) int(name string, def, min, max int64) (int64, error) {
	s := q.values.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < min || n > max {
		return 0, idlegrid.Invalid(name, "must be an integer between %d and %d, got %q", min, max, s)
	}
	return n, nil
}

// limit returns the "limit" parameter; 0 lets the server choose.
func (q query) limit() (int, error) {
	n, err := q.int("limit", 0, 1, maxLimit)
	return int(n), err
}

// maxLimit caps the page size a caller may ask for.
const maxLimit = 10000

// words splits a comma-separated parameter, trimming each item and
// dropping blanks.
func (q query) words(name string) []string {
	var out []string
	for w := range strings.SplitSeq(q.values.Get(name), ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// list splits a comma-separated parameter and checks each item with valid.
func list[T ~string](q query, name string, valid []T) ([]T, error) {
	var out []T
	for _, item := range q.words(name) {
		v := T(item)
		if !slices.Contains(valid, v) {
			names := make([]string, len(valid))
			for i, x := range valid {
				names[i] = string(x)
			}
			return nil, idlegrid.Invalid(name, "unknown value %q; use a comma-separated list of %s", item, joinComma(names))
		}
		out = append(out, v)
	}
	return out, nil
}

var (
	jobStates   = idlegrid.JobStates
	leaseStates = idlegrid.LeaseStates
)

// nonNil makes an empty list encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
