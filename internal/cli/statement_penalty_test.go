package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestPrintStatement_penalties: a statement lists the month's upheld
// disputes after its sales, as taken from the bond, or paid to the renter,
// with what each refunded of the lease's earnings.
func TestPrintStatement_penalties(t *testing.T) {
	at := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	ps := []idlegrid.StatementPenalty{{DisputeID: "dispute_1", Offence: "mismatched_result", NodeID: "node_1", LeaseID: "lease_1",
		PenaltyMicros: 40 * idlegrid.MicrosPerUnit, PenaltyTo: "renter", RefundMicros: 3 * idlegrid.MicrosPerUnit, UpheldAt: at}}
	for role, want := range map[idlegrid.Role]string{
		idlegrid.RoleProvider: "penalties taken from the bond, and refunds to renters taken from the earnings above:",
		idlegrid.RoleRenter:   "penalties and refunds paid to you by providers for the harm done (added to your balance):",
	} {
		var out bytes.Buffer
		e := &env{Stdio: Stdio{Out: &out, Err: &bytes.Buffer{}}}
		if err := printStatement(e, &idlegrid.Statement{AccountID: "acct_1", Role: role, Month: "2026-11", Penalties: ps}); err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{want, "dispute_1", "mismatched_result", "2026-11-20T09:00:00Z", "$40.000000", "$3.000000", "REFUND"} {
			if !strings.Contains(out.String(), line) {
				t.Errorf("a %s's statement printed:\n%s\nwant %q", role, out.String(), line)
			}
		}
		out.Reset()
		if err := printStatement(e, &idlegrid.Statement{AccountID: "acct_1", Role: role, Month: "2026-11"}); err != nil || strings.Contains(out.String(), "penalties") {
			t.Errorf("a %s's statement without penalties printed:\n%s", role, out.String())
		}
	}
}
