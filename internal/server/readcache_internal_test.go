package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Callers of a stale entry share one read; one that gives up returns at
// once without ending the read for the others, and the value is kept for
// its time to live. (In a synctest bubble, so that the read's flight has
// ended before the later asks: one that joined it would share its value.)
func TestReadCache_shared(t *testing.T) { synctest.Test(t, testReadCacheShared) }

func testReadCacheShared(t *testing.T) {
	var c readCache[int]
	c.ttl = 2 * time.Second
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var reads atomic.Int32
	release, started := make(chan struct{}), make(chan struct{})
	read := func(ctx context.Context) (int, error) {
		if reads.Add(1) == 1 {
			close(started)
		}
		<-release
		return 42, ctx.Err()
	}
	impatient, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { _, err := c.get(impatient, "k", t0, read); gaveUp <- err }()
	<-started
	got := make(chan int, 1)
	go func() {
		v, err := c.get(context.Background(), "k", t0, read)
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("the caller that gave up: %v, want context.Canceled", err)
	}
	close(release)
	if v := <-got; v != 42 {
		t.Errorf("the caller that waited got %d, want 42 (the read must not end with the first caller)", v)
	}
	synctest.Wait()
	if v, err := c.get(context.Background(), "k", t0.Add(time.Second), read); v != 42 || err != nil || reads.Load() != 1 {
		t.Errorf("a second later: %d, %v after %d reads; want 42 from the one read", v, err, reads.Load())
	}
	if _, err := c.get(context.Background(), "k", t0.Add(2*time.Second), read); err != nil || reads.Load() != 2 {
		t.Errorf("after its time: %v after %d reads, want a second read", err, reads.Load())
	}
}
