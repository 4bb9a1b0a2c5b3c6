package sqlstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// testHeartbeatSpans: heartbeats within the jitter allowance extend a
// span, a skipped one starts another, and old spans are pruned.
func testHeartbeatSpans(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 1)
	const interval, jitter = 10 * time.Second, 5 * time.Second
	beat := func(d time.Duration, prune time.Time) {
		t.Helper()
		if err := db.NoteHeartbeat(ctx, n.ID, at(d), interval, jitter, prune); err != nil {
			t.Fatalf("NoteHeartbeat(%s): %v", d, err)
		}
	}
	// 0, 10, 24 (4 s late: jitter), 34: one span to 44.
	for _, d := range []time.Duration{0, 10 * time.Second, 24 * time.Second, 34 * time.Second} {
		beat(d, time.Time{})
	}
	beat(30*time.Second, time.Time{})                  // out of order, inside the span: changes nothing but the count
	beat(54*time.Second+time.Microsecond, time.Time{}) // 44 + 10: a heartbeat skipped, a gap of 10 s
	got, err := db.ListHeartbeatSpans(ctx, n.ID, at(0), at(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []idlegrid.HeartbeatSpan{
		{NodeID: n.ID, Start: at(0), End: at(44 * time.Second), Heartbeats: 5},
		{NodeID: n.ID, Start: at(54*time.Second + time.Microsecond), End: at(64*time.Second + time.Microsecond), Heartbeats: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("spans (-want +got):\n%s", diff)
	}
	if got, _ := db.ListHeartbeatSpans(ctx, n.ID, at(45*time.Second), at(50*time.Second)); len(got) != 0 {
		t.Errorf("spans in the gap = %+v, want none", got)
	}
	beat(2*time.Hour, at(time.Hour)) // a new span prunes those that ended before the hour
	got, err = db.ListHeartbeatSpans(ctx, n.ID, at(0), at(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got[0].Start.Equal(at(2*time.Hour)) {
		t.Errorf("after pruning: %+v, want the one span from 2h", got)
	}
	if err := db.NoteHeartbeat(ctx, n.ID, at(0), 0, 0, time.Time{}); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("NoteHeartbeat(interval 0) = %v, want EINVALID", err)
	}
}

// testHeartbeatsTogether sends heartbeats for many nodes at once, so that
// they share commits, with one for a node that does not exist among them:
// it alone fails, not found, and every other is recorded.
func testHeartbeatsTogether(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	const nodes, rounds = 24, 3
	ids := make([]string, nodes)
	for i := range ids {
		ids[i] = mustNode(t, db, p.ID, 1).ID
	}
	ids = append(ids, "node_missing")
	var wg sync.WaitGroup
	errs := make([][]error, len(ids))
	for i, id := range ids {
		wg.Go(func() {
			for r := range rounds {
				beat := at(time.Duration(r) * 10 * time.Second)
				_, err := db.Heartbeat(ctx, id, beat)
				errs[i] = append(errs[i], err, db.NoteHeartbeat(ctx, id, beat, 10*time.Second, 5*time.Second, time.Time{}))
			}
		})
	}
	wg.Wait()
	for i, id := range ids[:nodes] {
		if err := errors.Join(errs[i]...); err != nil {
			t.Errorf("node %s: %v", id, err)
		}
		n, err := db.FindNode(ctx, id)
		if err != nil || n.State != idlegrid.NodeOnline || !n.LastHeartbeat.Equal(at(20*time.Second)) {
			t.Errorf("node %s: %+v (%v), want online, last heard at 20 s", id, n, err)
		}
		spans, err := db.ListHeartbeatSpans(ctx, id, at(0), at(time.Hour))
		if err != nil || len(spans) != 1 || spans[0].Heartbeats != rounds {
			t.Errorf("node %s spans = %+v (%v), want one of %d heartbeats", id, spans, err, rounds)
		}
	}
	if got := idlegrid.ErrorCode(errs[nodes][0]); got != idlegrid.ENOTFOUND {
		t.Errorf("the missing node's heartbeat: %v, want not found", errs[nodes][0])
	}
}
