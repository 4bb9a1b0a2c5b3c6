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
