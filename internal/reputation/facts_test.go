package reputation

import (
	"slices"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

func TestFactsFromLease(t *testing.T) {
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	end := at(time.Hour)
	for _, tt := range []struct {
		name  string
		lease idlegrid.Lease
		want  []FactKind
	}{
		{"succeeded", idlegrid.Lease{State: idlegrid.LeaseSucceeded, StartedAt: at(0), EndedAt: end},
			[]FactKind{FactLeaseCompleted}},
		{"lost", idlegrid.Lease{State: idlegrid.LeaseLost, Fault: idlegrid.FaultProvider, StartedAt: at(0), EndedAt: end},
			[]FactKind{FactLeaseFailed}},
		{"failed by the node", idlegrid.Lease{State: idlegrid.LeaseFailed, Fault: idlegrid.FaultProvider, StartedAt: at(0), EndedAt: end},
			[]FactKind{FactLeaseFailed}},
		{"failed by the workload", idlegrid.Lease{State: idlegrid.LeaseFailed, Fault: idlegrid.FaultWorkload, StartedAt: at(0), EndedAt: end},
			nil},
		{"cancelled", idlegrid.Lease{State: idlegrid.LeaseCancelled, StartedAt: at(0), EndedAt: end}, nil},
		{"still running", idlegrid.Lease{State: idlegrid.LeaseRunning, StartedAt: at(0)}, nil},
		{"bronze lost without notice", idlegrid.Lease{State: idlegrid.LeaseLost, Fault: idlegrid.FaultProvider,
			NoticeSeconds: 120, StartedAt: at(0), EndedAt: end},
			[]FactKind{FactLeaseFailed, FactNoticeBroken}},
		{"bronze lost inside its notice", idlegrid.Lease{State: idlegrid.LeaseLost, Fault: idlegrid.FaultProvider,
			NoticeSeconds: 120, NoticeAt: at(time.Hour - time.Minute), StartedAt: at(0), EndedAt: end},
			[]FactKind{FactLeaseFailed, FactNoticeBroken}},
		{"bronze lost after its notice ran out", idlegrid.Lease{State: idlegrid.LeaseLost, Fault: idlegrid.FaultProvider,
			NoticeSeconds: 120, NoticeAt: at(time.Hour - 3*time.Minute), StartedAt: at(0), EndedAt: end},
			[]FactKind{FactLeaseFailed}},
		{"bronze never started", idlegrid.Lease{State: idlegrid.LeaseLost, Fault: idlegrid.FaultProvider,
			NoticeSeconds: 120, EndedAt: end},
			[]FactKind{FactLeaseFailed}},
		{"bronze preempted after notice", idlegrid.Lease{State: idlegrid.LeasePreempted, NoticeSeconds: 120,
			NoticeAt: at(time.Hour - 2*time.Minute), StartedAt: at(0), EndedAt: end},
			[]FactKind{FactNoticeHonoured}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []FactKind
			for _, f := range FactsFromLease(&tt.lease) {
				got = append(got, f.Kind)
				if !f.At.Equal(*end) {
					t.Errorf("%s at %s, want the lease's end", f.Kind, f.At)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPromisedSpans(t *testing.T) {
	t.Run("weekly windows", func(t *testing.T) {
		s := &idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, Weekly: []idlegrid.WeeklyWindow{
			{Days: []string{"mon", "wed"}, Start: "18:00", End: "23:00"},
			{Days: []string{"wed"}, Start: "23:00", End: "02:00"}, // touches the one before
		}}
		got := PromisedSpans(s, t0, t0.Add(7*day))
		want := []Span{
			{t0.Add(18 * time.Hour), t0.Add(23 * time.Hour)},
			{t0.Add(2*day + 18*time.Hour), t0.Add(3*day + 2*time.Hour)},
		}
		if !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("always, cut at midnight", func(t *testing.T) {
		s := &idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
		from := t0.Add(20 * time.Hour)
		got := PromisedSpans(s, from, from.Add(30*time.Hour))
		want := []Span{{from, t0.Add(day)}, {t0.Add(day), t0.Add(2 * day)}, {t0.Add(2 * day), from.Add(30 * time.Hour)}}
		if !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("starting inside a window", func(t *testing.T) {
		s := &idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, Weekly: []idlegrid.WeeklyWindow{
			{Days: []string{"mon"}, Start: "18:00", End: "23:00"}}}
		got := PromisedSpans(s, t0.Add(20*time.Hour), t0.Add(22*time.Hour))
		if want := []Span{{t0.Add(20 * time.Hour), t0.Add(22 * time.Hour)}}; !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

func TestWindowFacts(t *testing.T) {
	// Heartbeats every 30 s from 18:00 to 20:00, none until 21:00, then
	// again to 23:00: one hour of an evening's five-hour window missed.
	var beats []time.Time
	for ts := t0.Add(18 * time.Hour); ts.Before(t0.Add(23 * time.Hour)); ts = ts.Add(30 * time.Second) {
		if ts.Before(t0.Add(20*time.Hour)) || !ts.Before(t0.Add(21*time.Hour)) {
			beats = append(beats, ts)
		}
	}
	online := OnlineSpans(beats, 30*time.Second)
	if want := []Span{{t0.Add(18 * time.Hour), t0.Add(20 * time.Hour)}, {t0.Add(21 * time.Hour), t0.Add(23 * time.Hour)}}; !slices.Equal(online, want) {
		t.Fatalf("online: got %v, want %v", online, want)
	}
	got := WindowFacts([]Span{{t0.Add(18 * time.Hour), t0.Add(23 * time.Hour)}, {t0.Add(day), t0.Add(day)}}, online)
	want := []Fact{{Kind: FactWindow, At: t0.Add(23 * time.Hour), PromisedSeconds: 5 * 3600, OnlineSeconds: 4 * 3600}}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	e := mustAdd(t, DefaultParams(), Evidence{}, got...)
	if !near(e.Uptime.Good, 4) || !near(e.Uptime.Bad, 1) {
		t.Errorf("uptime: got %+v, want 4 good hours and 1 bad", e.Uptime)
	}
}

func TestReceiptFact(t *testing.T) {
	// The node was online 10:00-10:40 and 10:50-11:00.
	online := []Span{{t0.Add(10 * time.Hour), t0.Add(10*time.Hour + 40*time.Minute)}, {t0.Add(10*time.Hour + 50*time.Minute), t0.Add(11 * time.Hour)}}
	r := func(gpuSeconds int64) *idlegrid.Receipt {
		return &idlegrid.Receipt{LeaseID: "lea_1", Seq: 1, Start: t0.Add(10 * time.Hour), End: t0.Add(11 * time.Hour), GPUSeconds: gpuSeconds}
	}
	at := t0.Add(11 * time.Hour)
	for _, tt := range []struct {
		name       string
		gpuSeconds int64
		tolerance  time.Duration
		want       FactKind
	}{
		{"what ran while online", 2 * 50 * 60, 0, FactReceiptConsistent},
		{"a second more", 2*50*60 + 1, 0, FactReceiptInconsistent},
		{"inside the tolerance", 2 * 51 * 60, time.Minute, FactReceiptConsistent},
		{"the whole hour, offline for ten minutes", 2 * 3600, time.Minute, FactReceiptInconsistent},
	} {
		if got := ReceiptFact(r(tt.gpuSeconds), 2, online, tt.tolerance, 0, at); got.Kind != tt.want || !got.At.Equal(at) {
			t.Errorf("%s: got %+v, want %s", tt.name, got, tt.want)
		}
	}
	if got := ReceiptFact(r(2*3600), 2, []Span{{t0, t0.Add(day)}}, time.Hour, 0, at); got.Kind != FactReceiptConsistent {
		t.Errorf("online all along: got %s", got.Kind)
	}
}

// A lease's receipts are timed by the node's clock, the heartbeats by the
// server's: within the skew allowed, they are judged at the one offset at
// which they fit best, so an honest node whose clock is off is not taken
// for one that bills unheard time, while one that was away is, and one
// heard half the time cannot move each receipt to where it was heard.
func TestReceiptOffset(t *testing.T) {
	const skew, tolerance = 2 * time.Minute, 10 * time.Second
	at := t0.Add(day)
	ten := t0.Add(10 * time.Hour)
	// receipts are one-minute receipts on one GPU, by the node's clock,
	// from start.
	receipts := func(start time.Time, n int) []idlegrid.Receipt {
		var out []idlegrid.Receipt
		for i := range n {
			s := start.Add(time.Duration(i) * time.Minute)
			out = append(out, idlegrid.Receipt{LeaseID: "lea_1", Seq: int64(i + 1), Start: s, End: s.Add(time.Minute), GPUSeconds: 60})
		}
		return out
	}
	// Heard from 10:00 to 10:05 by the server's clock.
	heard := []Span{{ten, ten.Add(5 * time.Minute)}}
	// Heard every other 10 s from 9:50 to 10:10.
	var halves []Span
	for i := range 60 {
		s := ten.Add(-10*time.Minute + time.Duration(i)*20*time.Second)
		halves = append(halves, Span{s, s.Add(10 * time.Second)})
	}
	for _, tt := range []struct {
		name   string
		rs     []idlegrid.Receipt
		online []Span
		skew   time.Duration // either way
		offset time.Duration
		fit    int // receipts consistent at the offset
	}{
		{"the node's clock right", receipts(ten, 5), heard, skew, 0, 5},
		{"the node's clock 90 s fast", receipts(ten.Add(90*time.Second), 5), heard, skew, -90 * time.Second, 5},
		{"the same without the skew allowed", receipts(ten.Add(90*time.Second), 5), heard, 0, 0, 3},
		{"the node's clock 2 min slow", receipts(ten.Add(-2*time.Minute), 5), heard, skew, 2 * time.Minute, 5},
		{"billed 4 more minutes after it went away", receipts(ten, 9), heard, skew, 0, 5},
		{"heard every other 10 s", receipts(ten.Add(-5*time.Minute), 10), halves, skew, 0, 0},
	} {
		off := ReceiptOffset(tt.rs, 1, tt.online, tolerance, -tt.skew, tt.skew)
		if tt.name != "heard every other 10 s" && off != tt.offset {
			t.Errorf("%s: offset %s, want %s", tt.name, off, tt.offset)
		}
		fit := 0
		for i := range tt.rs {
			if ReceiptFact(&tt.rs[i], 1, tt.online, tolerance, off, at).Kind == FactReceiptConsistent {
				fit++
			}
		}
		if fit != tt.fit {
			t.Errorf("%s: %d receipts consistent at %s, want %d", tt.name, fit, off, tt.fit)
		}
	}
	// Bounded to when the lease can have begun, the first receipt cannot
	// borrow time heard before it.
	if off := ReceiptOffset(receipts(ten.Add(5*time.Minute), 2), 1, heard, tolerance, 0, skew); off != 0 {
		t.Errorf("receipts after the time heard, not to be moved back: offset %s, want 0", off)
	}
	if off := ReceiptOffset(receipts(ten.Add(5*time.Minute), 2), 1, heard, tolerance, -skew, skew); off != -2*time.Minute {
		t.Errorf("receipts after the time heard, unbounded: offset %s, want -2m0s", off)
	}
}
