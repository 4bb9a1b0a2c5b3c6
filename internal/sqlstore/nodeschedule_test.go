package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// scheduleTests are the contract tests of owners' schedules; runStoreTests
// runs them with the rest.
var scheduleTests = []struct {
	name string
	test func(t *testing.T, db *sqlstore.DB)
}{
	{"NodeSchedule", testNodeSchedule},
}

func testNodeSchedule(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 1)
	published := n.Schedule
	evenings := idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, TimeZone: "UTC",
		Weekly: []idlegrid.WeeklyWindow{{Days: []string{"mon", "tue"}, Start: "18:00", End: "23:00"}}}
	always := idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}

	t.Run("NoOwnerSchedule", func(t *testing.T) {
		got, err := db.FindNodeSchedule(ctx, n.ID)
		mustOK(t, err)
		want := &idlegrid.NodeSchedule{NodeID: n.ID, Schedule: published, Published: published}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("FindNodeSchedule (-want +got):\n%s", diff)
		}
	})
	t.Run("Set", func(t *testing.T) {
		mustOK(t, db.SetNodeState(ctx, n.ID, idlegrid.NodeOffline, at(time.Minute)))
		got, err := db.SetNodeSchedule(ctx, n.ID, &evenings, at(time.Minute))
		mustOK(t, err)
		want := &idlegrid.NodeSchedule{NodeID: n.ID, Schedule: evenings, Owner: &evenings, Published: published, UpdatedAt: at(time.Minute)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("SetNodeSchedule (-want +got):\n%s", diff)
		}
		found, err := db.FindNodeSchedule(ctx, n.ID)
		mustOK(t, err)
		if diff := cmp.Diff(want, found); diff != "" {
			t.Errorf("FindNodeSchedule (-want +got):\n%s", diff)
		}
		node, err := db.FindNode(ctx, n.ID)
		mustOK(t, err)
		if diff := cmp.Diff(evenings, node.Schedule); diff != "" {
			t.Errorf("node's schedule (-want +got):\n%s", diff)
		}
		if node.State != idlegrid.NodeOffline {
			t.Errorf("node state = %s, want offline: setting a schedule must not change it", node.State)
		}
	})
	t.Run("AgentRepublishes", func(t *testing.T) {
		o := n.Offer
		o.Schedule = always
		mustOK(t, db.UpdateOffer(ctx, n.ID, o, "v2", at(2*time.Minute)))
		node, err := db.FindNode(ctx, n.ID)
		mustOK(t, err)
		if diff := cmp.Diff(evenings, node.Schedule); diff != "" {
			t.Errorf("after the agent published, schedule (-want +got):\n%s", diff)
		}
		got, err := db.FindNodeSchedule(ctx, n.ID)
		mustOK(t, err)
		if diff := cmp.Diff(always, got.Published); diff != "" {
			t.Errorf("published (-want +got):\n%s", diff)
		}
	})
	t.Run("Remove", func(t *testing.T) {
		got, err := db.SetNodeSchedule(ctx, n.ID, nil, at(3*time.Minute))
		mustOK(t, err)
		want := &idlegrid.NodeSchedule{NodeID: n.ID, Schedule: always, Published: always}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("SetNodeSchedule(nil) (-want +got):\n%s", diff)
		}
		node, err := db.FindNode(ctx, n.ID)
		mustOK(t, err)
		if diff := cmp.Diff(always, node.Schedule); diff != "" {
			t.Errorf("after removal, schedule (-want +got):\n%s", diff)
		}
	})
	t.Run("UnknownNode", func(t *testing.T) {
		_, err := db.SetNodeSchedule(ctx, "node_nope", &always, t0)
		wantCode(t, err, idlegrid.ENOTFOUND)
		_, err = db.FindNodeSchedule(ctx, "node_nope")
		wantCode(t, err, idlegrid.ENOTFOUND)
	})
}
