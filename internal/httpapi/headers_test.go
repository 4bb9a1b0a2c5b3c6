package httpapi_test

import (
	"bufio"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/httpapi"
)

// checkHardened fails unless h carries the headers every answer of the
// API has: a browser must not sniff it into another type, nor frame it.
func checkHardened(t *testing.T, what string, h http.Header) {
	t.Helper()
	for name, want := range map[string]string{
		"X-Content-Type-Options":  "nosniff",
		"Content-Security-Policy": "frame-ancestors 'none'",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s: %s = %q, want %q", what, name, got, want)
		}
	}
}

// Every answer, the API's and the gateway's, successes and errors alike,
// is marked nosniff and unframeable; the API's stay uncached.
func TestAPI_securityHeaders(t *testing.T) {
	gateway := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[]}`))
	})
	f := mustOpen(t, httpapi.Options{Gateway: gateway})
	tests := []struct {
		name, method, path, secret string
		status                     int
		noStore                    bool // the API's own answers are never cached
	}{
		{"health", "GET", "/v1/healthz", "", http.StatusOK, true},
		{"a listing", "GET", "/v1/jobs", f.AdminSecret, http.StatusOK, true},
		{"no key", "GET", "/v1/jobs", "", http.StatusUnauthorized, true},
		{"no such endpoint", "GET", "/v1/nope", f.AdminSecret, http.StatusNotFound, true},
		{"the wrong method", "DELETE", "/v1/jobs", f.AdminSecret, http.StatusBadRequest, true},
		{"metrics", "GET", "/metrics", f.AdminSecret, http.StatusOK, true},
		{"the gateway", "GET", "/v1/models", f.AdminSecret, http.StatusOK, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustDo(t, request(t, tt.method, f.URL+tt.path, tt.secret, ""))
			if a.Status != tt.status {
				t.Fatalf("%s %s: %d %s, want %d", tt.method, tt.path, a.Status, a.Body, tt.status)
			}
			checkHardened(t, tt.method+" "+tt.path, a.Header)
			if got := a.Header.Get("Cache-Control"); tt.noStore && got != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", got)
			}
		})
	}
}

// A stream of server-sent events through the API still flows an event at
// a time, with the headers: the gateway writes its second event only once
// the client has read the first, so a stream held back until its end
// would never finish.
func TestAPI_securityHeadersStream(t *testing.T) {
	read := make(chan struct{})
	gateway := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("data: one\n\n"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush the first event: %v", err)
			return
		}
		select {
		case <-read:
		case <-r.Context().Done():
			return
		}
		w.Write([]byte("data: two\n\ndata: [DONE]\n\n"))
	})
	f := mustOpen(t, httpapi.Options{Gateway: gateway})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := request(t, http.MethodPost, f.URL+"/v1/chat/completions", f.AdminSecret, `{"model":"m","stream":true}`)
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	checkHardened(t, "a stream", resp.Header)
	if got := resp.Header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("a stream's Cache-Control = %q, want the gateway's no-cache", got)
	}
	lines := bufio.NewScanner(resp.Body)
	var got []string
	for lines.Scan() {
		if lines.Text() == "" {
			continue
		}
		got = append(got, lines.Text())
		if len(got) == 1 {
			close(read) // the first event came before the stream's end
		}
	}
	if err := lines.Err(); err != nil {
		t.Fatalf("read the stream: %v (got %q)", err, got)
	}
	want := []string{"data: one", "data: two", "data: [DONE]"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("events %q, want %q", got, want)
	}
}
