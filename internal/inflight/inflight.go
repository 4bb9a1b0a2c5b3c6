// Package inflight counts the requests running and tells when there are
// none: the inference gateway's, which its Sync waits out, and the HTTP
// server's handlers, which a shutdown waits for once it has cut them
// (http.Server.Close does not).
package inflight

import (
	"context"
	"net/http"
	"sync"
)

// Count is the number of requests running. Its zero value is ready.
type Count struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to zero; nil when nobody waits
}

// Enter counts a request in.
func (c *Count) Enter() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

// Leave counts a request out.
func (c *Count) Leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n--; c.n == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}

// N is the number of requests running now.
func (c *Count) N() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Wait returns once none runs, or ctx's error when it ends first.
func (c *Count) Wait(ctx context.Context) error {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return nil
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Track counts h's calls.
func (c *Count) Track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.Enter()
		defer c.Leave()
		h.ServeHTTP(w, r)
	})
}
