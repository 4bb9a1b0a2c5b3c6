package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
)

// TestDisputeEntry_storedBeforeTheLimits: a dispute stored before the API
// bounded its texts is logged with them cut, so that it can still be
// resolved; one within the limits is logged whole.
func TestDisputeEntry_storedBeforeTheLimits(t *testing.T) {
	at := time.Date(2026, 12, 4, 17, 0, 0, 0, time.UTC)
	d := &idlegrid.Dispute{ID: "dsp_1", ProviderID: "acct_p", Offence: "fake_hardware", State: idlegrid.DisputeUpheld,
		Evidence: strings.Repeat("é", 35000), Resolution: "upheld", CreatedAt: at}
	e, err := audit.DisputeEntry(d, at)
	if err != nil {
		t.Fatalf("DisputeEntry of 70,000 bytes of evidence: %v, want it logged, cut", err)
	}
	if !strings.Contains(string(e.Payload), "[cut: 70000 bytes in all]") || len(d.Evidence) != 70000 {
		t.Errorf("the entry does not say the evidence was cut, or the dispute itself changed (%d bytes)", len(d.Evidence))
	}
	d.Evidence = "the GPU answered the challenge in a third of the time an H100 takes"
	if e, err := audit.DisputeEntry(d, at); err != nil || !strings.Contains(string(e.Payload), d.Evidence) {
		t.Errorf("DisputeEntry within the limits: %v, want the evidence whole", err)
	}
}
