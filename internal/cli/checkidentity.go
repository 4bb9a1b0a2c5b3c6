package cli

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	igclient "github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// checkIdentity says whether the node has its key and has joined, and
// what the server says of it: whether it knows the node, or would take its
// join token. It changes nothing: no key is made, no token used.
func (c *agentCheck) checkIdentity(ctx context.Context) {
	if c.cfg == nil {
		c.add("identity", checkWarn, "skipped: the config is not valid", "")
		return
	}
	keyPath := c.cfg.KeyPath()
	key := "no key yet: the agent creates " + keyPath + " on its first start"
	var priv ed25519.PrivateKey
	if _, err := os.Stat(keyPath); err == nil {
		if priv, err = nodekey.LoadOrCreate(keyPath); err != nil {
			c.add("identity", checkFail, err.Error(), "")
			return
		}
		key = "key " + keyPath + " (" + dockerNodeID(priv) + ")"
	} else if err := dirWritable(c.cfg.DataDir); err != nil {
		c.add("identity", checkFail, "the data dir cannot be used: "+err.Error(),
			"create it for the agent's user, e.g. sudo install -d -m 700 "+c.cfg.DataDir)
		return
	}
	st, err := agent.ReadState(c.cfg.DataDir)
	switch {
	case err != nil:
		c.add("identity", checkFail, key+"; "+err.Error(), "")
	case st != nil && serverURL(st.Server) != serverURL(c.cfg.Server):
		c.add("identity", checkFail, fmt.Sprintf("%s; joined %s as %s, not %s", key, st.Server, st.NodeID, c.cfg.Server),
			"to join another server, move "+agent.StatePath(c.cfg.DataDir)+" away")
	case st != nil && priv == nil:
		c.add("identity", checkFail, fmt.Sprintf("joined as %s, but %s is gone: the node cannot sign as itself", st.NodeID, keyPath),
			"put the node's key back, or move "+agent.StatePath(c.cfg.DataDir)+" away and give the agent a join token, to join as a new node")
	case st != nil:
		c.askNode(ctx, fmt.Sprintf("%s; joined as %s (provider %s) on %s", key, st.NodeID, st.ProviderID, st.JoinedAt.Format(time.DateOnly)), priv, st.NodeID)
	case c.cfg.JoinToken == "":
		c.add("identity", checkFail, key+"; not joined yet, and no join token",
			"set join_token in the config or "+agent.EnvJoinToken+" (a provider makes one with 'idlegrid token create')")
	default:
		c.askJoinToken(ctx, key+"; not joined yet: the agent joins with its join token")
	}
}

// askNode asks the server, signing as the node, what it knows of it.
func (c *agentCheck) askNode(ctx context.Context, joined string, key ed25519.PrivateKey, nodeID string) {
	if !c.serverUp {
		c.add("identity", checkWarn, joined+"; not asked: the server did not answer", "")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, checkHTTPTimeout)
	defer cancel()
	a := igclient.NewAgent(serverURL(c.cfg.Server), key)
	a.SetNodeID(nodeID)
	n, err := a.Node(ctx)
	msg := idlegrid.ErrorMessage(err)
	switch code := idlegrid.ErrorCode(err); {
	case err == nil:
		c.nodeStanding(joined, n)
	case code == idlegrid.EUNAUTHORIZED && strings.Contains(msg, nodekey.BadSignatureWords):
		c.add("identity", checkFail, joined+"; the server knows the node by another key than "+c.cfg.KeyPath()+": it refuses its signature",
			"put the node's own key back, or move "+agent.StatePath(c.cfg.DataDir)+" away and give the agent a join token, to join as a new node")
	case code == idlegrid.EUNAUTHORIZED && strings.Contains(msg, nodekey.UnknownWords):
		c.add("identity", checkFail, joined+"; the server does not know it: its database was reset, or restored from before the node joined",
			"to join as a new node, move "+agent.StatePath(c.cfg.DataDir)+" away and give the agent a join token")
	case code == idlegrid.EFORBIDDEN:
		c.add("identity", checkFail, joined+"; the server refuses it: "+msg,
			"a retired node serves no more: start the agent with an empty data dir (a new node key) and a join token")
	default:
		c.add("identity", checkWarn, joined+"; could not ask the server about it: "+err.Error(), "")
	}
}

// nodeStanding is the identity line of a node the server knows: a
// warning when it takes no new leases (quarantined or draining), saying
// what ends it.
func (c *agentCheck) nodeStanding(joined string, n *idlegrid.Node) {
	known := fmt.Sprintf("%s; the server knows it (%s)", joined, n.State)
	switch {
	case n.Quarantined:
		c.add("identity", checkWarn, known+", but it is quarantined: it takes no new leases",
			"'idlegrid node quarantine ls' says why; an admin lifts it ('idlegrid node quarantine lift "+n.ID+"')")
	case n.DrainingSince != nil:
		c.add("identity", checkWarn, known+", but it is draining since "+n.DrainingSince.UTC().Format(time.RFC3339)+": it takes no new leases",
			"end the drain with 'idlegrid node drain "+n.ID+" --undo'")
	default:
		c.add("identity", checkOK, known, "")
	}
}

// askJoinToken asks the server whether the config's join token would let
// the node join now, without using it.
func (c *agentCheck) askJoinToken(ctx context.Context, detail string) {
	if !c.serverUp {
		c.add("identity", checkWarn, detail+"; the token is not checked: the server did not answer", "")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, checkHTTPTimeout)
	defer cancel()
	t, err := igclient.New(serverURL(c.cfg.Server), "").CheckJoinToken(ctx, c.cfg.JoinToken)
	switch code := idlegrid.ErrorCode(err); {
	case err == nil:
		c.add("identity", checkOK, fmt.Sprintf("%s (token %q of provider %s: %s, until %s)",
			detail, t.Name, t.ProviderID, usesLeft(t), t.ExpiresAt.UTC().Format(time.RFC3339)), "")
	case code == idlegrid.EUNAUTHORIZED || code == idlegrid.EINVALID:
		c.add("identity", checkFail, "not joined yet, and the server refuses the join token: "+idlegrid.ErrorMessage(err),
			"ask the provider for a new one ('idlegrid token create') and set join_token in the config or "+agent.EnvJoinToken)
	default:
		c.add("identity", checkWarn, detail+"; could not check the token: "+err.Error(), "")
	}
}

// usesLeft says how many more nodes may join with t.
func usesLeft(t *idlegrid.JoinToken) string {
	switch left := t.MaxUses - t.Uses; {
	case t.MaxUses == 0:
		return "no limit on uses"
	case left == 1:
		return "1 use left"
	default:
		return fmt.Sprintf("%d uses left", left)
	}
}
