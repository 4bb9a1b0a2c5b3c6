package cli

import (
	"strings"
	"testing"
)

// TestAccountStatement_adminNamesNone: an admin has no statement of its
// own, so an admin's "account statement" without an ID is a missing
// argument (exit 2) that says how to name one, in CSV as in a table; it
// names no field "account_id" that the caller never typed.
func TestAccountStatement_adminNamesNone(t *testing.T) {
	m := mustMoneyMarket(t)
	for _, args := range [][]string{{"account", "statement"}, {"account", "statement", "--csv"}, {"account", "statement", "--json"}} {
		r := run(t, m.admin, args...)
		if r.code != 2 || strings.Contains(r.err, "account_id") ||
			!strings.Contains(r.err, "admins have no statement of their own") ||
			!strings.Contains(r.err, "idlegrid account statement acct_abc123") || r.out != "" {
			t.Errorf("%v as an admin: %s\nwant exit 2 and how to name an account", args, r)
		}
	}
	if r := run(t, m.admin, "account", "statement", m.renterID); r.code != 0 || !strings.Contains(r.out, "statement of renter "+m.renterID) {
		t.Errorf("account statement %s as an admin: %s", m.renterID, r)
	}
}

// TestServerFields_namedAsTyped: a field the server refuses is named as
// what the caller gave for it: the positional ID ("ID: …", exit 1, with a
// hint about the argument), the flag typed (--provider, exit 2), or a
// required flag left out (--provider, exit 2), never as the API's field
// ("topup.account_id", "bond.provider_id").
func TestServerFields_namedAsTyped(t *testing.T) {
	m := mustMoneyMarket(t)
	var prov struct {
		Account struct{ ID string } `json:"account"`
	}
	mustJSON(t, m.provider, &prov, "account", "show", "--json")
	for _, tt := range []struct {
		args       []string
		code       int
		want, hint string
	}{
		{[]string{"account", "topup", prov.Account.ID, "5"}, 1, "idlegrid: ID: only renter accounts hold a spendable balance",
			"fix the argument named above and try again; 'idlegrid help account topup' says what it takes"},
		{[]string{"account", "limit", prov.Account.ID, "5"}, 1, "idlegrid: ID: only renters spend", "'idlegrid help account limit' says what it takes"},
		{[]string{"bond", "post", "5", "--provider", m.renterID}, 2, "idlegrid: --provider: " + m.renterID + " is a renter account, not a provider",
			"fix the flag named above and try again; 'idlegrid help bond post' shows the flags"},
		{[]string{"bond", "post", "5"}, 2, "idlegrid: --provider: required: the provider account's ID", "fix the flag named above"},
	} {
		r := run(t, m.admin, tt.args...)
		if r.code != tt.code || !strings.HasPrefix(r.err, tt.want) || !strings.Contains(r.err, tt.hint) || strings.Contains(r.err, "_id") {
			t.Errorf("%s: %s\nwant exit %d, stderr beginning %q and the hint %q", strings.Join(tt.args, " "), r, tt.code, tt.want, tt.hint)
		}
	}
}
