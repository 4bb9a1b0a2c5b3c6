package gateway

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// TestWriteError_internalsStayInTheLog: an internal error (a panic's
// text, a driver's message) reaches the renter as "internal error" with
// the request's ID to quote, never its words.
func TestWriteError_internalsStayInTheLog(t *testing.T) {
	g := &Gateway{cfg: Config{StatusCode: func(string) int { return http.StatusInternalServerError }}, log: slog.New(slog.DiscardHandler)}
	for _, err := range []error{
		idlegrid.Errorf(idlegrid.EINTERNAL, "panic: runtime error: index out of range [3] with length 3"),
		errors.New("pq: password authentication failed for user \"idlegrid\""),
	} {
		w := httptest.NewRecorder()
		w.Header().Set("X-Request-Id", "req_test")
		g.writeError(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil), err)
		body := w.Body.String()
		if strings.Contains(body, "panic") || strings.Contains(body, "password") || !strings.Contains(body, "req_test") {
			t.Errorf("%v answered %s; want internal error naming the request, nothing of the cause", err, body)
		}
	}
}
