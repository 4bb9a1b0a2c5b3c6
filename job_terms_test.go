package idlegrid_test

import (
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// TestJobSpec_ValidateResidency: a job's residency is written as a
// node's is, a short jurisdiction code: 5,000 characters, spaces or
// punctuation are refused naming job.residency, where before the job was
// accepted and then waited for ever with the reason "residency".
func TestJobSpec_ValidateResidency(t *testing.T) {
	for _, r := range []string{"", "EU", "us", "EU-DE", "SG", strings.Repeat("R", 40)} {
		s := validSpec()
		s.Residency = r
		if err := s.Validate(jobNow); err != nil {
			t.Errorf("residency %q: %v, want valid", r, err)
		}
	}
	for _, r := range []string{strings.Repeat("R", 5000), strings.Repeat("R", 41), "E U", "-EU", "EU/DE", "EU\n"} {
		s := validSpec()
		s.Residency = r
		err := s.Validate(jobNow)
		wantField(t, err, "job.residency")
		if !strings.Contains(idlegrid.ErrorMessage(err), "e.g. EU or US") {
			t.Errorf("residency %.20q: %v, want it to say what a residency looks like", r, err)
		}
	}
}

// TestJobSpec_ValidateInterruptible: only bronze jobs are interruptible;
// interruptible on a silver job promised what the market never does and
// was accepted all the same. Bronze, normalized, always is; a re-run for
// verification (bronze and interruptible) stays valid.
func TestJobSpec_ValidateInterruptible(t *testing.T) {
	for _, tier := range []idlegrid.Tier{idlegrid.TierGold, idlegrid.TierSilver} {
		s := validSpec()
		s.Tier, s.Interruptible = tier, true
		err := s.Validate(jobNow)
		wantField(t, err, "job.interruptible")
		if !strings.Contains(idlegrid.ErrorMessage(err), "only bronze jobs are interruptible") {
			t.Errorf("interruptible %s: %v, want it to say only bronze is", tier, err)
		}
	}
	s := validSpec()
	s.Tier, s.Interruptible = idlegrid.TierSilver, false
	if err := s.Validate(jobNow); err != nil {
		t.Errorf("silver, not interruptible: %v", err)
	}
	s.Tier, s.Interruptible = idlegrid.TierBronze, false
	s.Normalize()
	if err := s.Validate(jobNow); err != nil {
		t.Errorf("bronze, normalized: %v", err)
	}
}
