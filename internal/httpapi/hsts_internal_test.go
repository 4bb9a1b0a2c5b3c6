package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestHardened_hsts: an answer the server sends over HTTPS itself tells
// the browser to use HTTPS only; one over plain HTTP (a proxy in front
// ends TLS, or a developer's machine) says nothing of it.
func TestHardened_hsts(t *testing.T) {
	h := hardened(http.NotFoundHandler())
	for target, want := range map[string]string{
		"https://market.example.com/v1/healthz": "max-age=31536000",
		"http://127.0.0.1:7070/v1/healthz":      "",
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
		if got := w.Header().Get("Strict-Transport-Security"); got != want {
			t.Errorf("%s: Strict-Transport-Security %q, want %q", target, got, want)
		}
	}
}
