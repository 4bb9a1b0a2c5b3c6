package agent

import (
	"net/http"
	"time"
)

// An agent that stops, or hands over, closes its session with the server,
// which cuts the inference requests it is proxying to the node's model
// servers. So once its loops end it takes no new request (a 429, on which
// the gateway tries another provider) and lets those in flight finish,
// for at most modelDrainWait, before the session closes.

// modelDrainWait bounds how long a stopping agent waits for the inference
// requests in flight: well inside the server's patience with a silent
// node, which a hand-over's next agent must beat.
const modelDrainWait = 10 * time.Second

// modelDrainPoll is how often the wait looks again.
const modelDrainPoll = 50 * time.Millisecond

// enter counts an inference request in, unless the agent is leaving.
func (ms *models) enter() bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.leaving {
		return false
	}
	ms.active++
	return true
}

// exit counts an inference request out.
func (ms *models) exit() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.active--
}

// leave refuses every inference request from now on.
func (ms *models) leave() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.leaving = true
}

// inFlight is how many inference requests are being proxied.
func (ms *models) inFlight() int {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.active
}

// waitDrained waits until no inference request is in flight, or until
// deadline, and returns how many still are.
func (ms *models) waitDrained(deadline time.Time) int {
	for {
		n := ms.inFlight()
		if n == 0 || !time.Now().Before(deadline) {
			return n
		}
		time.Sleep(min(modelDrainPoll, time.Until(deadline)))
	}
}

// refuseLeaving answers an inference request that came after the agent
// began to leave.
func refuseLeaving(w http.ResponseWriter) {
	writeModelError(w, http.StatusTooManyRequests, "rate_limit_error", "the node agent is stopping; another provider takes the request")
}

// drainModels waits, once the agent's loops have ended (leave), for the
// inference requests in flight, until deadline, and says how many it
// cuts.
func (a *Agent) drainModels(deadline time.Time) {
	if cut := a.models.waitDrained(deadline); cut > 0 {
		a.log.Warn("cutting the inference requests still in flight", "requests", cut, "after", modelDrainWait)
	}
}
