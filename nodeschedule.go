package idlegrid

import "time"

// NodeSchedule is when a node is offered, and who decided it. A node's agent
// publishes a schedule with every offer (from its config file); the node's
// owner may set one from the API or the dashboard instead, which the server
// keeps and applies to every later offer until the owner removes it, so an
// agent that restarts or republishes does not undo the owner's edit.
type NodeSchedule struct {
	NodeID string `json:"node_id"`
	// Schedule is what the market uses now: EffectiveSchedule of the two below.
	Schedule Schedule `json:"schedule"`
	// Owner is the schedule the owner set; nil when the agent's applies.
	Owner *Schedule `json:"owner,omitempty"`
	// Published is the schedule the agent last published.
	Published Schedule  `json:"published"`
	UpdatedAt time.Time `json:"updated_at,omitzero"` // when the owner last set it
}

// EffectiveSchedule is the schedule a node is offered under when its agent
// publishes published and its owner set owner (nil: none). The owner's
// schedule wins, with one exception: an agent that opens no window within
// WindowHorizon has withdrawn every GPU (its owner is using the machine, or
// the GPUs failed a check), and an owner's schedule must not reopen them.
func EffectiveSchedule(published Schedule, owner *Schedule, now time.Time) Schedule {
	if owner == nil || published.Closed(now) {
		return published
	}
	return *owner
}

// Closed reports whether s opens no window between now and now+WindowHorizon.
func (s *Schedule) Closed(now time.Time) bool {
	return s.AvailableUntil(now).IsZero() && s.NextOpening(now).IsZero()
}
