package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/gateway"
)

// TestGateway_agentStopFinishesRequests: an agent that stops lets the
// inference request it is proxying run to its answer before its session
// with the server closes, rather than cut it.
func TestGateway_agentStopFinishesRequests(t *testing.T) {
	f := mustFixture(t, nil)
	up := mustMock(t, "alpha")
	node := f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 4))
	f.waitProviders(t, testModel, 1)
	answered := heldChat(t, f, up)
	stopped := stopping(node)
	time.Sleep(300 * time.Millisecond) // the agent stops meanwhile, but for the request
	up.free()
	select {
	case a := <-answered:
		if a.err != nil {
			t.Fatalf("the request in flight when its node's agent stopped: %v, want its answer", a.err)
		}
		if !strings.Contains(a.content, "Hello from alpha") {
			t.Errorf("answer %q, want the model server's", a.content)
		}
	case <-time.After(time.Minute):
		t.Fatal("no answer a minute after the model server's")
	}
	<-stopped
}

// chatOutcome is a chat's answer, or its error.
type chatOutcome struct {
	content string
	err     error
}

// heldChat sends the renter's chat in the background to up, which it
// sets to hold it, and returns once up holds it; the channel has its
// outcome.
func heldChat(t *testing.T, f *fixture, up *mock) <-chan chatOutcome {
	t.Helper()
	up.set(faultHold)
	answered := make(chan chatOutcome, 1)
	go func() {
		sdk := f.sdk(f.RenterKey)
		c, err := sdk.Chat.Completions.New(context.Background(), chatParams("hi"))
		var a chatOutcome
		if a.err = err; err == nil && len(c.Choices) > 0 {
			a.content = c.Choices[0].Message.Content
		}
		answered <- a
	}()
	eventually(t, "the request at the model server", func() string {
		if up.Calls.Load() == 0 {
			return "not yet"
		}
		return ""
	})
	return answered
}

// stopping stops node's agent in the background; the channel closes
// when it has stopped.
func stopping(node *testAgent) <-chan struct{} {
	stopped := make(chan struct{})
	go func() {
		node.stop()
		close(stopped)
	}()
	return stopped
}

// TestGateway_agentStopCutsRequestsAfterDrainWait: the agent's
// model_drain_wait bounds how long a stop waits for the request in
// flight: past it the agent's session closes, cutting the request, and
// the agent has stopped though the model server still holds it.
func TestGateway_agentStopCutsRequestsAfterDrainWait(t *testing.T) {
	f := mustFixture(t, nil)
	up := mustMock(t, "alpha")
	node := f.startAgentWith(t, func(c *agent.Config) { c.ModelDrainWait = 300 * time.Millisecond },
		"alpha", "eu-west", "EU", up.model(testModel, "10", "20", 4))
	f.waitProviders(t, testModel, 1)
	defer up.free()
	answered := heldChat(t, f, up)
	select {
	case <-stopping(node):
	case <-time.After(time.Minute):
		t.Fatal("the agent had not stopped a minute past its model_drain_wait")
	}
	select {
	case a := <-answered:
		if a.err == nil {
			t.Fatal("the request held at the model server got an answer, want it cut by the agent's stop")
		}
	case <-time.After(time.Minute):
		t.Fatal("the request was neither answered nor cut a minute after its agent stopped")
	}
}

// TestGateway_agentHandOverFinishesRequests: an agent asked to hand over
// to the next one (an upgrade in place) withdraws its models from its
// node's offer while it still heartbeats, so that new requests go to
// other providers, and waits for the request it is proxying, however
// long it runs, before it leaves: the request gets its answer.
func TestGateway_agentHandOverFinishesRequests(t *testing.T) {
	f := mustFixture(t, nil)
	alpha, beta := mustMock(t, "alpha"), mustMock(t, "beta")
	node := f.startAgent(t, "alpha", "eu-west", "EU", alpha.model(testModel, "10", "20", 4))
	f.waitProviders(t, testModel, 1)
	alpha.set(faultHold)
	answered := make(chan string, 1)
	go func() {
		sdk := f.sdk(f.RenterKey)
		c, err := sdk.Chat.Completions.New(context.Background(), chatParams("hi"))
		switch {
		case err != nil:
			answered <- err.Error()
		case len(c.Choices) == 0:
			answered <- "no choices"
		default:
			answered <- c.Choices[0].Message.Content
		}
	}()
	eventually(t, "the request at alpha's model server", func() string {
		if alpha.Calls.Load() == 0 {
			return "not yet"
		}
		return ""
	})
	f.startAgent(t, "beta", "eu-west", "EU", beta.model(testModel, "10", "20", 4))
	f.waitProviders(t, testModel, 2)

	if err := node.a.HandOver(); err != nil {
		t.Fatal(err)
	}
	f.waitProviders(t, testModel, 1) // alpha's offer no longer lists the model
	sdk := f.sdk(f.RenterKey)
	c, err := sdk.Chat.Completions.New(context.Background(), chatParams("hi"))
	if err != nil || len(c.Choices) == 0 || !strings.Contains(c.Choices[0].Message.Content, "Hello from beta") {
		t.Errorf("a request during alpha's hand-over: %v %+v, want beta's answer", err, c)
	}
	if got := alpha.Calls.Load(); got != 1 {
		t.Errorf("alpha's model server had %d requests, want only the one in flight before the hand-over", got)
	}
	time.Sleep(500 * time.Millisecond)
	select {
	case a := <-answered:
		t.Fatalf("the held request ended before its model server answered: %s", a)
	case <-node.done:
		t.Fatalf("alpha's agent handed over (%v) with a request in flight", node.runErr)
	default:
	}
	if n, err := f.Store.FindNode(context.Background(), node.NodeID); err != nil {
		t.Fatal(err)
	} else if n.State != idlegrid.NodeOnline {
		t.Errorf("alpha's node is %s while its agent waits to hand over, want online", n.State)
	}

	alpha.free()
	select {
	case a := <-answered:
		if !strings.Contains(a, "Hello from alpha") {
			t.Errorf("the request in flight when alpha's agent began to hand over: %s, want alpha's answer", a)
		}
	case <-time.After(time.Minute):
		t.Fatal("no answer a minute after the model server's")
	}
	if err := node.ran(); !errors.Is(err, agent.ErrHandedOver) {
		t.Errorf("alpha's agent returned %v, want ErrHandedOver once the request was answered", err)
	}
}

// TestGateway_modelBetweenProviders: a request for a model no provider
// serves right now, though one did lately (its only node's agent has
// handed over to the next, which has not started), is told to retry: 503
// with Retry-After, which OpenAI's SDKs honour, rather than the 404 of a
// model nobody serves, which they do not retry; so is a GET of the model,
// both while the catalog still lists its provider without a session and
// after. Once nobody has served it for 15 minutes on the gateway's clock,
// it is a 404 again.
func TestGateway_modelBetweenProviders(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}
	f := mustFixture(t, func(c *gateway.Config) { c.Clock = clock })
	up := mustMock(t, "alpha")
	node := f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 4))
	f.waitProviders(t, testModel, 1)
	if err := node.a.HandOver(); err != nil {
		t.Fatal(err)
	}
	if err := node.ran(); !errors.Is(err, agent.ErrHandedOver) {
		t.Fatalf("alpha's agent returned %v, want ErrHandedOver", err)
	}
	sdk := f.sdk(f.RenterKey)
	eventually(t, "a GET of the model while its provider is listed without a session", func() string {
		_, err := sdk.Models.Get(context.Background(), testModel)
		if err == nil {
			return "listed as served: the server has not yet seen the session end"
		}
		if e := apiError(t, err); e.StatusCode != http.StatusServiceUnavailable || e.Response.Header.Get("Retry-After") != "5" ||
			!strings.Contains(e.Message, "out of reach for now") {
			return fmt.Sprintf("%d %s, Retry-After %q", e.StatusCode, e.Message, e.Response.Header.Get("Retry-After"))
		}
		return ""
	})
	ask := func() *oai.Error {
		t.Helper()
		_, err := sdk.Chat.Completions.New(context.Background(), chatParams("hi"))
		if err == nil {
			t.Fatal("a request answered with no provider left")
		}
		return apiError(t, err)
	}
	eventually(t, "the catalog without alpha's model", func() string {
		clock.advance(f.catalogTTL)
		if e := ask(); e.StatusCode != http.StatusServiceUnavailable || !strings.Contains(e.Message, "right now") {
			return fmt.Sprintf("%d %s", e.StatusCode, e.Message)
		}
		return ""
	})
	e := ask()
	if e.Type != "service_unavailable" || e.Param != "model" || e.Response.Header.Get("Retry-After") != "5" ||
		!strings.Contains(e.Message, testModel) || !strings.Contains(e.Message, "retry shortly") {
		t.Errorf("between providers: %d %s param %q (%s), Retry-After %q; want 503 service_unavailable naming the model, retry after 5 s",
			e.StatusCode, e.Type, e.Param, e.Message, e.Response.Header.Get("Retry-After"))
	}

	_, err := sdk.Models.Get(context.Background(), testModel)
	if e := apiError(t, err); e.StatusCode != http.StatusServiceUnavailable || e.Response.Header.Get("Retry-After") != "5" || e.Param != "model" {
		t.Errorf("GET /v1/models/%s between providers: %d %s param %q (%s), Retry-After %q; want 503 to retry after 5 s",
			testModel, e.StatusCode, e.Type, e.Param, e.Message, e.Response.Header.Get("Retry-After"))
	}

	_, err = sdk.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: "org/never-served", Messages: chatParams("hi").Messages})
	if e := apiError(t, err); e.StatusCode != http.StatusNotFound || e.Type != "not_found_error" {
		t.Errorf("a model never served: %d %s (%s), want 404 not_found_error", e.StatusCode, e.Type, e.Message)
	}
	clock.advance(15*time.Minute + time.Second)
	if e := ask(); e.StatusCode != http.StatusNotFound || e.Type != "not_found_error" || e.Param != "model" {
		t.Errorf("15 minutes after its last provider: %d %s param %q (%s), want 404 not_found_error", e.StatusCode, e.Type, e.Param, e.Message)
	}
	_, err = sdk.Models.Get(context.Background(), testModel)
	if e := apiError(t, err); e.StatusCode != http.StatusNotFound || e.Type != "not_found_error" {
		t.Errorf("GET /v1/models/%s 15 minutes after its last provider: %d %s (%s), want 404 not_found_error", testModel, e.StatusCode, e.Type, e.Message)
	}
}
