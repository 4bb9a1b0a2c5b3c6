package market

import (
	"testing"
	"time"
	"unsafe"

	"github.com/idlegrid/idlegrid"
)

// The index's whole-second times must keep every date a clock may give,
// from the unix epoch on: a time that rounds to 0 reads as "none", and a
// bronze lease so read could never be preempted.
func TestIndexSeconds(t *testing.T) {
	for _, at := range []time.Time{
		time.Unix(0, 0),
		time.Date(2000, 1, 1, 0, 0, 5, 0, time.UTC), // the server tests' fake clock
		time.Date(2026, 11, 30, 12, 0, 0, 500, time.UTC),
		time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		ns := at.UnixNano()
		up, down := secUp(ns), secDown(ns)
		if up == 0 || down == 0 {
			t.Errorf("%s: secUp %d, secDown %d; want both above 0", at, up, down)
		}
		if secNanos(down) > ns || secNanos(up) < ns {
			t.Errorf("%s: [%d, %d] does not bound it", at, secNanos(down), secNanos(up))
		}
	}
}

// Bounding a shelf for a search should read two cache lines: the fields
// before lbs, and the head of one lbs entry (gen, n, done, from, val[0]).
// That holds while the shelf starts a line, as Go's size classes above
// 1 KiB (all multiples of 64 bytes) place a class or a sub-shelf.
func TestShelfLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is planned for 64-bit pointers")
	}
	var s shelf
	var l lbEntry
	if got := unsafe.Offsetof(s.lbs); got != 64 {
		t.Errorf("lbs at byte %d, want 64", got)
	}
	if got := unsafe.Offsetof(l.val) + unsafe.Sizeof(l.val[0]); got > 32 {
		t.Errorf("an lbs entry's head ends at byte %d, want at most 32", got)
	}
	if got := unsafe.Sizeof(l); got%32 != 0 {
		t.Errorf("an lbs entry is %d bytes, want a multiple of 32", got)
	}
}

// Nodes offered around the clock and nodes offered in windows are apart
// in classes, though their offers are otherwise alike, so that a windowed
// class whose windows all end too soon for a job is passed over at its
// shelf's root rather than node by node among open nodes of the same
// price. The split changes no decision.
func TestClass_windowedApart(t *testing.T) {
	at := time.Date(2025, 3, 10, 15, 30, 0, 0, time.UTC) // a Monday
	node := func(id string, silver idlegrid.Micros) *idlegrid.Node {
		return &idlegrid.Node{ID: id, ProviderID: "prov_" + id, State: idlegrid.NodeOnline, Reliability: 1,
			Offer: idlegrid.Offer{Name: id, CPUCores: 32, RAMMB: 256000, Region: "eu-west", Residency: "EU",
				GPUs:     []idlegrid.GPU{{UUID: id + "-gpu-0", Model: "H100-80GB", VRAMMB: 81920}},
				Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways},
				Ask:      idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: silver}}}}
	}
	always, office := node("always", 2_000_000), node("office", 1_000_000)
	office.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, Weekly: []idlegrid.WeeklyWindow{
		{Days: []string{"mon", "tue", "wed", "thu", "fri"}, Start: "09:00", End: "16:00"}}} // UTC: 30 minutes left
	e := NewEngine(Config{})
	e.Advance(at)
	e.UpsertNode(always)
	e.UpsertNode(office)
	if len(e.classes) != 2 || e.nodes["always"].cls == e.nodes["office"].cls {
		t.Fatalf("%d classes, the two nodes' the same: %v; want two", len(e.classes), e.nodes["always"].cls == e.nodes["office"].cls)
	}
	job := func(id string, minutes int64) *idlegrid.Job {
		return &idlegrid.Job{ID: id, State: idlegrid.JobQueued, JobSpec: idlegrid.JobSpec{Kind: idlegrid.KindTraining, Image: "x",
			GPUs: 1, Nodes: 1, Tier: idlegrid.TierSilver, MaxPriceMicrosPerGPUHour: 5_000_000, DurationSeconds: minutes * 60}}
	}
	long, short := job("long", 120), job("short", 20)
	q := e.query(long, at)
	e.nodes["office"].cls.clean()
	e.nodes["always"].cls.clean()
	if e.nodes["office"].cls.root.mayPlace(&q) {
		t.Error("the windowed class's root may place a 2-hour job with 30 minutes of window left")
	}
	if !e.nodes["always"].cls.root.mayPlace(&q) {
		t.Error("the always-open class's root may not place the 2-hour job")
	}
	for _, c := range []struct {
		j    *idlegrid.Job
		want string
	}{{long, "always"}, {short, "office"}} {
		if d := e.Place(c.j, at); !d.Placed() || d.Picks[0].Node.ID != c.want {
			t.Errorf("%s: placed %v %+v, want on %s", c.j.ID, d.Placed(), d.Picks, c.want)
		}
	}
}
