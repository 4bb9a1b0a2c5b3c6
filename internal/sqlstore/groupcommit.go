package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
)

// Group commit. A durable commit costs far more than the rows it writes
// (on SQLite about 100 µs of the one writer, on PostgreSQL a round trip and
// a WAL flush), so writes that arrive together are committed together.
//
// Each caller queues its item and then either waits for its result or,
// when no one else is committing, becomes the leader: it takes the queue
// (at most max items) and commits them in one transaction for everyone.
// There is no timer and no goroutine of its own: a batch is what arrived
// while the previous write held the database, so an idle store commits an
// item at once, alone, and a busy one in batches. A caller waits for at
// most the commit in progress and the one that takes its item (more only
// when over max items wait ahead of it).
//
// A caller returns only once its item's transaction has committed or
// failed. One whose context ends while its item is still queued returns at
// once and its item is never written; one whose item a leader has taken
// waits for that commit, so that what it returns is the truth.

// groupCommit batches the items of concurrent callers into shared commits.
type groupCommit[T any] struct {
	max    int
	queue  chan *pending[T]
	leader chan struct{} // holds a token while someone commits
	// commit writes a batch: it calls take once, when it is ready to
	// write (on SQLite, once it holds the writer), and finishes every item
	// take returned.
	commit func(ctx context.Context, take func() []*pending[T])
}

// pending is one caller's item and the way its result gets back.
type pending[T any] struct {
	item  T
	state atomic.Int32
	done  chan error
}

const (
	queued int32 = iota
	taken
	finished
	abandoned
)

// finish reports the item's result to its caller, once.
func (p *pending[T]) finish(err error) {
	if p.state.CompareAndSwap(taken, finished) {
		p.done <- err
	}
}

// newGroupCommit returns a group commit of at most max items a batch; up to
// depth items may wait, and callers beyond that wait to queue.
func newGroupCommit[T any](max, depth int, commit func(ctx context.Context, take func() []*pending[T])) *groupCommit[T] {
	return &groupCommit[T]{max: max, queue: make(chan *pending[T], depth), leader: make(chan struct{}, 1), commit: commit}
}

// lazyGroupCommit is a group commit made on first use.
type lazyGroupCommit[T any] struct {
	once sync.Once
	g    *groupCommit[T]
}

// get returns the group commit, made with these arguments the first time.
func (l *lazyGroupCommit[T]) get(max, depth int, commit func(ctx context.Context, take func() []*pending[T])) *groupCommit[T] {
	l.once.Do(func() { l.g = newGroupCommit(max, depth, commit) })
	return l.g
}

// submit queues item and returns its commit's result.
func (g *groupCommit[T]) submit(ctx context.Context, item T) error {
	p := &pending[T]{item: item, done: make(chan error, 1)}
	select {
	case g.queue <- p:
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		select {
		case err := <-p.done:
			return err
		case g.leader <- struct{}{}:
			// The batch is everyone's: one caller giving up must not undo it.
			g.lead(context.WithoutCancel(ctx))
		case <-ctx.Done():
			if p.state.CompareAndSwap(queued, abandoned) {
				return ctx.Err()
			}
			return <-p.done // taken into a batch: its commit decides
		}
	}
}

// lead commits a batch while holding the leader's token. A leader finishes
// what it took before it lets go, so an empty queue means there is nothing
// to do. If the commit panics, what it took fails rather than waits
// forever, and the token passes on.
func (g *groupCommit[T]) lead(ctx context.Context) {
	defer func() { <-g.leader }()
	if len(g.queue) == 0 {
		return
	}
	var took []*pending[T]
	defer func() {
		if r := recover(); r != nil {
			for _, p := range took {
				p.finish(errCommitPanicked)
			}
			panic(r)
		}
	}()
	g.commit(ctx, func() []*pending[T] {
		batch := g.take()
		took = append(took, batch...)
		return batch
	})
}

var errCommitPanicked = errors.New("the batch's commit panicked")

// take removes up to max items from the queue, skipping those whose
// callers gave up.
func (g *groupCommit[T]) take() []*pending[T] {
	var batch []*pending[T]
	for len(batch) < g.max {
		select {
		case p := <-g.queue:
			if p.state.CompareAndSwap(queued, taken) {
				batch = append(batch, p)
			}
		default:
			return batch
		}
	}
	return batch
}

// commitBatch is a leader's commit of the items take returns, for a
// commit function of groupCommit. together writes them in one
// transaction, filling in each item's own error; when it fails with
// errRowFailed, a second transaction writes them with alone, which puts
// each behind a savepoint so that a bad one fails by itself. take is
// called once, in the first transaction, once it holds the writer. A
// failed transaction fails every item in it; a retried one writes them
// all again.
func commitBatch[T any](ctx context.Context, db *DB, take func() []*pending[T], together, alone batchWrite[T]) {
	var batch []*pending[T]
	var errs []error
	took := false
	commit := func(run batchWrite[T]) error {
		return db.update(ctx, func(tx *sql.Tx) error {
			if !took {
				batch, took = take(), true // now, so that it holds every item that came while we waited for the writer
			}
			errs = make([]error, len(batch))
			return run(ctx, tx, batch, errs)
		})
	}
	err := commit(together)
	if errors.Is(err, errRowFailed) {
		err = commit(alone)
	}
	if !took { // no transaction began: what waits fails with it
		batch = take()
	}
	for i, p := range batch {
		if err != nil {
			p.finish(err)
		} else {
			p.finish(errs[i])
		}
	}
}

// batchWrite writes a batch in tx, setting errs[i] to item i's own error.
type batchWrite[T any] func(ctx context.Context, tx *sql.Tx, batch []*pending[T], errs []error) error
