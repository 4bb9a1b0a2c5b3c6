package cli

import (
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// TestNode_asRenter: a renter lists the nodes on offer and reads one, as
// the market shows them.
func TestNode_asRenter(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t) // one node, "rig": an RTX4090 in eu-west
	var nodes []*idlegrid.Node
	mustJSON(t, renter, &nodes, "node", "ls", "--limit", "5")
	if len(nodes) != 1 || nodes[0].Name != "rig" || nodes[0].PublicKey == "" {
		t.Fatalf("a renter's node ls = %+v, want rig with its public key", nodes)
	}
	mustJSON(t, renter, &nodes, "node", "ls", "--gpu-model", "H100-80GB,A100-80GB")
	if len(nodes) != 0 {
		t.Errorf("a renter's H100s and A100s = %+v, want none", nodes)
	}
	mustJSON(t, renter, &nodes, "node", "ls", "--gpu-model", "RTX4090", "--region", "us-east,eu-west")
	if len(nodes) != 1 {
		t.Fatalf("a renter's RTX4090s in us-east or eu-west = %+v, want rig", nodes)
	}
	if r := run(t, renter, "node", "ls", "--region", "EU-West"); r.code != 1 || !strings.Contains(r.err, `"EU-West" is not a region`) {
		t.Errorf("node ls --region EU-West: %s", r)
	}
	r := run(t, renter, "node", "get", nodes[0].ID)
	if r.code != 0 || !strings.Contains(r.out, "rig") || !strings.Contains(r.out, "1xRTX4090") || !strings.Contains(r.out, "eu-west") {
		t.Errorf("a renter's node get: %s", r)
	}
}
