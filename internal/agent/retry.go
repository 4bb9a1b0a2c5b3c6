package agent

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Backoff between attempts to reach the server.
const (
	backoffBase = time.Second
	backoffMax  = 30 * time.Second
)

// backoff is jittered exponential backoff: each delay is drawn from the
// upper half of base·2ⁿ, capped at max, so that many agents restarted
// together do not retry in step.
type backoff struct {
	attempt int
}

func (b *backoff) next() time.Duration {
	d := backoffBase << min(b.attempt, 10)
	if d > backoffMax {
		d = backoffMax
	}
	b.attempt++
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.attempt = 0 }

// sleep waits for d or until ctx is done, and reports whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// definite reports whether err is the server's considered answer, which
// asking again will not change (a 4xx: invalid, conflict, not found,
// unauthorized…), as opposed to a network failure, an overloaded or broken
// server, or a lapsed context.
func definite(err error) bool {
	switch idlegrid.ErrorCode(err) {
	case "", idlegrid.EINTERNAL, idlegrid.EUNAVAILABLE:
		return false
	}
	return true
}

// deliver calls send until it succeeds, fails definitely, or ctx is done,
// backing off between attempts. It returns send's last error, or ctx's.
func (a *Agent) deliver(ctx context.Context, what string, send func(context.Context) error) error {
	var b backoff
	for {
		err := send(ctx)
		if err == nil || definite(err) {
			return err
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
		d := b.next()
		a.log.Warn("server unreachable; will retry", "what", what, "attempt", b.attempt, "in", d.Round(time.Millisecond), "err", err)
		if !sleep(ctx, d) {
			return ctx.Err()
		}
	}
}
