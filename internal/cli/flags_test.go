package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestServerAddr(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:7070":            "http://127.0.0.1:7070",
		"http://127.0.0.1:7070/v1":         "http://127.0.0.1:7070",
		"http://127.0.0.1:7070/v1/":        "http://127.0.0.1:7070",
		"127.0.0.1:7070/v1":                "127.0.0.1:7070",
		"https://grid.example.com/api/v1":  "https://grid.example.com/api",
		"https://grid.example.com/v10":     "https://grid.example.com/v10",
		"https://grid.example.com/api/xv1": "https://grid.example.com/api/xv1",
		"http:///v1":                       "http:///v1",
	} {
		if got := serverAddr(in); got != want {
			t.Errorf("serverAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRemote_addressWithV1: an address written as the API's URLs are,
// with /v1, reaches the API, rather than /v1/v1.
func TestRemote_addressWithV1(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/v1/jobs" {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "not_found", "message": "no such endpoint: GET " + r.URL.Path}})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"jobs": []any{}})
	}))
	defer ts.Close()
	for _, vars := range []map[string]string{
		{"IDLEGRID_ADDR": ts.URL + "/v1", "IDLEGRID_KEY": "k"},
		{"IDLEGRID_ADDR": ts.URL + "/v1/", "IDLEGRID_KEY": "k"},
	} {
		if r := run(t, vars, "job", "ls"); r.code != 0 {
			t.Errorf("job ls with IDLEGRID_ADDR=%s: %s", vars["IDLEGRID_ADDR"], r)
		}
	}
	if r := run(t, map[string]string{"IDLEGRID_KEY": "k"}, "job", "ls", "--addr", ts.URL+"/v1"); r.code != 0 {
		t.Errorf("job ls --addr %s/v1: %s", ts.URL, r)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(paths, " "); got != "/v1/jobs /v1/jobs /v1/jobs" {
		t.Errorf("paths asked: %s, want /v1/jobs each time", got)
	}
}

// TestRemote_addressWithPath: an address with a path of its own (the
// dashboard's page, pasted from the browser) reaches no endpoint; the
// hint says to check the address, not an ID no one gave.
func TestRemote_addressWithPath(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "not_found", "message": "no such endpoint: GET " + r.URL.Path + " (see docs/api.md)"}})
	}))
	defer ts.Close()
	r := run(t, map[string]string{"IDLEGRID_ADDR": ts.URL + "/dashboard", "IDLEGRID_KEY": "k"}, "job", "ls")
	if r.code != 1 || !strings.Contains(r.err, "no such endpoint: GET /dashboard/v1/jobs") ||
		!strings.Contains(r.err, "check the server address (--addr or IDLEGRID_ADDR)") || strings.Contains(r.err, "check the ID") {
		t.Fatalf("job ls against an address with a path: %s\nwant exit 1 and a hint to check the address", r)
	}
}

// TestRemote_keyWithLineBreak: a key read from a file with its line break
// (CRLF: "$(cat key)" keeps the "\r") is the key; one with a control
// character inside is refused, naming where it came from, not sent as a
// server that could not be reached.
func TestRemote_keyWithLineBreak(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jobs": []any{}})
	}))
	defer ts.Close()
	if r := run(t, map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "igk_abc\r\n"}, "job", "ls"); r.code != 0 {
		t.Errorf("job ls with a key ending in CRLF: %s", r)
	}
	if r := run(t, map[string]string{"IDLEGRID_ADDR": ts.URL}, "job", "ls", "--key", "igk_abc\r"); r.code != 0 {
		t.Errorf("job ls --key ending in CR: %s", r)
	}
	r := run(t, map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "igk_a\x1bbc"}, "job", "ls")
	if r.code != 1 || !strings.HasPrefix(r.err, "idlegrid: IDLEGRID_KEY: the API key holds a space or a control character") || strings.Contains(r.err, "cannot reach") {
		t.Errorf("job ls with a control character in the key: %s", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(auth, " "); got != "Bearer igk_abc Bearer igk_abc" {
		t.Errorf("keys sent: %q, want igk_abc twice", got)
	}
}
