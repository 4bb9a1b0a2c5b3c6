package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid/internal/web"
)

// fakeAPI stands for the JSON API: it answers every request it gets with
// the path it saw, so a test can tell what reached it.
var fakeAPI = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTeapot)
	json.NewEncoder(w).Encode(map[string]string{"api": r.Method + " " + r.URL.Path})
})

func mustGet(tb testing.TB, h http.Handler, method, path string) *httptest.ResponseRecorder {
	tb.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func TestHandler(t *testing.T) {
	h := web.Handler(fakeAPI)
	tests := []struct {
		name, method, path string
		status             int
		contentType        string // prefix
		body               string // substring
	}{
		{"the page", "GET", "/", 200, "text/html", `<label for="key">API key</label>`},
		{"the page loads its script", "GET", "/", 200, "text/html", `<script src="/assets/app.js" defer></script>`},
		{"the script", "GET", "/assets/app.js", 200, "text/javascript", "sessionStorage"},
		{"the style", "GET", "/assets/app.css", 200, "text/css", ":focus-visible"},
		{"HEAD of the page", "HEAD", "/", 200, "text/html", ""},
		{"no listing", "GET", "/assets/", 404, "", ""},
		{"no index.html twice", "GET", "/assets/index.html", 404, "", ""},
		{"no such asset", "GET", "/assets/nope.js", 404, "", ""},
		{"the API", "GET", "/v1/jobs", http.StatusTeapot, "application/json", `"GET /v1/jobs"`},
		{"a POST to / goes to the API", "POST", "/", http.StatusTeapot, "application/json", `"POST /"`},
		{"an unknown path goes to the API", "GET", "/nope", http.StatusTeapot, "application/json", `"GET /nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := mustGet(t, h, tt.method, tt.path)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if got := rec.Header().Get("Content-Type"); !strings.HasPrefix(got, tt.contentType) {
				t.Errorf("Content-Type %q, want %q…", got, tt.contentType)
			}
			if !strings.Contains(rec.Body.String(), tt.body) {
				t.Errorf("body lacks %q:\n%.300s", tt.body, rec.Body)
			}
		})
	}
}

func TestHandler_security(t *testing.T) {
	h := web.Handler(fakeAPI)
	for _, path := range []string{"/", "/assets/app.js"} {
		rec := mustGet(t, h, "GET", path)
		csp := rec.Header().Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: Content-Security-Policy %q lacks %q", path, csp, want)
			}
		}
		if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q, want nosniff", path, got)
		}
	}
}

// TestAssets_selfContained checks that the page needs nothing from outside
// the server and nothing the Content-Security-Policy would block.
func TestAssets_selfContained(t *testing.T) {
	h := web.Handler(fakeAPI)
	for _, path := range []string{"/", "/assets/app.js", "/assets/app.css"} {
		body, _ := io.ReadAll(mustGet(t, h, "GET", path).Body)
		text := string(body)
		for _, bad := range []string{"http://", "https://", "//cdn", " style=\"", "onclick=", "onload=", "eval("} {
			if strings.Contains(text, bad) {
				t.Errorf("%s contains %q", path, bad)
			}
		}
	}
}
