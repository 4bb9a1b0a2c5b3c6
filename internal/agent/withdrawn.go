package agent

import (
	"time"

	"github.com/idlegrid/idlegrid/internal/gpu"
)

// Withdrawn is what the node's local policy makes of devs at now, for
// 'idlegrid agent --check': for each GPU that it would not offer, why (the
// owner is using it, too hot, unhealthy). A GPU its owner leaves alone now
// counts as offered, though in when-idle mode the agent offers it only
// once it has stayed so for idle.for. ours tells the host processes that
// run the agent's own workloads; nil counts none as the agent's.
func (c *Config) Withdrawn(now time.Time, devs []gpu.Device, ours func(pid int) bool) map[string]string {
	if ours == nil {
		ours = func(int) bool { return false }
	}
	p := newPolicy(c)
	// A first look idle.for ago starts the idle clock of the GPUs left
	// alone now, so that the second finds them idle long enough.
	p.judge(now.Add(-p.idleFor), devs, nil, ours)
	out := map[string]string{}
	for uuid, v := range p.judge(now, devs, nil, ours) {
		if !v.offer {
			out[uuid] = v.reason
		}
	}
	return out
}
