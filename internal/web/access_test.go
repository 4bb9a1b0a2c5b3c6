package web_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// TestDashboard_keyAccess signs in with keys of each narrower access: one
// of access read is offered no form or button that changes anything, and
// each panel that would have one says why; one of access use submits and
// cancels jobs, drains nodes and edits windows, but is offered neither the
// budgets nor the payouts, which manage the account.
func TestDashboard_keyAccess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a whole market and a browser; skipped with -short")
	}
	chromium(t) // skip before starting a market for nothing
	m := mustDevMarket(t)
	b := mustBrowser(t, m.URL)
	ctx := context.Background()
	renter, provider := client.New(m.URL, m.RenterKey), client.New(m.URL, m.ProviderKey)
	// A job that stays queued, its cap below every ask: the job details
	// would offer to cancel it.
	job, err := renter.SubmitJob(ctx, idlegrid.JobSpec{Name: "access-queued", Kind: idlegrid.KindEval, Image: "python:3.12",
		GPUs: 1, Nodes: 1, Tier: idlegrid.TierSilver, MaxPriceMicrosPerGPUHour: 1, DurationSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { renter.CancelJob(ctx, job.ID) })
	key := func(c *client.Client, access idlegrid.Access) string {
		_, secret, err := c.CreateAPIKeyWithAccess(ctx, "dashboard-"+string(access), access)
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	const (
		readOnly = "This key can only read: sign in with a key of access "
		useOnly  = "This key's access is use, which does not manage the account: sign in with a key of access "
		cancel   = "#panel-job button[data-action=cancel]"
		drain    = "#panel-nodes button[data-action=drain]"
	)
	tests := []struct {
		name, key, who string
		access         idlegrid.Access
		offered        []string          // selectors of what the page offers
		withheld       []string          // and of what it does not
		says           map[string]string // a panel's selector: the line it shows instead
	}{
		{"renter read", key(renter, idlegrid.AccessRead), "demo-renter (renter)", idlegrid.AccessRead,
			nil, []string{"#submit-form", cancel, "#budget-form", "#registry-form"},
			map[string]string{"#panel-submit": readOnly + "use or all to submit jobs", "#panel-job": readOnly + "use or all to cancel jobs",
				"#panel-keys": readOnly + "all to set budgets"}},
		{"renter use", key(renter, idlegrid.AccessUse), "demo-renter (renter)", idlegrid.AccessUse,
			[]string{"#submit-form", cancel}, []string{"#budget-form", "#registry-form"},
			map[string]string{"#panel-keys": useOnly + "all to set budgets", "#panel-registries": useOnly + "all to add or remove registry logins"}},
		{"provider read", key(provider, idlegrid.AccessRead), "fjord-compute (provider)", idlegrid.AccessRead,
			nil, []string{"#window-form", drain, "#payout-form"},
			map[string]string{"#panel-windows": readOnly + "use or all to set windows", "#panel-nodes": readOnly + "use or all to drain nodes",
				"#panel-payouts": readOnly + "all to request payouts"}},
		{"provider use", key(provider, idlegrid.AccessUse), "fjord-compute (provider)", idlegrid.AccessUse,
			[]string{"#window-form", drain}, []string{"#payout-form"},
			map[string]string{"#panel-payouts": useOnly + "all to request payouts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b.t = t // report in the subtest
			// Start signed out, whatever the case before left.
			eval[bool](b, "forget the last key", `(sessionStorage.clear(), true)`)
			b.run("open the dashboard", chromedp.Navigate(m.URL+"/?refresh_ms=1000"), chromedp.WaitVisible(chromedp.ID("key")))
			b.signIn(tt.key, tt.who)
			b.waitText("#who-access", "key access: "+string(tt.access))
			// Wait until the bodies whose buttons are checked are drawn.
			if tt.who == "fjord-compute (provider)" {
				b.waitText("#panel-nodes", "fj-l40s-01")
			} else {
				b.chooseJob(job.ID)
				b.waitText("#panel-job h3", "queued")
			}
			for _, sel := range tt.offered {
				b.poll(sel+" offered", fmt.Sprintf(`!!document.querySelector(%s)`, jsString(sel)))
			}
			for _, sel := range tt.withheld {
				if eval[bool](b, "look for "+sel, fmt.Sprintf(`!!document.querySelector(%s)`, jsString(sel))) {
					t.Errorf("a key of access %s is offered %s, which it may not use", tt.access, sel)
				}
			}
			for panel, line := range tt.says {
				b.waitText(panel, line)
			}
			b.checkAccessible(tt.name)
		})
	}
}
