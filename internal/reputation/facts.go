package reputation

import (
	"slices"
	"time"

	"github.com/idlegrid/idlegrid"
)

// FactKind names a measured fact.
type FactKind string

const (
	// FactLeaseCompleted: a lease succeeded.
	FactLeaseCompleted FactKind = "lease_completed"
	// FactLeaseFailed: a lease ended lost, or failed with FaultProvider.
	// Failures of the renter's workload, cancellations and preemptions are
	// not the provider's and are not facts about it.
	FactLeaseFailed FactKind = "lease_failed"
	// FactLeaseDisproved: a lease that succeeded made its result up (a
	// verification proved its output wrong): dated at the lease's end, it
	// takes back the lease's completion and counts it failed instead, so
	// that the made-up work counts once, as a failure.
	FactLeaseDisproved FactKind = "lease_disproved"
	// FactWindow: a promised window ended; the node was online for
	// OnlineSeconds of its PromisedSeconds.
	FactWindow FactKind = "window"
	// FactNoticeHonoured: a lease that was guaranteed notice got it.
	FactNoticeHonoured FactKind = "notice_honoured"
	// FactNoticeBroken: a lease that was guaranteed notice ended without it
	// through the provider's fault.
	FactNoticeBroken FactKind = "notice_broken"
	// FactReceiptConsistent, FactReceiptInconsistent: a receipt checked
	// against the node's telemetry (heartbeats, utilisation) agreed with it
	// or not.
	FactReceiptConsistent   FactKind = "receipt_consistent"
	FactReceiptInconsistent FactKind = "receipt_inconsistent"
	// FactChallengePassed, FactChallengeFailed: a hardware challenge's result
	// and time fit the claimed GPU, or did not.
	FactChallengePassed FactKind = "challenge_passed"
	FactChallengeFailed FactKind = "challenge_failed"
)

// Fact is one measured fact about a node, at the time it was measured.
type Fact struct {
	Kind FactKind  `json:"kind"`
	At   time.Time `json:"at"`
	// For FactWindow only.
	PromisedSeconds int64 `json:"promised_seconds,omitempty"`
	OnlineSeconds   int64 `json:"online_seconds,omitempty"`
}

// Validate checks a fact before it counts.
func (f *Fact) Validate() error {
	if f.At.IsZero() {
		return idlegrid.Invalid("fact.at", "required")
	}
	if f.Kind == FactWindow {
		if f.PromisedSeconds <= 0 {
			return idlegrid.Invalid("fact.promised_seconds", "must be positive, got %d", f.PromisedSeconds)
		} else if f.OnlineSeconds < 0 || f.OnlineSeconds > f.PromisedSeconds {
			return idlegrid.Invalid("fact.online_seconds", "must be between 0 and the promised %d, got %d", f.PromisedSeconds, f.OnlineSeconds)
		}
	} else if f.PromisedSeconds != 0 || f.OnlineSeconds != 0 {
		return idlegrid.Invalid("fact.promised_seconds", "only a window fact has seconds")
	}
	if _, _, _, ok := f.units(); !ok {
		return idlegrid.Invalid("fact.kind", "unknown kind %q", f.Kind)
	}
	return nil
}

// units is what f adds to its dimension, in the dimension's unit.
func (f *Fact) units() (d Dimension, good, bad float64, ok bool) {
	switch f.Kind {
	case FactLeaseCompleted:
		return DimLeases, 1, 0, true
	case FactLeaseFailed:
		return DimLeases, 0, 1, true
	case FactLeaseDisproved:
		return DimLeases, -1, 1, true
	case FactWindow:
		return DimUptime, float64(f.OnlineSeconds) / 3600, float64(f.PromisedSeconds-f.OnlineSeconds) / 3600, true
	case FactNoticeHonoured:
		return DimNotices, 1, 0, true
	case FactNoticeBroken:
		return DimNotices, 0, 1, true
	case FactReceiptConsistent:
		return DimReceipts, 1, 0, true
	case FactReceiptInconsistent:
		return DimReceipts, 0, 1, true
	case FactChallengePassed:
		return DimChallenges, 1, 0, true
	case FactChallengeFailed:
		return DimChallenges, 0, 1, true
	}
	return "", 0, 0, false
}

// Add returns e with facts counted. A fact newer than e first decays e to
// the fact's time; a fact older than e counts as much as its age allows.
// Either way the result does not depend on the order facts arrive in.
func (p Params) Add(e Evidence, facts ...Fact) (Evidence, error) {
	for i := range facts {
		f := &facts[i]
		if err := f.Validate(); err != nil {
			return e, err
		}
		w := 1.0
		if e.At.IsZero() || f.At.After(e.At) {
			e = p.DecayedTo(e, f.At)
		} else {
			w = p.decay(e.At.Sub(f.At))
		}
		d, good, bad, _ := f.units()
		t := e.tally(d)
		t.Good = max(t.Good+w*good, 0) // a completion taken back that was never counted takes nothing
		t.Bad += w * bad
	}
	return e, nil
}

// FactsFromLease returns the facts a lease's end tells about its node, in
// the market's rules:
//
//   - succeeded: a completed lease;
//   - lost, or failed through the provider's fault: a failed lease, and,
//     when the lease had started and was guaranteed notice that it did not
//     get in full, a broken notice;
//   - preempted after notice: an honoured notice;
//   - cancelled, or failed through the workload: nothing.
//
// A lease that has not ended tells nothing yet.
func FactsFromLease(l *idlegrid.Lease) []Fact {
	if !l.State.Terminal() || l.EndedAt == nil {
		return nil
	}
	at := *l.EndedAt
	switch {
	case l.State == idlegrid.LeaseSucceeded:
		return []Fact{{Kind: FactLeaseCompleted, At: at}}
	case l.State == idlegrid.LeaseLost, l.State == idlegrid.LeaseFailed && l.Fault == idlegrid.FaultProvider:
		out := []Fact{{Kind: FactLeaseFailed, At: at}}
		if l.NoticeSeconds > 0 && l.StartedAt != nil && !noticeServed(l) {
			out = append(out, Fact{Kind: FactNoticeBroken, At: at})
		}
		return out
	case l.State == idlegrid.LeasePreempted && l.NoticeAt != nil:
		return []Fact{{Kind: FactNoticeHonoured, At: at}}
	}
	return nil
}

// noticeServed reports whether l ran out its full notice before it ended.
func noticeServed(l *idlegrid.Lease) bool {
	return l.NoticeAt != nil && !l.EndedAt.Before(l.NoticeAt.Add(time.Duration(l.NoticeSeconds)*time.Second))
}

// Span is a stretch of time, [Start, End).
type Span struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Seconds is the span's length in whole seconds.
func (s Span) Seconds() int64 { return int64(s.End.Sub(s.Start) / time.Second) }

// PromisedSpans lists the spans in [from, to) in which the schedule offers
// the node, merging windows that touch. A span longer than a day is cut at
// each UTC midnight, so that a node offered always still yields one window
// fact a day.
func PromisedSpans(s *idlegrid.Schedule, from, to time.Time) []Span {
	var merged []Span
	for t := from; t.Before(to); {
		if until := s.AvailableUntil(t); until.After(t) {
			end := minTime(until, to)
			if n := len(merged); n > 0 && merged[n-1].End.Equal(t) {
				merged[n-1].End = end
			} else {
				merged = append(merged, Span{Start: t, End: end})
			}
			t = end
			continue
		}
		next := s.NextOpening(t)
		if next.IsZero() || !next.After(t) {
			break
		}
		t = next
	}
	var out []Span
	for _, sp := range merged {
		out = append(out, cutAtMidnights(sp)...)
	}
	return out
}

func cutAtMidnights(sp Span) []Span {
	var out []Span
	for sp.End.Sub(sp.Start) > 24*time.Hour {
		y, m, d := sp.Start.UTC().Date()
		midnight := time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
		out = append(out, Span{Start: sp.Start, End: midnight})
		sp.Start = midnight
	}
	return append(out, sp)
}

// OnlineSpans turns heartbeats into the spans the node was online: each
// heartbeat shows the node online for one heartbeat interval after it, and
// overlapping or touching spans merge.
func OnlineSpans(heartbeats []time.Time, interval time.Duration) []Span {
	hb := slices.Clone(heartbeats)
	slices.SortFunc(hb, func(a, b time.Time) int { return a.Compare(b) })
	var out []Span
	for _, t := range hb {
		end := t.Add(interval)
		if n := len(out); n > 0 && !t.After(out[n-1].End) {
			out[n-1].End = maxTime(out[n-1].End, end)
			continue
		}
		out = append(out, Span{Start: t, End: end})
	}
	return out
}

// WindowFacts measures each promised span against the spans the node was
// online: one FactWindow per span, at its end. Spans shorter than a second
// are skipped.
func WindowFacts(promised, online []Span) []Fact {
	var out []Fact
	for _, p := range promised {
		secs := p.Seconds()
		if secs <= 0 {
			continue
		}
		var on time.Duration
		for _, o := range online {
			if s, e := maxTime(p.Start, o.Start), minTime(p.End, o.End); e.After(s) {
				on += e.Sub(s)
			}
		}
		out = append(out, Fact{Kind: FactWindow, At: p.End, PromisedSeconds: secs, OnlineSeconds: min(int64(on/time.Second), secs)})
	}
	return out
}

// ReceiptFact checks a receipt of a lease on gpus GPUs against the node's
// telemetry: the spans it was online, from its heartbeats. The receipt's
// interval is timed by the node's clock and the spans by the server's, so
// the interval is first moved by offset, the node's clock's offset found
// for the lease's receipts (ReceiptOffset). The receipt is consistent
// when it claims no more GPU-seconds than those GPUs could have run while
// the node was heard inside that interval, give or take tolerance
// (heartbeat granularity). The fact is dated at.
func ReceiptFact(r *idlegrid.Receipt, gpus int, online []Span, tolerance, offset time.Duration, at time.Time) Fact {
	if receiptFits(r, gpus, Heard(r.Start.Add(offset), r.End.Add(offset), online), tolerance) {
		return Fact{Kind: FactReceiptConsistent, At: at}
	}
	return Fact{Kind: FactReceiptInconsistent, At: at}
}

// receiptFits reports whether r claims no more than its GPUs could run in
// the time heard inside it, give or take tolerance.
func receiptFits(r *idlegrid.Receipt, gpus int, heard, tolerance time.Duration) bool {
	limit := min(heard+tolerance, r.End.Sub(r.Start))
	return r.GPUSeconds <= int64(gpus)*int64(limit/time.Second)
}

// ReceiptOffset is how far to move the times of one lease's receipts, rs
// (in order, as a node's receipts chain), to place them in the clock of
// the spans online: the offset within [lo, hi] at which the most of them
// fit the time heard inside them (ReceiptFact), then at which the most time
// is heard inside them, then the nearest 0, to the second. A node times
// its receipts with its own clock, which may be off the server's; an
// honest node's receipts fit at its clock's offset. The caller bounds the
// offset by the skew the server accepts and by when the lease can have
// begun. The offset is one for the whole lease, as a clock's is: a node
// that bills time in which it was not heard cannot move each receipt to
// the time heard nearest it.
func ReceiptOffset(rs []idlegrid.Receipt, gpus int, online []Span, tolerance, lo, hi time.Duration) time.Duration {
	if lo > hi {
		return 0
	}
	var best time.Duration
	bestFit, bestHeard := -1, time.Duration(-1)
	try := func(d time.Duration) {
		if d < lo || d > hi {
			return
		}
		fit, heard := 0, time.Duration(0)
		j := 0
		for i := range rs {
			start, end := rs[i].Start.Add(d), rs[i].End.Add(d)
			for j < len(online) && !online[j].End.After(start) {
				j++
			}
			var on time.Duration
			for k := j; k < len(online) && online[k].Start.Before(end); k++ {
				if s, e := maxTime(start, online[k].Start), minTime(end, online[k].End); e.After(s) {
					on += e.Sub(s)
				}
			}
			heard += on
			if receiptFits(&rs[i], gpus, on, tolerance) {
				fit++
			}
		}
		if fit > bestFit || fit == bestFit && heard > bestHeard {
			best, bestFit, bestHeard = d, fit, heard
		}
	}
	zero := min(max(0, lo), hi)
	try(zero)
	for d := time.Second; zero+d <= hi || zero-d >= lo; d += time.Second {
		try(zero + d)
		try(zero - d)
	}
	try(lo)
	try(hi)
	return best
}

// Heard is how much of [start, end) the spans online cover; the spans are
// disjoint.
func Heard(start, end time.Time, online []Span) time.Duration {
	var on time.Duration
	for _, o := range online {
		if s, e := maxTime(start, o.Start), minTime(end, o.End); e.After(s) {
			on += e.Sub(s)
		}
	}
	return on
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
