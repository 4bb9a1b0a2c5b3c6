package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
)

// fakeWriter is a commit function for groupCommit that records its
// batches. While busy is open it holds each commit before taking its batch,
// as a store whose writer is busy would.
type fakeWriter struct {
	mu      sync.Mutex
	batches [][]int
	busy    chan struct{}
	fail    map[int]error // results by item
}

func (w *fakeWriter) commit(_ context.Context, take func() []*pending[int]) {
	if w.busy != nil {
		<-w.busy
	}
	batch := take()
	var items []int
	for _, p := range batch {
		items = append(items, p.item)
		p.finish(w.fail[p.item])
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.batches = append(w.batches, items)
}

func (w *fakeWriter) sizes() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int
	for _, b := range w.batches {
		out = append(out, len(b))
	}
	return out
}

// submitAll submits items from a goroutine each and returns their results
// once all have returned.
func submitAll(ctx context.Context, g *groupCommit[int], items []int) map[int]error {
	var mu sync.Mutex
	got := map[int]error{}
	var wg sync.WaitGroup
	for _, item := range items {
		wg.Go(func() {
			err := g.submit(ctx, item)
			mu.Lock()
			defer mu.Unlock()
			got[item] = err
		})
	}
	wg.Wait()
	return got
}

func TestGroupCommit_Submit(t *testing.T) {
	t.Run("Idle", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := &fakeWriter{}
			g := newGroupCommit(8, 64, w.commit)
			if err := g.submit(context.Background(), 1); err != nil {
				t.Fatalf("submit: %v", err)
			}
			if got, want := w.sizes(), []int{1}; !slices.Equal(got, want) {
				t.Errorf("batch sizes %v, want %v: an idle store commits at once", got, want)
			}
		})
	})
	t.Run("WhileBusy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := &fakeWriter{busy: make(chan struct{})}
			g := newGroupCommit(4, 64, w.commit)
			results := make(chan map[int]error)
			go func() { results <- submitAll(context.Background(), g, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) }()
			synctest.Wait() // a leader waits for the writer, the rest wait in the queue
			close(w.busy)
			got := <-results
			for item, err := range got {
				if err != nil {
					t.Errorf("item %d: %v", item, err)
				}
			}
			if len(got) != 10 {
				t.Errorf("%d results, want 10", len(got))
			}
			// Ten waited: batches of at most 4, every item in exactly one.
			if got, want := w.sizes(), []int{4, 4, 2}; !slices.Equal(got, want) {
				t.Errorf("batch sizes %v, want %v", got, want)
			}
			var all []int
			for _, b := range w.batches {
				all = append(all, b...)
			}
			slices.Sort(all)
			if want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(all, want) {
				t.Errorf("committed %v, want each of %v once", all, want)
			}
		})
	})
	t.Run("OneFails", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			bad := errors.New("bad item")
			w := &fakeWriter{busy: make(chan struct{}), fail: map[int]error{3: bad}}
			g := newGroupCommit(8, 64, w.commit)
			results := make(chan map[int]error)
			go func() { results <- submitAll(context.Background(), g, []int{1, 2, 3, 4, 5}) }()
			synctest.Wait()
			close(w.busy)
			for item, err := range <-results {
				if want := w.fail[item]; !errors.Is(err, want) || (want == nil && err != nil) {
					t.Errorf("item %d: got %v, want %v", item, err, want)
				}
			}
			if got, want := w.sizes(), []int{5}; !slices.Equal(got, want) {
				t.Errorf("batch sizes %v, want %v", got, want)
			}
		})
	})
}

// TestGroupCommit_SubmitCancel checks that a caller who gives up while its
// item is queued returns at once and its item is never committed, and that
// one whose item is being committed waits for the truth.
func TestGroupCommit_SubmitCancel(t *testing.T) {
	t.Run("Queued", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := &fakeWriter{busy: make(chan struct{})}
			g := newGroupCommit(8, 64, w.commit)
			leader := make(chan error)
			go func() { leader <- g.submit(context.Background(), 1) }()
			synctest.Wait() // 1 leads and waits for the writer
			ctx, cancel := context.WithCancel(context.Background())
			gaveUp := make(chan error)
			go func() { gaveUp <- g.submit(ctx, 2) }()
			synctest.Wait()
			cancel()
			if err := <-gaveUp; !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled submit: got %v, want context.Canceled", err)
			}
			close(w.busy)
			if err := <-leader; err != nil {
				t.Errorf("leader: %v", err)
			}
			if got, want := fmt.Sprint(w.batches), "[[1]]"; got != want {
				t.Errorf("batches %s, want %s: a cancelled item is not committed", got, want)
			}
		})
	})
	t.Run("Taken", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			busy, writing := make(chan struct{}), make(chan struct{})
			var batches [][]int
			g := newGroupCommit(8, 64, func(_ context.Context, take func() []*pending[int]) {
				<-busy
				batch := take()
				<-writing // the batch is taken and being written
				var items []int
				for _, p := range batch {
					items = append(items, p.item)
					p.finish(nil)
				}
				batches = append(batches, items)
			})
			leader := make(chan error)
			go func() { leader <- g.submit(context.Background(), 1) }()
			synctest.Wait() // 1 leads and waits for the writer
			ctx, cancel := context.WithCancel(context.Background())
			follower := make(chan error)
			go func() { follower <- g.submit(ctx, 2) }()
			synctest.Wait()
			close(busy) // the leader takes 1 and 2
			synctest.Wait()
			cancel()
			synctest.Wait()
			select {
			case err := <-follower:
				t.Fatalf("submit returned %v while its commit was being written", err)
			default:
			}
			close(writing)
			if err := <-follower; err != nil {
				t.Errorf("cancelled submit: got %v, want nil: its item was committed", err)
			}
			if err := <-leader; err != nil {
				t.Errorf("leader: %v", err)
			}
			if got, want := fmt.Sprint(batches), "[[1 2]]"; got != want {
				t.Errorf("batches %s, want %s", got, want)
			}
		})
	})
}

// TestGroupCommit_SubmitPanic checks that a commit that panics fails the
// items it took instead of leaving their callers waiting, and that the
// next caller can still lead.
func TestGroupCommit_SubmitPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy := make(chan struct{})
		panicking := true
		g := newGroupCommit(8, 64, func(_ context.Context, take func() []*pending[int]) {
			<-busy
			batch := take()
			if panicking {
				panic("driver bug")
			}
			for _, p := range batch {
				p.finish(nil)
			}
		})
		leader := make(chan any)
		go func() {
			defer func() { leader <- recover() }()
			g.submit(context.Background(), 1)
		}()
		synctest.Wait()
		follower := make(chan error)
		go func() { follower <- g.submit(context.Background(), 2) }()
		synctest.Wait()
		close(busy)
		if got := <-leader; got != "driver bug" {
			t.Errorf("leader recovered %v, want the commit's panic", got)
		}
		if err := <-follower; !errors.Is(err, errCommitPanicked) {
			t.Errorf("follower: got %v, want errCommitPanicked", err)
		}
		panicking = false
		if err := g.submit(context.Background(), 3); err != nil {
			t.Errorf("submit after the panic: %v", err)
		}
	})
}
