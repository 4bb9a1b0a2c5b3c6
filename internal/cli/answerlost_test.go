package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// TestAnswerLost: only a request that went out and got no answer may have
// created what it asked for; one answered, never sent, or cancelled here
// did not.
func TestAnswerLost(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	lost := &url.Error{Op: "Post", URL: "http://127.0.0.1:7070/v1/jobs", Err: io.ErrUnexpectedEOF}
	for _, tt := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"answered", context.Background(), idlegrid.Invalid("job.gpus", "must be at least 1"), false},
		{"not connected", context.Background(), &url.Error{Op: "Post", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}, false},
		{"cancelled here", cancelled, lost, false},
		{"connection dropped", context.Background(), lost, true},
		{"read timed out", context.Background(), &url.Error{Op: "Post", Err: &net.OpError{Op: "read", Err: errors.New("i/o timeout")}}, true},
	} {
		if got := answerLost(tt.ctx, tt.err); got != tt.want {
			t.Errorf("%s: answerLost = %v, want %v", tt.name, got, tt.want)
		}
	}
	if err := createFailed(context.Background(), lost, "k1", "renter"); !errors.Is(err, io.ErrUnexpectedEOF) ||
		!strings.Contains(hintOf(err), "--idempotency-key k1 to create it at most once") {
		t.Errorf("createFailed of a lost answer: %v (hint %q)", err, hintOf(err))
	}
}
