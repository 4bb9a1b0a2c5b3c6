package agent

import (
	"context"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/backoff"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// definite reports whether err is the server's considered answer, which
// asking again will not change (a 4xx: invalid, conflict, not found, a
// refused token…), as opposed to a network failure, an overloaded or
// broken server, a 429 (too many requests from the node's address, which
// waiting mends), or a lapsed context. A 401 for the request's signed time
// (off the server's clock, which NTP mends) or for a signature taken
// before is asked again, signed anew: a lease's final report must not be
// dropped for it.
func definite(err error) bool {
	switch idlegrid.ErrorCode(err) {
	case "", idlegrid.EINTERNAL, idlegrid.EUNAVAILABLE, idlegrid.ETOOMANY:
		return false
	case idlegrid.EUNAUTHORIZED:
		msg := idlegrid.ErrorMessage(err)
		return !strings.Contains(msg, nodekey.SkewWords) && !strings.Contains(msg, nodekey.ReplayWords)
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
