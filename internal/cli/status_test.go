package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestStatus: an admin sees the market at a glance, as text and JSON, and
// follows it with --watch until cancelled; a renter may not look.
func TestStatus(t *testing.T) {
	admin, renter, _, _, price := moneyMarket(t)
	charge := idlegrid.CostOf(price, 30) // moneyMarket's one lease: 30 GPU-s
	out := must(t, admin, "status")
	for _, want := range []string{
		"jobs    0 queued   0 running   1 succeeded   0 failed   0 cancelled\n",
		"nodes   1 online\n",
		"money   renters spent " + charge.String() + "   providers earned " + (charge - charge/10).String() +
			"   platform fees " + (charge / 10).String() + "   refunded by disputes $0.000000   in escrow $0.000000\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status printed:\n%s\nwant a line %q", out, want)
		}
	}
	var sum idlegrid.Summary
	mustJSON(t, admin, &sum, "status")
	if sum.SpentMicros != charge || sum.NodesByState[idlegrid.NodeOnline] != 1 {
		t.Errorf("status --json = %+v, want %s spent on one online node", sum, charge)
	}

	r := runUntil(t, 1500*time.Millisecond, admin, "status", "--watch", "--every", "1s")
	line := regexp.MustCompile(`^\d\d:\d\d:\d\d  jobs queued=0 running=0 succeeded=1 .* \| nodes 1 online$`)
	looks := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.code != 0 || len(looks) == 0 || !line.MatchString(looks[0]) {
		t.Errorf("status --watch until cancelled: %s", r)
	}
	r = runUntil(t, 1500*time.Millisecond, admin, "status", "--watch", "--json")
	if err := json.Unmarshal([]byte(strings.Split(r.out, "\n")[0]), &sum); r.code != 0 || err != nil {
		t.Errorf("status --watch --json: %s (%v)", r, err)
	}
	if r := run(t, admin, "status", "--watch", "--every", "10ms"); r.code != 2 || !strings.Contains(r.err, "--every must be at least 1s") {
		t.Errorf("status --every 10ms: %s", r)
	}
	if r := run(t, renter, "status"); r.code == 0 || !strings.Contains(r.err, "it takes an admin account") {
		t.Errorf("a renter's status: %s", r)
	}
}
