package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

func TestStatusCode(t *testing.T) {
	tests := []struct {
		code string
		want int
	}{
		{idlegrid.EINVALID, 400},
		{idlegrid.EUNAUTHORIZED, 401},
		{idlegrid.EPAYMENT, 402},
		{idlegrid.EFORBIDDEN, 403},
		{idlegrid.ENOTFOUND, 404},
		{idlegrid.ECONFLICT, 409},
		{idlegrid.ETOOLARGE, 413},
		{idlegrid.EINTERNAL, 500},
		{idlegrid.EUNAVAILABLE, 503},
		{"made_up", 500},
	}
	for _, tt := range tests {
		if got := StatusCode(tt.code); got != tt.want {
			t.Errorf("StatusCode(%q) = %d, want %d", tt.code, got, tt.want)
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantField string // "" with wantErr: an error without a field
		wantErr   bool
	}{
		{name: "valid", body: `{"image":"a","gpus":2,"env":{"A":"b"}}`},
		{name: "trailing space is fine", body: "{\"gpus\":1}\n  "},
		{name: "unknown field", body: `{"gpus":1,"colour":"red"}`, wantField: "colour", wantErr: true},
		{name: "nested type", body: `{"env":{"A":1}}`, wantField: "env.A", wantErr: true},
		{name: "a list's item", body: `{"command":["python",2]}`, wantField: "command[1]", wantErr: true},
		{name: "an object for a list", body: `{"command":{"a":"b"}}`, wantField: "command", wantErr: true},
		{name: "a list's object", body: `{"datasets":[{"name":"a"},{"name":"b","size_gb":"9"}]}`, wantField: "datasets[1].size_gb", wantErr: true},
		{name: "string for number", body: `{"gpus":"1"}`, wantField: "gpus", wantErr: true},
		{name: "float for integer", body: `{"gpus":1.5}`, wantField: "gpus", wantErr: true},
		{name: "overflow", body: `{"duration_seconds":1e30}`, wantField: "duration_seconds", wantErr: true},
		{name: "money is an integer", body: `{"max_price_micros_per_gpu_hour":"1.50"}`, wantField: "max_price_micros_per_gpu_hour", wantErr: true},
		{name: "null is nothing", body: `null`},
		{name: "array", body: `[]`, wantErr: true},
		{name: "two values", body: `{} {}`, wantErr: true},
		{name: "garbage after", body: `{}x`, wantErr: true},
		{name: "empty", body: ``, wantErr: true},
		{name: "bad time", body: `{"deadline":"soon"}`, wantField: "deadline", wantErr: true},
		{name: "bad time, the same text elsewhere too", body: `{"name":"soon","deadline":"soon"}`,
			wantField: "deadline", wantErr: true},
		{name: "time not a string", body: `{"deadline":12345}`, wantField: "deadline", wantErr: true},
		{name: "time whatever the key's case", body: `{"Deadline":true}`, wantField: "Deadline", wantErr: true},
		{name: "time null is nothing", body: `{"deadline":null}`},
		{name: "bad time, escaped", body: `{"deadline":"so\u006fn"}`, wantField: "deadline", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var spec idlegrid.JobSpec
			err := decodeJSON([]byte(tt.body), &spec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err == nil {
				return
			}
			var e *idlegrid.Error
			if !errors.As(err, &e) || e.Code != idlegrid.EINVALID {
				t.Fatalf("err = %T %v, want an EINVALID *idlegrid.Error", err, err)
			}
			if e.Field != tt.wantField {
				t.Errorf("field = %q, want %q (%v)", e.Field, tt.wantField, err)
			}
		})
	}
}

// TestDecodeJSON_namesWhereATypeRefused: a value that a type decoding
// itself refuses (a time, base64 bytes) is named by its path in the body,
// through lists, maps and embedded structs, with the reason in a JSON
// author's words.
func TestDecodeJSON_namesWhereATypeRefused(t *testing.T) {
	tests := []struct {
		body      string
		into      any
		wantField string
		wantText  string
	}{
		{`{"leases":[{"lease_id":"a"},{"lease_id":"b","checkpoint_at":5}]}`, &idlegrid.HeartbeatRequest{},
			"leases[1].checkpoint_at", "must be an RFC 3339 time string, e.g. 2026-01-02T15:04:05Z, got 5"},
		{`{"lines":[{"seq":1,"at":"2026-01-02T15:04:05Z"},{"seq":2,"at":{}}]}`, &idlegrid.LogBatch{}, "lines[1].at", "got {}"},
		{`{"receipts":[{"lease_id":"l","start":1}]}`, &wire.ReceiptBatch{}, "receipts[0].start", "RFC 3339"},
		{`{"row_hashes":"not base64!","digest":"d"}`, &idlegrid.ChallengeAnswer{}, "row_hashes", "must be base64"},
		{`{"deadline":"tomorrow"}`, &idlegrid.Job{}, "deadline", `got "tomorrow"`},                                      // JobSpec is embedded
		{`{"name":"n","schedule":{"one_off":[{"start":[]}]}}`, &idlegrid.Node{}, "schedule.one_off[0].start", "got []"}, // so is Offer
		{`{"env":{"A":"b"},"deadline":"` + strings.Repeat("9", 100) + `"}`, &idlegrid.JobSpec{}, "deadline", "…"},
		// A value of the wrong JSON type is named the same way, and said in
		// a JSON author's words.
		{`{"schedule":{"mode":"windows","weekly":[{"days":["mon"],"start":"09:00","end":"17:00"},{"days":["tue"],"start":9}]}}`,
			&nodeScheduleRequest{}, "schedule.weekly[1].start", "must be a string, got number"},
		{`{"schedule":{"mode":"windows","weekly":[{"days":["mon"],"start":"09:00","end":"17:00"},"tue"]}}`,
			&nodeScheduleRequest{}, "schedule.weekly[1]", "must be an object, got string"},
		{`{"leases":[{"lease_id":"a","progress":"half"}]}`, &idlegrid.HeartbeatRequest{}, "leases[0].progress", "must be a number, got string"},
	}
	for _, tt := range tests {
		err := decodeJSON([]byte(tt.body), tt.into)
		var e *idlegrid.Error
		if !errors.As(err, &e) || e.Code != idlegrid.EINVALID || e.Field != tt.wantField {
			t.Errorf("decode %s into %T: %v, want EINVALID naming %s", tt.body, tt.into, err, tt.wantField)
		} else if !strings.Contains(e.Message, tt.wantText) || strings.Contains(e.Message, "UnmarshalJSON") || len(e.Message) > 200 {
			t.Errorf("decode %s into %T: %q, want a short reason with %q", tt.body, tt.into, e.Message, tt.wantText)
		}
	}
}

// TestDecodeAgentJSON: what an agent sends may hold fields this server does
// not know (a newer agent of the same protocol); the rest is checked as
// strictly as a client's body.
func TestDecodeAgentJSON(t *testing.T) {
	var hb idlegrid.HeartbeatRequest
	if err := decodeAgentJSON([]byte(`{"gpu_count_from_a_newer_agent":3}`), &hb); err != nil {
		t.Errorf("a field this server does not know: %v, want it left out", err)
	}
	for body, field := range map[string]string{`{"gpus":"x"}`: "gpus", `{} {}`: "", `[]`: ""} {
		var spec idlegrid.JobSpec
		var e *idlegrid.Error
		if err := decodeAgentJSON([]byte(body), &spec); !errors.As(err, &e) || e.Code != idlegrid.EINVALID || e.Field != field {
			t.Errorf("decodeAgentJSON(%s) = %v, want EINVALID naming %q", body, err, field)
		}
	}
}

// FuzzDecodeJSON checks that no body, however broken, is an internal error
// or a panic: a client's mistake is always a 4xx.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"image":"a","gpus":2}`, `{"gpus":"x"}`, `{"a":1}`, `[`, `{"deadline":"2026-01-02T15:04:05Z"}`, `{"env":{"A":"b"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var spec idlegrid.JobSpec
		err := decodeJSON(body, &spec)
		if err == nil {
			return
		}
		if code := idlegrid.ErrorCode(err); code != idlegrid.EINVALID {
			t.Errorf("decodeJSON(%q) = %v with code %q, want %q", body, err, code, idlegrid.EINVALID)
		}
		if StatusCode(idlegrid.ErrorCode(err)) != http.StatusBadRequest {
			t.Errorf("decodeJSON(%q) would answer %d", body, StatusCode(idlegrid.ErrorCode(err)))
		}
	})
}

// TestCheckNUL: a string holding the NUL character is named by its place
// in the body; text that only looks like one is not.
func TestCheckNUL(t *testing.T) {
	for body, want := range map[string]string{
		`{"name":"a"}`:                                       "",
		`{"name":"a\\u0000"}`:                                "", // a backslash, then "u0000"
		`{"name":"\u0000"}`:                                  "name",
		`{"a":1,"b":[2,{"c":"x"}],"d":"\u0000"}`:             "d",
		`{"lines":[{"seq":1},{"text":"x\u0000"}]}`:           "lines.text",
		`{"env":{"HOME":"/","PATH":"\u0000"}}`:               "env.PATH",
		`["\u0000"]`:                                         "request body",
		`{"offer":{"gpus":[{"uuid":"g","model":"\u0000"}]}}`: "offer.gpus.model",
	} {
		err := checkNUL([]byte(body))
		var e *idlegrid.Error
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want no fault", body, err)
		case want != "" && (!errors.As(err, &e) || e.Field != want || e.Code != idlegrid.EINVALID):
			t.Errorf("%s: %v, want EINVALID naming %q", body, err, want)
		}
	}
}

// TestDecodeJSON_membersGivenTwiceOrUnknown: a body that names a field
// twice (also in another case, which encoding/json reads into the same
// field) is refused rather than read as its last value says, so that what
// a proxy or a log reads of it is what the server does; and a field the
// API does not know, however deep, is named by its whole path.
func TestDecodeJSON_membersGivenTwiceOrUnknown(t *testing.T) {
	tests := []struct {
		body      string
		into      any
		wantField string
		wantText  string
	}{
		{`{"amount_micros":1,"amount_micros":1000000}`, &wire.PayoutRequest{}, "amount_micros", "given twice"},
		{`{"amount_micros":1,"AMOUNT_MICROS":1000000}`, &wire.PayoutRequest{}, "AMOUNT_MICROS", `as "amount_micros" and "AMOUNT_MICROS"`},
		{`{"image":"a","env":{"A":"1","B":"2","A":"3"}}`, &idlegrid.JobSpec{}, "env.A", "given twice"},
		{`{"schedule":{"mode":"windows","weekly":[{"days":["mon"],"start":"09:00","end":"17:00"},{"start":"09:00","start":"10:00"}]}}`,
			&nodeScheduleRequest{}, "schedule.weekly[1].start", "given twice"},
		{`{"schedule":{"mode":"windows","weekly":[{"days":["mon"],"start":"09:00","end":"17:00"},{"day":"mon"}]}}`,
			&nodeScheduleRequest{}, "schedule.weekly[1].day", "unknown field"},
		{`{"name":"n","datasets":[{"name":"a","nam":"b"}]}`, &idlegrid.JobSpec{}, "datasets[0].nam", "unknown field"},
		{"{\"name\":\"a\xff\"}", &wire.CreateAPIKeyRequest{}, "name", "UTF-8"},
	}
	for _, tt := range tests {
		err := decodeJSON([]byte(tt.body), tt.into)
		var e *idlegrid.Error
		if !errors.As(err, &e) || e.Code != idlegrid.EINVALID || e.Field != tt.wantField || !strings.Contains(e.Message, tt.wantText) {
			t.Errorf("decode %s into %T: %v, want EINVALID naming %s, saying %q", tt.body, tt.into, err, tt.wantField, tt.wantText)
		}
	}
	// A key's routing decodes on its own, naming fields as routing.<name>.
	if _, err := decodeRouting([]byte(`{"sort":"price","region":["eu-west"],"sort":"latency"}`)); fieldOf(err) != "routing.sort" {
		t.Errorf("a routing with sort twice: %v, want EINVALID naming routing.sort", err)
	}
	// Distinct keys, and the same key in distinct objects, are fine; an
	// agent's body is not held to this (decodeAgentJSON).
	for _, body := range []string{`{"image":"a","env":{"A":"1","a":"2"}}`, `{"datasets":[{"name":"a"},{"name":"b"}]}`} {
		var spec idlegrid.JobSpec
		if err := decodeJSON([]byte(body), &spec); err != nil {
			t.Errorf("decode %s: %v, want no fault", body, err)
		}
	}
}

// fieldOf is the field an *idlegrid.Error names, "" for any other error.
func fieldOf(err error) string {
	var e *idlegrid.Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}
