package gateway_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid/internal/gateway"
)

// mustBusyProvider starts one provider of the test model that serves one
// request at a time, and holds it busy with a stream that stalls after its
// first chunk; the stream ends when the mock is freed. It returns the
// fixture and the stalled stream's outcome.
func mustBusyProvider(t *testing.T, tune func(*gateway.Config)) (*pair, <-chan error) {
	t.Helper()
	f := mustFixture(t, tune)
	up := mustMock(t, "alpha")
	f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 1))
	f.waitProviders(t, testModel, 1)
	p := &pair{fixture: f, A: up}
	up.set(faultStall)
	stalled := make(chan error, 1)
	go func() { _, err := p.stream(t); stalled <- err }()
	eventually(t, "the stalled stream to reach the model server", func() string {
		if up.Calls.Load() == 0 {
			return "not yet"
		}
		return ""
	})
	return p, stalled
}

// chatLater sends a chat completion in the background and returns where
// its answer's text, or its error, arrives.
func chatLater(t *testing.T, p *pair) <-chan string {
	answered := make(chan string, 1)
	go func() {
		got, _, err := p.chat(t)
		if err != nil {
			answered <- describe(err)
			return
		}
		answered <- got.Choices[0].Message.Content
	}()
	return answered
}

// waiting reads how many requests wait for the test model.
func waiting(t *testing.T, f *fixture) int {
	t.Helper()
	var st gateway.StatsResponse
	c := f.sdk(f.RenterKey)
	if err := c.Get(t.Context(), "inference/stats", nil, &st); err != nil {
		t.Fatal(err)
	}
	return st.Waiting[testModel]
}

// Requests that find every provider at its max_concurrency wait for room,
// without calling the busy provider, and are all served, one at a time,
// as the requests before them end.
func TestGateway_queueWaitsForRoom(t *testing.T) {
	p, stalled := mustBusyProvider(t, nil)
	const waiters = 3
	var answers []<-chan string
	for range waiters {
		answers = append(answers, chatLater(t, p))
	}
	eventually(t, "the requests to wait", func() string {
		if n := waiting(t, p.fixture); n != waiters {
			return fmt.Sprintf("%d waiting", n)
		}
		return ""
	})
	if calls := p.A.Calls.Load(); calls != 1 {
		t.Errorf("the busy provider got %d calls, want only the stalled one: a waiting request is not sent to be refused", calls)
	}
	p.A.set(faultNone)
	p.A.free()
	<-stalled
	for _, answered := range answers {
		select {
		case got := <-answered:
			if got != "Hello from alpha." {
				t.Errorf("a waiting request got %q, want alpha's answer", got)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a waiting request was not served after the provider had room")
		}
	}
	if calls := p.A.Calls.Load(); calls != 1+waiters {
		t.Errorf("the provider got %d calls, want %d: each waiter once", calls, 1+waiters)
	}
	if n := waiting(t, p.fixture); n != 0 {
		t.Errorf("%d requests still wait, want none", n)
	}
}

// A request waits at most QueueTimeout, then is refused with 429 and a
// Retry-After; and at most MaxQueue wait per model, the rest refused at once.
func TestGateway_queueLimits(t *testing.T) {
	p, stalled := mustBusyProvider(t, func(c *gateway.Config) {
		c.QueueTimeout, c.MaxQueue = 300*time.Millisecond, 1
	})
	defer func() { p.A.free(); <-stalled }()

	_, _, err := p.chat(t)
	if e := apiError(t, err); e.StatusCode != 429 || e.Response.Header.Get("Retry-After") != "1" || !strings.Contains(e.Message, "stayed at capacity for 300ms") {
		t.Errorf("after the queue timeout: %d (%s), Retry-After %q; want 429 naming the wait, retry after 1 s",
			e.StatusCode, e.Message, e.Response.Header.Get("Retry-After"))
	}

	first := make(chan error, 1)
	go func() { _, _, err := p.chat(t); first <- err }()
	eventually(t, "a request to wait", func() string {
		if waiting(t, p.fixture) != 1 {
			return "none waits yet"
		}
		return ""
	})
	_, _, err = p.chat(t)
	if e := apiError(t, err); e.StatusCode != 429 || !strings.Contains(e.Message, "1 requests wait already") {
		t.Errorf("beyond MaxQueue: %d (%s); want 429 at once, saying how many wait", e.StatusCode, e.Message)
	}
	if e := apiError(t, <-first); e.StatusCode != 429 {
		t.Errorf("the waiting request: %d (%s), want 429 after its timeout", e.StatusCode, e.Message)
	}
	if calls := p.A.Calls.Load(); calls != 1 {
		t.Errorf("the busy provider got %d calls, want only the stalled one", calls)
	}
}

// With a negative QueueTimeout nothing waits: the request goes to the busy
// provider, which refuses it.
func TestGateway_queueOff(t *testing.T) {
	p, stalled := mustBusyProvider(t, func(c *gateway.Config) { c.QueueTimeout = -1 })
	defer func() { p.A.free(); <-stalled }()
	_, _, err := p.chat(t)
	if e := apiError(t, err); e.StatusCode != 429 || p.A.Calls.Load() != 1 {
		t.Errorf("%d (%s), provider calls %d; want the agent's 429 without reaching the model server", e.StatusCode, e.Message, p.A.Calls.Load())
	}
}

// A provider that joins while requests wait serves them: waiters plan
// again every second, not only when a slot frees.
func TestGateway_queueJoiner(t *testing.T) {
	p, stalled := mustBusyProvider(t, func(c *gateway.Config) { c.QueueTimeout = 15 * time.Second })
	defer func() { p.A.free(); <-stalled }()
	answered := chatLater(t, p)
	eventually(t, "the request to wait", func() string {
		if n := waiting(t, p.fixture); n != 1 {
			return fmt.Sprintf("%d waiting", n)
		}
		return ""
	})
	beta := mustMock(t, "beta")
	p.startAgent(t, "beta", "us-east", "US", beta.model(testModel, "30", "60", 1))
	select {
	case got := <-answered:
		if got != "Hello from beta." {
			t.Errorf("the waiting request got %q, want beta's answer", got)
		}
	case <-time.After(14 * time.Second):
		t.Fatal("the waiting request was not served by the provider that joined")
	}
}
