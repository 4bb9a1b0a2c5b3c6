package server_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// TestServer_ReportLease_bounded: a node's report carries more than the
// audit log could keep (a message of 70,000 control characters, each six
// bytes in JSON; a checkpoint reference and a digest longer than any):
// the lease still ends, with the message cut and marked, and the rest
// left out. A bronze lease so stopped breaks its notice, and the
// conviction that follows is logged too: a dispute of its own, with the
// message in its evidence and its detail, or the upholding of an
// operator's open charge with the longest evidence.
func TestServer_ReportLease_bounded(t *testing.T) {
	for _, charged := range []bool{false, true} {
		t.Run(fmt.Sprintf("charged %v", charged), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { reportBounded(t, charged) })
		})
	}
}

func reportBounded(t *testing.T, charged bool) {
	m, l, node := mustRunningBronze(t, 30*time.Minute)
	if charged {
		_, err := m.srv.OpenDispute(m.admin, idlegrid.Dispute{Offence: "broken_notice", ProviderID: callerID(m.provider),
			LeaseID: l.ID, Evidence: strings.Repeat("\n", idlegrid.MaxDisputeEvidenceBytes)})
		if err != nil {
			t.Fatal(err)
		}
	}
	r := idlegrid.LeaseReport{State: idlegrid.LeaseCancelled, Message: strings.Repeat("\x01", 70_000),
		CheckpointRef: strings.Repeat("c", idlegrid.MaxCheckpointRefBytes+1), OutputDigest: "sha256:" + strings.Repeat("f", 1000)}
	if err := m.srv.ReportLease(node, l.ID, r); err != nil {
		t.Fatalf("ReportLease: %v, want the lease ended", err)
	}
	l = mustFindLease(t, m, l.ID)
	const mark = "[cut: 70000 bytes in all]"
	if l.State != idlegrid.LeaseFailed || len(l.Reason) > 4200 || !strings.HasSuffix(l.Reason, mark) {
		t.Errorf("lease %s with a reason of %d bytes ending %q; want failed, the message cut and marked",
			l.State, len(l.Reason), l.Reason[max(0, len(l.Reason)-30):])
	}
	if l.CheckpointRef != "" {
		t.Errorf("checkpoint reference of %d bytes kept, want it left out", len(l.CheckpointRef))
	}
	ds, err := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{LeaseID: l.ID})
	if err != nil {
		t.Fatal(err)
	} else if len(ds) != 1 || ds[0].State != idlegrid.DisputeUpheld || !strings.Contains(ds[0].Evidence+ds[0].Resolution, mark) {
		t.Fatalf("disputes of the lease: %+v, want one upheld with the message as evidence", ds)
	}
	want := 1 // upheld as it opened
	if charged {
		want = 2 // opened, then upheld
	}
	entries, err := m.store.ListAuditEntries(context.Background(), idlegrid.AuditFilter{Subject: ds[0].ID})
	if err != nil || len(entries) != want {
		t.Errorf("%d audit entries of the dispute (%v), want %d", len(entries), err, want)
	}
}

// TestServer_Join_agentVersion: the version an agent says it runs is
// bounded, as the rest of what it publishes is.
func TestServer_Join_agentVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		_, secret, err := m.srv.CreateJoinToken(m.provider, "rack", 1, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		req := idlegrid.JoinRequest{Token: secret, PublicKey: nodekey.PublicString(pub), Offer: testOffer("long"),
			AgentVersion: strings.Repeat("v", idlegrid.MaxAgentVersionBytes+1)}
		if _, err := m.srv.Join(context.Background(), req); !isInvalidOn(err, "agent_version") {
			t.Errorf("Join with a version of %d bytes: %v, want EINVALID naming agent_version", len(req.AgentVersion), err)
		}
		err = m.srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: testOffer("barn-1"), AgentVersion: "0.4.1\nforged line"})
		if !isInvalidOn(err, "agent_version") {
			t.Errorf("UpdateOffer with a line break in the version: %v, want EINVALID naming agent_version", err)
		}
	})
}

func isInvalidOn(err error, field string) bool {
	e, ok := err.(*idlegrid.Error)
	return ok && e.Code == idlegrid.EINVALID && e.Field == field
}
