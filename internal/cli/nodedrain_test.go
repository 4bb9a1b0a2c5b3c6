package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestNodeDrain: a provider drains their node and --wait says at once that
// it is empty (moneyMarket's lease has ended); node ls and node get show
// the drain; the renters' view leaves the node out; --undo offers it
// again; a renter may not drain it.
func TestNodeDrain(t *testing.T) {
	_, renter, provider, _, _ := moneyMarket(t)
	r := run(t, provider, "node", "ls", "--json")
	var rows []nodeRow
	if r.code != 0 || json.Unmarshal([]byte(r.out), &rows) != nil || len(rows) != 1 {
		t.Fatalf("node ls: %s", r)
	}
	id := rows[0].ID

	r = run(t, provider, "node", "drain", id, "--wait", "--every", "500ms", "--timeout", "20s")
	if r.code != 0 || !strings.Contains(r.out, "rig ("+id+") draining since ") || !strings.Contains(r.out, "rig is empty: no lease is left on it") {
		t.Fatalf("node drain --wait: %s", r)
	}
	if r := run(t, provider, "node", "ls"); !strings.Contains(r.out, "online, draining") {
		t.Errorf("node ls of a draining node:\n%s", r.out)
	}
	if r := run(t, provider, "node", "get", id); !strings.Contains(r.out, "takes no new leases; 'idlegrid node drain "+id+" --undo' ends it") {
		t.Errorf("node get of a draining node:\n%s", r.out)
	}
	if r := run(t, renter, "node", "ls", "--json"); r.code != 0 || strings.Contains(r.out, id) {
		t.Errorf("the renters' view lists the draining node: %s", r)
	}
	if r := run(t, renter, "node", "drain", id); r.code == 0 {
		t.Errorf("a renter drained a node: %s", r)
	}
	if r := run(t, provider, "node", "drain", id, "--undo", "--wait"); r.code != 2 || !strings.Contains(r.err, "does not go with --undo") {
		t.Errorf("node drain --undo --wait: %s", r)
	}
	r = run(t, provider, "node", "drain", id, "--undo", "--json")
	var n idlegrid.Node
	if r.code != 0 || json.Unmarshal([]byte(r.out), &n) != nil || n.DrainingSince != nil {
		t.Errorf("node drain --undo: %s", r)
	}
	if r := run(t, renter, "node", "ls", "--json"); !strings.Contains(r.out, id) {
		t.Errorf("the renters' view leaves out the node drained no more: %s", r)
	}
}

func TestLeftOn(t *testing.T) {
	started := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	noticed := started.Add(time.Hour)
	got := leftOn([]*idlegrid.Lease{
		{ID: "lease_s", Tier: idlegrid.TierSilver, StartedAt: &started, LimitSeconds: 7200},
		{ID: "lease_b", Tier: idlegrid.TierBronze, StartedAt: &started, LimitSeconds: 7200,
			StopRequested: "notice: node rig is draining", NoticeAt: &noticed, NoticeSeconds: 120},
		{ID: "lease_a", Tier: idlegrid.TierGold},
	})
	want := "3 leases left: silver lease_s (ends by 2026-12-03T12:00:00Z), bronze lease_b (stops by 2026-12-03T11:02:00Z), gold lease_a (not started yet)"
	if got != want {
		t.Errorf("leftOn = %q\nwant     %q", got, want)
	}
}

// TestNodeRetire: retiring a node cannot be undone, so off a terminal it
// retires nothing without --yes, saying what it would do and how to; with
// --yes the node is retired and its key refused.
func TestNodeRetire(t *testing.T) {
	_, _, provider, _, _ := moneyMarket(t)
	var rows []nodeRow
	if r := run(t, provider, "node", "ls", "--json"); r.code != 0 || json.Unmarshal([]byte(r.out), &rows) != nil || len(rows) != 1 {
		t.Fatalf("node ls: %s", r)
	}
	id := rows[0].ID
	r := run(t, provider, "node", "retire", id)
	if r.code != 2 || !strings.Contains(r.err, "node "+id+" (rig, online): retiring it refuses its key for ever") ||
		!strings.Contains(r.err, "retired nothing: retire node "+id+" with --yes") {
		t.Fatalf("node retire without --yes: %s; want it refused, saying what it would do", r)
	}
	if r := run(t, provider, "node", "get", id, "--json"); r.code != 0 || strings.Contains(r.out, `"retired"`) {
		t.Fatalf("the node after a refused retire: %s", r)
	}
	var n idlegrid.Node
	mustJSON(t, provider, &n, "node", "retire", id, "--yes", "--json")
	if n.State != idlegrid.NodeRetired {
		t.Errorf("node retire --yes: state %s, want retired", n.State)
	}
}
