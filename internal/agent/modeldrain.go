package agent

import (
	"context"
	"net/http"
	"time"
)

// An agent that stops, or hands over, closes its session with the server,
// which cuts the inference requests it is proxying to the node's model
// servers. So once its loops end it takes no new request (a 429, on which
// the gateway tries another provider) and lets those in flight finish
// before the session closes: for up to model_drain_wait at a stop (the
// node is offline from its goodbye, so nothing but the operator's
// patience bounds it, and a second signal cuts them at once), and for up
// to handOverDrainWait at a hand-over.
//
// A hand-over begins that earlier, while the node still heartbeats: once
// the workloads being stopped have exited, the agent withdraws its models
// from the node's offer (so that the gateway sends their requests to
// other providers) and waits for the requests in flight, within
// HandOverWait, so that a long stream is not cut by an upgrade.

// DefaultModelDrainWait is how long a stopping agent lets the inference
// requests in flight run on, from the end of its loops, unless the config
// says otherwise (model_drain_wait): a long generation's stream, well
// inside systemd's stop timeout in the unit (TimeoutStopSec, 180 s).
const DefaultModelDrainWait = 2 * time.Minute

// MaxModelDrainWait is the longest model_drain_wait a config may set.
const MaxModelDrainWait = time.Hour

// handOverDrainWait bounds how long an agent that hands over waits for
// the inference requests in flight once its loops have ended: well
// inside the server's patience with a silent node, which the next agent
// must beat. It waited for them before, while its heartbeats went on.
const handOverDrainWait = 10 * time.Second

// enter counts an inference request in, unless the agent is leaving.
func (ms *models) enter() bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.leaving {
		return false
	}
	ms.active.Enter()
	return true
}

// exit counts an inference request out.
func (ms *models) exit() { ms.active.Leave() }

// leave refuses every inference request from now on, and withdraws the
// models from the offer: the watch loop, while it runs, publishes the
// offer without them.
func (ms *models) leave() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.leaving {
		return
	}
	ms.leaving = true
	select {
	case ms.changed <- struct{}{}:
	default:
	}
}

// inFlight is how many inference requests are being proxied.
func (ms *models) inFlight() int { return ms.active.N() }

// waitDrained waits until no inference request is in flight, or until
// deadline, and returns how many still are.
func (ms *models) waitDrained(deadline time.Time) int {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if ms.active.Wait(ctx) == nil {
		return 0
	}
	return ms.active.N()
}

// refuseLeaving answers an inference request that came after the agent
// began to leave.
func refuseLeaving(w http.ResponseWriter) {
	writeModelError(w, http.StatusTooManyRequests, "rate_limit_error", "the node agent is stopping; another provider takes the request")
}

// drainWait is how long, from the end of its loops, an agent that stops
// (or hands over) lets the inference requests in flight run on.
func (a *Agent) drainWait(handOver bool) time.Duration {
	if handOver {
		return min(a.models.drainWait, handOverDrainWait)
	}
	return a.models.drainWait
}

// drainModels waits, once the agent's loops have ended (leave), for the
// inference requests in flight, until deadline, wait after the loops'
// end, and says how many it cuts.
func (a *Agent) drainModels(deadline time.Time, wait time.Duration) {
	if n := a.models.inFlight(); n > 0 {
		a.log.Info("letting the inference requests in flight finish before the session closes (a second signal cuts them now)",
			"requests", n, "within", max(time.Until(deadline), 0).Round(time.Second))
	}
	if cut := a.models.waitDrained(deadline); cut > 0 {
		a.log.Warn("cutting the inference requests still in flight", "requests", cut, "after", wait)
	}
}
