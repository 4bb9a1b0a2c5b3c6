package openai_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/idlegrid/idlegrid/internal/openai"
)

func TestSetField(t *testing.T) {
	for _, tt := range []struct{ name, body, want string }{
		{"replaces", `{"model":"a","x":1}`, `{"model":"b","x":1}`},
		{"keeps the rest byte for byte", `{ "x" : [1, {"model":"a"}],  "model" :"a" , "y":"<&>" }`, `{ "x" : [1, {"model":"a"}],  "model" :"b" , "y":"<&>" }`},
		{"every occurrence", `{"model":1,"model":{"m":"}"}}`, `{"model":"b","model":"b"}`},
		{"an escaped key", `{"mod\u0065l":"a"}`, `{"mod\u0065l":"b"}`},
		{"adds", `{"x":"\"}"}`, `{"x":"\"}","model":"b"}`},
		{"adds to an empty object", ` { } `, ` { "model":"b"} `},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := openai.SetField([]byte(tt.body), "model", []byte(`"b"`))
			if err != nil || string(got) != tt.want {
				t.Errorf("SetField(%s) = %s, %v; want %s", tt.body, got, err, tt.want)
			}
		})
	}
	for _, body := range []string{``, `null`, `[{"model":"a"}]`, `"{}"`, `{"model":"a"`, `{"model":"a"} x`} {
		if got, err := openai.SetField([]byte(body), "model", []byte(`"b"`)); !errors.Is(err, openai.ErrNotObject) {
			t.Errorf("SetField(%q) = %s, %v; want ErrNotObject", body, got, err)
		}
	}
}

func TestDeleteField(t *testing.T) {
	for _, tt := range []struct{ name, body, want string }{
		{"the first", `{"provider":{"a":"}"},"model":"m"}`, `{"model":"m"}`},
		{"the last", `{ "model": "m", "provider": 1 }`, `{"model": "m"}`},
		{"every occurrence", `{"provider":1,"model":"m","provider":2,"x":[]}`, `{"model":"m","x":[]}`},
		{"the only one", `{"provider":1}`, `{}`},
		{"absent", `{"model":"m"}`, `{"model":"m"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := openai.DeleteField([]byte(tt.body), "provider")
			if err != nil || string(got) != tt.want {
				t.Errorf("DeleteField(%s) = %s, %v; want %s", tt.body, got, err, tt.want)
			}
		})
	}
	if _, err := openai.DeleteField([]byte(`[1]`), "provider"); !errors.Is(err, openai.ErrNotObject) {
		t.Errorf("DeleteField of an array: %v, want ErrNotObject", err)
	}
}

// FuzzSetField checks SetField and DeleteField against decoding into a
// map, changing the field and encoding again.
func FuzzSetField(f *testing.F) {
	for _, s := range []string{`{"model":"a","x":[1,{"y":"z"}]}`, `{}`, `{"a":"\\\"","model":null}`, `[1]`, `{"m":1e5,"n":true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var want map[string]json.RawMessage
		decodes := json.Unmarshal(body, &want) == nil && want != nil
		got, err := openai.SetField(body, "model", []byte(`"b"`))
		if !decodes {
			if err == nil {
				t.Fatalf("SetField(%q) = %s, want an error", body, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("SetField(%q): %v", body, err)
		}
		want["model"] = json.RawMessage(`"b"`)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(got, &m); err != nil {
			t.Fatalf("SetField(%q) = %s, not an object: %v", body, got, err)
		}
		wantJSON, _ := json.Marshal(want)
		gotJSON, _ := json.Marshal(m)
		if string(gotJSON) != string(wantJSON) {
			t.Fatalf("SetField(%q) = %s, want the fields %s", body, got, wantJSON)
		}
		delete(want, "model")
		if got, err = openai.DeleteField(body, "model"); err != nil {
			t.Fatalf("DeleteField(%q): %v", body, err)
		}
		m = nil
		if err := json.Unmarshal(got, &m); err != nil {
			t.Fatalf("DeleteField(%q) = %s, not an object: %v", body, got, err)
		}
		wantJSON, _ = json.Marshal(want)
		gotJSON, _ = json.Marshal(m)
		if string(gotJSON) != string(wantJSON) {
			t.Fatalf("DeleteField(%q) = %s, want the fields %s", body, got, wantJSON)
		}
	})
}
