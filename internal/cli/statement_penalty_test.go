package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/ledger"
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
		st := &idlegrid.Statement{AccountID: "acct_1", Role: role, Month: "2026-11",
			Total: idlegrid.StatementLine{ChargedMicros: 10 * idlegrid.MicrosPerUnit, EarningsMicros: 9 * idlegrid.MicrosPerUnit}}
		ledger.AddPenalties(st, ps)
		if err := printStatement(e, st); err != nil {
			t.Fatal(err)
		}
		net := map[idlegrid.Role]string{idlegrid.RoleProvider: "net of refunds: $6.000000 earned", idlegrid.RoleRenter: "net of refunds: $7.000000 charged"}[role]
		for _, line := range []string{want, "dispute_1", "mismatched_result", "2026-11-20T09:00:00Z", "$40.000000", "$3.000000", "REFUND", net} {
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

// TestPrintSpend_refunded: a month's spend that disputes refunded some of
// says so, in the account's view and in a limit's line; one without says
// nothing of refunds.
func TestPrintSpend_refunded(t *testing.T) {
	spend := idlegrid.Spend{ChargedMicros: 1_160_000, RefundedMicros: 840_000, HeldMicros: 2 * idlegrid.MicrosPerUnit}
	st := &idlegrid.SpendLimitStatus{SpendLimit: idlegrid.SpendLimit{Scope: idlegrid.SpendAccount, AccountID: "acct_1",
		LimitMicros: 5 * idlegrid.MicrosPerUnit}, Month: "2026-11", Spend: spend}
	var out bytes.Buffer
	e := &env{Stdio: Stdio{Out: &out, Err: &bytes.Buffer{}}}
	if err := printLimit(e, "account acct_1", st, false); err != nil {
		t.Fatal(err)
	}
	if want := "$3.160000 used in 2026-11 ($1.160000 charged net of $0.840000 refunded, $2.000000 held)"; !strings.Contains(out.String(), want) {
		t.Errorf("printLimit printed %q, want %q", out.String(), want)
	}
	view := &accountView{Account: &idlegrid.Account{ID: "acct_1", Role: idlegrid.RoleRenter}, Balance: &idlegrid.Balance{},
		Spend: &client.SpendReport{Month: "2026-11", Spend: spend}}
	out.Reset()
	if err := (&accountCommand{env: e}).printAccountView(view); err != nil {
		t.Fatal(err)
	}
	if want := "net of $0.840000 that upheld disputes refunded"; !strings.Contains(out.String(), want) {
		t.Errorf("the account's view printed:\n%s\nwant %q", out.String(), want)
	}

	st.Spend.RefundedMicros, view.Spend.Spend.RefundedMicros = 0, 0
	out.Reset()
	mustOK(t, printLimit(e, "account acct_1", st, false))
	mustOK(t, (&accountCommand{env: e}).printAccountView(view))
	if strings.Contains(out.String(), "refunded") {
		t.Errorf("a spend without refunds printed:\n%s", out.String())
	}
}
