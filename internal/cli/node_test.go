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
	r := run(t, renter, "node", "get", nodes[0].ID)
	if r.code != 0 || !strings.Contains(r.out, "rig") || !strings.Contains(r.out, "1xRTX4090") || !strings.Contains(r.out, "eu-west") {
		t.Errorf("a renter's node get: %s", r)
	}
}
