package cli

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// TestNodeRef: the node commands take a node's name as well as its ID:
// one node of the name is that node; none says how to find one; two (a
// second agent joined under the same name) list both IDs to choose from,
// as node ls --name lists both. A name that begins as an ID does is still
// a name; with no node of it, it is an ID the server does not know.
func TestNodeRef(t *testing.T) {
	_, renter, provider, _, _ := moneyMarket(t)
	ctx := context.Background()
	cl := client.New(provider["IDLEGRID_ADDR"], provider["IDLEGRID_KEY"])
	nodes, err := cl.ListNodes(ctx, idlegrid.NodeFilter{})
	if err != nil || len(nodes) != 1 {
		t.Fatalf("the provider's nodes: %v (%v), want rig alone", nodes, err)
	}
	rig := nodes[0].ID

	if r := run(t, provider, "node", "get", "rig"); r.code != 0 || !strings.Contains(r.out, rig) {
		t.Errorf("node get rig: %s", r)
	}
	if r := run(t, renter, "node", "reputation", "rig"); r.code != 0 || !strings.Contains(r.out, rig) {
		t.Errorf("node reputation rig, as a renter: %s", r)
	}
	if r := run(t, provider, "node", "drain", "rig", "--json"); r.code != 0 || !strings.Contains(r.out, `"draining_since"`) {
		t.Errorf("node drain rig: %s", r)
	}
	r := run(t, provider, "node", "get", "barn")
	if r.code == 0 || !strings.Contains(r.err, `no node named "barn" among the nodes you can list`) || !strings.Contains(r.err, "idlegrid node ls") {
		t.Errorf("node get barn, which is none: %s", r)
	}

	joined := joinNode(t, cl, provider["IDLEGRID_ADDR"], "rig")
	r = run(t, provider, "node", "get", "rig")
	if r.code == 0 || !strings.Contains(r.err, `2 nodes are named "rig": `) || !strings.Contains(r.err, rig) ||
		!strings.Contains(r.err, joined.NodeID) || !strings.Contains(r.err, "give the ID of the one you mean") {
		t.Errorf("node get rig, of two: %s", r)
	}
	if r := run(t, provider, "node", "get", joined.NodeID); r.code != 0 || !strings.Contains(r.out, joined.NodeID) {
		t.Errorf("node get by ID: %s", r)
	}
	var rows []nodeRow
	mustJSON(t, provider, &rows, "node", "ls", "--name", "rig")
	if len(rows) != 2 {
		t.Errorf("node ls --name rig: %d nodes, want both", len(rows))
	}
	if r := run(t, provider, "node", "ls", "--name", "barn"); r.code != 0 || !strings.Contains(r.out, "no node matches --name barn") {
		t.Errorf("node ls --name barn: %s", r)
	}
	if r := run(t, provider, "node", "ls", "--name", "a rig"); r.code != 2 || !strings.Contains(r.err, `--name: "a rig" is not a node's name`) {
		t.Errorf("node ls --name 'a rig': %s", r)
	}

	spare := joinNode(t, cl, provider["IDLEGRID_ADDR"], "node_spare")
	if r := run(t, provider, "node", "get", "node_spare"); r.code != 0 || !strings.Contains(r.out, spare.NodeID) {
		t.Errorf("node get node_spare, a name like an ID: %s", r)
	}
	if r := run(t, provider, "node", "get", "node_gone"); r.code == 0 || !strings.Contains(r.err, `node "node_gone" not found`) {
		t.Errorf("node get node_gone, neither a name nor an ID: %s", r)
	}
}

// joinNode joins a node of one GPU named name to the provider cl acts for.
func joinNode(t *testing.T, cl *client.Client, addr, name string) *idlegrid.JoinResponse {
	t.Helper()
	_, token, err := cl.CreateJoinToken(context.Background(), name, 1, time.Hour)
	mustOK(t, err)
	joined, err := joinWith(t, addr, token, name)
	mustOK(t, err)
	return joined
}

// joinWith joins a node of one GPU named name with join token secret.
func joinWith(t *testing.T, addr, secret, name string) (*idlegrid.JoinResponse, error) {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	mustOK(t, err)
	return client.NewAgent(addr, key).Join(context.Background(), idlegrid.JoinRequest{Token: secret, Offer: idlegrid.Offer{
		Name: name, GPUs: []idlegrid.GPU{{UUID: "GPU-" + name, Model: "RTX4090", VRAMMB: 24576}}, Region: "eu-west", Residency: "EU",
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways},
		Ask:      idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 400_000}}}})
}
