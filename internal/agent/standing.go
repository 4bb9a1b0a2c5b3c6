package agent

import (
	"time"

	"github.com/idlegrid/idlegrid"
)

// noteStanding logs how the node's standing changed since the last
// heartbeat's answer: a drain or a quarantine holds it out of new leases
// whatever the agent publishes, so its owner must read in the agent's log
// why none come, and how to offer it again. It is called by the
// heartbeat loop only, which owns a.standing.
func (a *Agent) noteStanding(now idlegrid.NodeStanding) {
	was := a.standing
	a.standing = now
	id := a.NodeID()
	switch {
	case now.DrainingSince != nil && was.DrainingSince == nil:
		a.log.Warn("the node is draining: it takes no new leases, its bronze leases get their notice, and its gold and silver leases run to their end",
			"node", id, "since", now.DrainingSince.UTC().Format(time.RFC3339), "undo", "idlegrid node drain "+id+" --undo")
	case now.DrainingSince == nil && was.DrainingSince != nil:
		a.log.Info("the node's drain was undone", "node", id, "offered", !now.Quarantined)
	}
	switch {
	case now.Quarantined && !was.Quarantined:
		a.log.Warn("the node is quarantined: it takes no new leases until an admin lifts the quarantine",
			"node", id, "evidence", "idlegrid node hardware "+id)
	case !now.Quarantined && was.Quarantined:
		a.log.Info("the node's quarantine was lifted", "node", id, "offered", now.DrainingSince == nil)
	}
}
