package market

import (
	"strconv"

	"github.com/idlegrid/idlegrid"
)

// Explain's estimates walk nodes' windows past the one open now (see
// windowStart), and reading a schedule's next window costs microseconds,
// for each of a market's nodes. Which window follows a time depends only
// on the schedule, and most nodes share theirs with many others, so the
// engine keeps what it read by schedule and time.

// spanKey is a schedule, by the ID the engine gave it, and a time.
type spanKey struct {
	sched uint32
	after int64
}

// span is a window: when it opens and ends, unix nanos; zero: none.
type span struct{ open, until int64 }

// The most schedules and windows the engine keeps; past them it forgets
// them all and starts again.
const (
	maxSchedules = 1 << 14
	maxSpans     = 1 << 16
)

// spanAfter is nd's first window opening after t: when it opens and
// ends; 0, 0 when none opens within the horizon from t.
func (e *Engine) spanAfter(nd *node, t int64) (open, until int64) {
	k := spanKey{e.scheduleID(nd), t}
	if s, ok := e.spans[k]; ok {
		return s.open, s.until
	}
	var s span
	if o := nd.n.Schedule.NextOpening(timeOf(t)); !o.IsZero() && o.UnixNano() > t {
		if u := nd.n.Schedule.AvailableUntil(o); !u.IsZero() {
			s = span{o.UnixNano(), u.UnixNano()}
		}
	}
	if len(e.spans) >= maxSpans {
		clear(e.spans)
	}
	if e.spans == nil {
		e.spans = map[spanKey]span{}
	}
	e.spans[k] = s
	return s.open, s.until
}

// scheduleID is the ID of nd's schedule: equal schedules share one. A
// node keeps its schedule's until it is upserted (schedID 0) or the
// engine forgets them (schedGen).
func (e *Engine) scheduleID(nd *node) uint32 {
	if nd.schedID != 0 && nd.schedGen == e.schedGen {
		return nd.schedID
	}
	key := scheduleKey(&nd.n.Schedule)
	id, ok := e.schedIDs[key]
	if !ok {
		if len(e.schedIDs) >= maxSchedules {
			clear(e.schedIDs)
			clear(e.spans)
			e.schedGen++
		}
		if e.schedIDs == nil {
			e.schedIDs = map[string]uint32{}
		}
		id = uint32(len(e.schedIDs) + 1)
		e.schedIDs[key] = id
	}
	nd.schedID, nd.schedGen = id, e.schedGen
	return id
}

// scheduleKey writes out everything of a schedule its windows depend on.
func scheduleKey(s *idlegrid.Schedule) string {
	b := make([]byte, 0, 64)
	b = append(append(b, s.Mode...), 0)
	b = append(append(b, s.TimeZone...), 0)
	for _, w := range s.Weekly {
		for _, d := range w.Days {
			b = append(append(b, d...), ',')
		}
		b = append(append(append(append(b, w.Start...), '-'), w.End...), 0)
	}
	for _, w := range s.OneOff {
		b = strconv.AppendInt(append(strconv.AppendInt(append(b, 1), w.Start.UnixNano(), 36), '-'), w.End.UnixNano(), 36)
	}
	return string(b)
}
