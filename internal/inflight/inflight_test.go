package inflight_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid/internal/inflight"
)

func TestCount_Wait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c inflight.Count
		if err := c.Wait(context.Background()); err != nil {
			t.Fatalf("Wait with none running = %v, want nil at once", err)
		}
		release := make(chan struct{})
		h := c.Track(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
		for range 2 {
			go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}
		synctest.Wait()
		if n := c.N(); n != 2 {
			t.Fatalf("N = %d, want 2", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := c.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait while two run = %v, want the context's end", err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait(context.Background()) }()
		close(release)
		if err := <-done; err != nil || c.N() != 0 {
			t.Errorf("Wait once they ended = %v with %d running, want nil and none", err, c.N())
		}
	})
}
