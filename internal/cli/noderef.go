package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// nodeRefMatches is the most nodes of one name nodeRef lists when the name
// is ambiguous.
const nodeRefMatches = 5

// nodeRef is the ID of the node ref names on the command line: ref itself
// when it is an ID as the server makes them (node_…, or any other kind's,
// which the server then says is not a node's), otherwise the one node of
// that name among those the caller lists (a provider its own, an admin
// every node, a renter the market's offers). None, or several, is an
// error saying what to give instead, but for a ref that only begins as an
// ID does ("node_b", an older ID): with no node of that name it is taken
// as an ID, and the server judges it.
func nodeRef(ctx context.Context, cl *client.Client, ref string) (string, error) {
	if isMadeID(ref) || !idlegrid.ValidNodeName(ref) { // the server says what is wrong with it
		return ref, nil
	}
	found, err := cl.ListNodes(ctx, idlegrid.NodeFilter{Name: ref, Limit: nodeRefMatches + 1})
	if err != nil {
		return "", fmt.Errorf("look for node %q by name: %w", ref, err)
	}
	switch {
	case len(found) == 0 && looksLikeID(ref):
		return ref, nil
	case len(found) == 0:
		return "", withHint(idlegrid.Errorf(idlegrid.ENOTFOUND, "no node named %q among the nodes you can list", ref),
			"'idlegrid node ls' lists them with their names and IDs; give a node's ID (node_…) or its name")
	case len(found) == 1:
		return found[0].ID, nil
	}
	return "", withHint(idlegrid.Errorf(idlegrid.ECONFLICT, "%s nodes are named %q: %s", atLeast(len(found)), ref, nodeIDs(found)),
		"give the ID of the one you mean")
}

// isMadeID reports whether s is an ID of a kind the CLI knows, as the
// server makes them.
func isMadeID(s string) bool { return looksLikeID(s) && idlegrid.IsMadeID(s) }

// looksLikeID reports whether s begins as an ID of some kind does.
func looksLikeID(s string) bool {
	for _, k := range idKinds {
		if strings.HasPrefix(s, k.prefix) {
			return true
		}
	}
	return false
}

// atLeast is how many nodes nodeRef found of one name: n, or "more than"
// the most it lists when it stopped looking.
func atLeast(n int) string {
	if n > nodeRefMatches {
		return fmt.Sprintf("more than %d", nodeRefMatches)
	}
	return fmt.Sprint(n)
}

// nodeIDs lists the first nodeRefMatches of nodes, with their providers.
func nodeIDs(nodes []*idlegrid.Node) string {
	var out []string
	for _, n := range nodes[:min(len(nodes), nodeRefMatches)] {
		out = append(out, n.ID+" (provider "+n.ProviderID+")")
	}
	return strings.Join(out, ", ")
}

// nodeClient is r's client and the ID of the node ref names (nodeRef),
// for the commands that act on one node.
func (r *remote) nodeClient(ctx context.Context, ref string) (*client.Client, string, error) {
	cl, err := r.client()
	if err != nil {
		return nil, "", err
	}
	id, err := nodeRef(ctx, cl, ref)
	if err != nil {
		return nil, "", err
	}
	return cl, id, nil
}
