package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestGateway_agentStopFinishesRequests: an agent that stops lets the
// inference request it is proxying run to its answer before its session
// with the server closes, rather than cut it.
func TestGateway_agentStopFinishesRequests(t *testing.T) {
	f := mustFixture(t, nil)
	up := mustMock(t, "alpha")
	node := f.startAgent(t, "alpha", "eu-west", "EU", up.model(testModel, "10", "20", 4))
	f.waitProviders(t, testModel, 1)
	up.set(faultHold)
	answered := make(chan error, 1)
	var content string
	go func() {
		sdk := f.sdk(f.RenterKey)
		c, err := sdk.Chat.Completions.New(context.Background(), chatParams("hi"))
		if err == nil && len(c.Choices) > 0 {
			content = c.Choices[0].Message.Content
		}
		answered <- err
	}()
	eventually(t, "the request at the model server", func() string {
		if up.Calls.Load() == 0 {
			return "not yet"
		}
		return ""
	})
	stopped := make(chan struct{})
	go func() {
		node.stop()
		close(stopped)
	}()
	time.Sleep(300 * time.Millisecond) // the agent stops meanwhile, but for the request
	up.free()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the request in flight when its node's agent stopped: %v, want its answer", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no answer a minute after the model server's")
	}
	if !strings.Contains(content, "Hello from alpha") {
		t.Errorf("answer %q, want the model server's", content)
	}
	<-stopped
}
