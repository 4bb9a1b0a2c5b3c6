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
	return checkNUL(body)
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
	eachString(body, func(path, s string) bool {
		field, found = path, strings.IndexByte(s, 0) >= 0
		return !found
	})
	if found {
		return notText(cmp.Or(field, "request body"))
	}
	return nil
}

// eachString calls visit with each string value in body, in order, and
// where it is: the keys of the objects it is in, joined by dots (arrays add
// no name), "" at the top; it stops when visit returns false.
func eachString(body []byte, visit func(path, s string) bool) {
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
			if !visit(strings.Join(keys, "."), t) {
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
		return idlegrid.Invalid(typ.Field, "must be %s, got %s", jsonType(typ.Type), typ.Value)
	case errors.As(err, &e):
		return e // from a type that decodes itself and names its own field (RoutingMaxPrice)
	}
	// encoding/json reports unknown fields only as text.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
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
	switch {
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
// the body's order, that a type decoding itself refuses on its own; nil
// when none does. Paths name object keys joined by dots, and array
// indices in brackets.
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

// findBadMember is findBad of each member of the JSON object raw, in
// order, as the type typeOf gives for its key (nil: a key the type does
// not know).
func findBadMember(raw json.RawMessage, path string, typeOf func(key string) reflect.Type) *badValue {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		var v json.RawMessage
		if err != nil || !ok || dec.Decode(&v) != nil {
			return nil
		}
		t := typeOf(key)
		if t == nil {
			continue
		}
		if path != "" {
			key = path + "." + key
		}
		if bad := findBad(v, t, key); bad != nil {
			return bad
		}
	}
	return nil
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
		return query{}, idlegrid.Errorf(idlegrid.EINVALID, "malformed query string: %v", err)
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
