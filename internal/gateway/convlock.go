package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
)

// A conversation runs one response at a time, as OpenAI's do: a response
// request naming a conversation in which another response runs waits a
// moment for it to end, then is refused (400, conversation_locked), and a
// request adding or deleting its items meanwhile is refused at once, until
// that response has ended and its items are added. So each response sees
// the items of the one before, and the items go in in the order the
// responses ran. The locks are one coordinator's, as its budgets are
// (docs/gateway.md).

// lockWait is how long a request waits for the response running in its
// conversation to end before it is refused: a client that sends its next
// response as soon as it has read the last one's answer finds the
// conversation free, though the last one's handler may still be ending.
const lockWait = 2 * time.Second

// lockedRetry is the Retry-After of a request refused for a locked
// conversation: OpenAI's "a few seconds".
const lockedRetry = 2 * time.Second

// conversationLocks are the conversations responses run in now.
type conversationLocks struct {
	mu   sync.Mutex
	held map[string]*convLock // by renter "/" conversation
}

// convLock is a conversation's response, and a channel closed when it
// lets the conversation go.
type convLock struct {
	response string
	freed    chan struct{}
}

func lockKey(renterID, conversation string) string { return renterID + "/" + conversation }

// lock takes the renter's conversation for response, waiting up to
// lockWait while another response has it, then refusing
// (conversationLocked). The key holds the renter, so that another renter
// naming the conversation locks nothing of its owner's.
func (l *conversationLocks) lock(ctx context.Context, renterID, conversation, response string) error {
	key := lockKey(renterID, conversation)
	wait := time.NewTimer(lockWait)
	defer wait.Stop()
	for {
		l.mu.Lock()
		other, ok := l.held[key]
		if !ok {
			if l.held == nil {
				l.held = map[string]*convLock{}
			}
			l.held[key] = &convLock{response: response, freed: make(chan struct{})}
			l.mu.Unlock()
			return nil
		}
		l.mu.Unlock()
		select {
		case <-other.freed:
		case <-wait.C:
			return conversationLocked("conversation", other.response)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// unlock lets the conversation go, if response has it.
func (l *conversationLocks) unlock(renterID, conversation, response string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := lockKey(renterID, conversation)
	if c := l.held[key]; c != nil && c.response == response {
		delete(l.held, key)
		close(c.freed)
	}
}

// check refuses a change to the renter's conversation while a response
// runs in it.
func (l *conversationLocks) check(renterID, conversation string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if other, ok := l.held[lockKey(renterID, conversation)]; ok {
		return conversationLocked("", other.response)
	}
	return nil
}

// codedError is err with the code OpenAI gives it in its error body,
// where that is more than the idlegrid code's name.
type codedError struct {
	err  error
	code string
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// openAICode is the code of err's OpenAI error body: codedError's, else
// the idlegrid code's name.
func openAICode(err error) string {
	var c *codedError
	if errors.As(err, &c) {
		return c.code
	}
	return idlegrid.ErrorCode(err)
}

// conversationLocked is OpenAI's refusal of a request to a conversation in
// which response runs, naming field (none for a path's).
func conversationLocked(field, response string) error {
	err := idlegrid.Invalid(field, "another response (%s) is running in this conversation; retry in a few seconds, once it has ended", response)
	return &codedError{err: retryAfter(err, lockedRetry), code: "conversation_locked"}
}

// countRefusal counts a refusal for a request's conversation by its
// reason (metrics.convRefusals).
func (g *Gateway) countRefusal(err error) {
	switch openAICode(err) {
	case "conversation_locked":
		g.metrics.convRefusals.WithLabelValues("locked").Inc()
	case "conversation_quota_exceeded":
		g.metrics.convRefusals.WithLabelValues("quota").Inc()
	}
}
