package agent

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// brokenBody gives its bytes, then fails as a connection that broke off.
type brokenBody struct{ r io.Reader }

func (b brokenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, errors.New("connection reset by peer")
	}
	return n, err
}

func (brokenBody) Close() error { return nil }

// TestAnswerWhole: a non-streamed answer passes on whole, with its
// length; one larger than the agent holds passes on as it comes, every
// byte; one the model server breaks off is a 502 in OpenAI's format, so
// that the gateway tries another provider.
func TestAnswerWhole(t *testing.T) {
	answer := func(body io.ReadCloser) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		answerWhole(w, &http.Response{StatusCode: http.StatusOK, Body: body})
		return w
	}
	t.Run("whole", func(t *testing.T) {
		w := answer(io.NopCloser(strings.NewReader(`{"id":"chatcmpl-1"}`)))
		if w.Code != http.StatusOK || w.Body.String() != `{"id":"chatcmpl-1"}` || w.Header().Get("Content-Length") != "19" {
			t.Errorf("%d %q, Content-Length %q; want 200, the answer and its length", w.Code, w.Body, w.Header().Get("Content-Length"))
		}
	})
	t.Run("larger than held", func(t *testing.T) {
		big := bytes.Repeat([]byte("x"), maxWholeAnswer+12345)
		w := answer(io.NopCloser(bytes.NewReader(big)))
		if w.Code != http.StatusOK || !bytes.Equal(w.Body.Bytes(), big) || w.Header().Get("Content-Length") != "" {
			t.Errorf("%d, %d bytes, Content-Length %q; want 200, all %d bytes, no length", w.Code, w.Body.Len(), w.Header().Get("Content-Length"), len(big))
		}
	})
	t.Run("broken off", func(t *testing.T) {
		w := answer(brokenBody{strings.NewReader(`{"id":"chatcmpl-1","choi`)})
		if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), `"type":"server_error"`) ||
			!strings.Contains(w.Body.String(), "broke off: connection reset by peer") {
			t.Errorf("%d %s; want a 502 server_error saying the answer broke off", w.Code, w.Body)
		}
	})
}
