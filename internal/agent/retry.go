package agent

import (
	"context"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/backoff"
)

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
	var b backoff.Backoff
	for {
		err := send(ctx)
		if err == nil || definite(err) {
			return err
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
		d := b.Next()
		a.log.Warn("server unreachable; will retry", "what", what, "attempt", b.Attempts(), "in", d.Round(time.Millisecond), "err", err)
		if !backoff.Sleep(ctx, d) {
			return ctx.Err()
		}
	}
}
