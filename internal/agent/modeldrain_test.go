package agent

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestModels_drain: once the agent leaves, a new inference request is
// refused with a 429, on which the gateway tries another provider, while
// the one in flight goes on to its answer; the wait for it ends when it
// has, or at the deadline, saying how many are still in flight.
func TestModels_drain(t *testing.T) {
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-release
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer ts.Close()
	ms := newModels(&Config{Models: []ModelConfig{{Name: "m", Upstream: ts.URL + "/v1", InputPrice: "1", OutputPrice: "1", MaxConcurrency: 4}}})
	ask := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, idlegrid.InferencePath+"chat/completions", strings.NewReader(`{"model":"m","messages":[]}`))
		r.Header.Set(idlegrid.ModelHeader, "m")
		w := httptest.NewRecorder()
		ms.ServeHTTP(w, r)
		return w
	}
	answered := make(chan *httptest.ResponseRecorder, 1)
	go func() { answered <- ask() }()
	for ms.active.N() == 0 {
		time.Sleep(time.Millisecond)
	}
	ms.leave()
	if w := ask(); w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "stopping") {
		t.Errorf("a request after leave: %d %s, want 429 saying the agent is stopping", w.Code, w.Body)
	}
	if n := ms.waitDrained(time.Now().Add(20 * time.Millisecond)); n != 1 {
		t.Errorf("waitDrained with the request held = %d, want 1 still in flight", n)
	}
	close(release)
	if n := ms.waitDrained(time.Now().Add(time.Minute)); n != 0 {
		t.Errorf("waitDrained once the answer came = %d, want 0", n)
	}
	if w := <-answered; w.Code != http.StatusOK {
		t.Errorf("the request in flight when the agent left: %d %s, want its answer", w.Code, w.Body)
	}
}

// TestAgent_drainWait: a stop lets the requests in flight run on for the
// config's model_drain_wait (by default DefaultModelDrainWait), a
// hand-over for at most handOverDrainWait, whose next agent must heartbeat
// before the server gives the node up.
func TestAgent_drainWait(t *testing.T) {
	for _, tt := range []struct {
		config, stop, handOver time.Duration
	}{
		{0, DefaultModelDrainWait, handOverDrainWait},
		{5 * time.Minute, 5 * time.Minute, handOverDrainWait},
		{3 * time.Second, 3 * time.Second, 3 * time.Second},
	} {
		a := &Agent{models: newModels(&Config{ModelDrainWait: tt.config})}
		if got := a.drainWait(false); got != tt.stop {
			t.Errorf("model_drain_wait %v: a stop waits %v, want %v", tt.config, got, tt.stop)
		}
		if got := a.drainWait(true); got != tt.handOver {
			t.Errorf("model_drain_wait %v: a hand-over waits %v, want %v", tt.config, got, tt.handOver)
		}
	}
}
