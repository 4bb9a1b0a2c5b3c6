package idlegrid_test

import (
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
)

func TestCheckEvidence(t *testing.T) {
	for _, ok := range []string{"", "the renter's logs show a kill\nwith no notice\t(14:02)", strings.Repeat("é", idlegrid.MaxDisputeEvidenceBytes/2)} {
		if err := idlegrid.CheckEvidence(ok); err != nil {
			t.Errorf("CheckEvidence(%.20q…) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{strings.Repeat("x", idlegrid.MaxDisputeEvidenceBytes+1), "a bell\a", "\xff"} {
		wantField(t, idlegrid.CheckEvidence(bad), "dispute.evidence")
	}
}

func TestCheckResolution(t *testing.T) {
	if err := idlegrid.CheckResolution(strings.Repeat("r", idlegrid.MaxDisputeResolutionBytes), idlegrid.DisputeUpheld); err != nil {
		t.Errorf("a resolution at the limit: %v, want nil", err)
	}
	for _, bad := range []string{"", strings.Repeat("r", idlegrid.MaxDisputeResolutionBytes+1), "escape\x1b[2J"} {
		wantField(t, idlegrid.CheckResolution(bad, idlegrid.DisputeDismissed), "resolution")
	}
}

// TestDispute_fitsTheAuditLog: a dispute whose evidence and resolution
// are at their limits, in the text that takes most room in JSON, is
// logged when it is resolved, so it can always be closed.
func TestDispute_fitsTheAuditLog(t *testing.T) {
	d := &idlegrid.Dispute{ID: "dispute_1k8lr8990662gfpgqvib48eu4", Offence: "fake_hardware", State: idlegrid.DisputeDismissed,
		ProviderID: "acct_1k8lr7du00q78f603tvbcsc8q", RenterID: "acct_1k8lr82e8u8ob9jefcacou5q3",
		NodeID: "node_1k8lr7kooo7pqd0hj1dbp629d", LeaseID: "lease_1k8lr7rjgsg0lio445df0nnt8",
		Evidence:   strings.Repeat("\n", idlegrid.MaxDisputeEvidenceBytes),
		Resolution: strings.Repeat("\u2028", idlegrid.MaxDisputeResolutionBytes/3),
		ResolvedBy: "acct_1k8lr6pdo0432cf1tksceiv05", CreatedAt: jobNow, ResolvedAt: &jobNow}
	if err := idlegrid.CheckEvidence(d.Evidence); err != nil {
		t.Fatal(err)
	} else if err := idlegrid.CheckResolution(d.Resolution, d.State); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.DisputeEntry(d, jobNow); err != nil {
		t.Errorf("the largest dispute: %v, want it logged", err)
	}
}
