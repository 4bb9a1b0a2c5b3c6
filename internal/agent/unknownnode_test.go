package agent_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// mustJoined writes the state of a node that joined cfg's server as
// node_1, so that its agent does not join again.
func mustJoined(tb testing.TB, cfg *agent.Config) {
	tb.Helper()
	data, err := json.Marshal(agent.State{NodeID: "node_1", ProviderID: "acct_provider", Server: cfg.Server, HeartbeatSeconds: 5})
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(agent.StatePath(cfg.DataDir), data, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// An agent that starts on a node the server refuses (it does not know it,
// or retired it) ends as one that learns it while serving does: once the
// server has not known the node for agent.ForgetAfter, or at once when it
// retired it, saying why and what to do, and having stopped the workloads
// its previous run left, which no one pays for. A server that does not
// know the node only briefly is ridden out.
func TestAgent_RefusedAtStart(t *testing.T) {
	unknown := idlegrid.Errorf(idlegrid.EUNAUTHORIZED, "%s %q; join again with a new join token", nodekey.UnknownWords, "node_1")
	retired := idlegrid.Errorf(idlegrid.EFORBIDDEN, "node node_1 is retired: it is refused for good")
	t.Run("Forgotten", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg, srv, rt := leftBehind(t, idlegrid.LeaseRunning, 3600)
			mustJoined(t, cfg)
			srv.refuseNode(unknown)
			began := time.Now()
			r := startAgent(t, cfg, srv, rt)
			err := r.wait(t)
			if err == nil || !strings.Contains(err.Error(), "no longer knows") || !strings.Contains(err.Error(), "idlegrid token create") {
				t.Errorf("Run = %v, want it to end saying the server forgot the node and how to join again", err)
			}
			if took := time.Since(began); took < agent.ForgetAfter {
				t.Errorf("ended %v after the first refusal, want at least %v", took, agent.ForgetAfter)
			}
			if e, ok := rt.exit("lease_a"); !ok || !e.Stopped {
				t.Errorf("the workload left behind: exit %+v (exited: %v), want it stopped", e, ok)
			}
		})
	})
	t.Run("Retired", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg, srv, rt := leftBehind(t, idlegrid.LeaseRunning, 3600)
			mustJoined(t, cfg)
			srv.refuseNode(retired)
			r := startAgent(t, cfg, srv, rt)
			err := r.wait(t)
			if err == nil || !strings.Contains(err.Error(), "retired") || !strings.Contains(err.Error(), "empty data dir") {
				t.Errorf("Run = %v, want it to end saying the node was retired and how to serve again", err)
			}
			if e, ok := rt.exit("lease_a"); !ok || !e.Stopped {
				t.Errorf("the workload left behind: exit %+v (exited: %v), want it stopped", e, ok)
			}
		})
	})
	t.Run("Briefly", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg, srv, rt := leftBehind(t, idlegrid.LeaseRunning, 600)
			mustJoined(t, cfg)
			srv.fail("UpdateOffer", unknown, unknown, unknown)
			r := startAgent(t, cfg, srv, rt)
			waitFor(t, "the adopted lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	})
}
