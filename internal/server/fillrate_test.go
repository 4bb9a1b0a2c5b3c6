package server_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

func TestServer_ProviderFill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t) // the bubble starts at midnight UTC; both nodes join then, 2 GPUs each, always offered
		providerID := idlegrid.CallerFromContext(m.provider).AccountID
		_, l := mustStart(t, m)
		m.advance(t, 15*time.Minute)
		mustSendReceipts(t, m, l.ID, 300, 300, 300)
		code := 0
		if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &code}); err != nil {
			t.Fatal(err)
		}
		m.advance(t, 45*time.Minute)

		got, err := m.srv.ProviderFill(m.provider, "", 2)
		if err != nil {
			t.Fatal(err)
		}
		if got.ProviderID != providerID || len(got.Days) != 2 {
			t.Fatalf("history = %s with %d days, want %s with 2", got.ProviderID, len(got.Days), providerID)
		}
		before := got.Days[0]
		if before.Day != "1999-12-31" || before.OfferedGPUHours != 0 || before.LeasedGPUHours != 0 || before.Fill != 0 {
			t.Errorf("the day before the nodes joined = %+v, want 1999-12-31 with nothing offered or leased", before)
		}
		pb, err := m.srv.Balance(m.provider, "")
		if err != nil {
			t.Fatal(err)
		}
		today := got.Days[1]
		// Offered: 2 nodes × 2 GPUs × 1 h. Leased: 2 GPUs × 15 min.
		if today.Day != "2000-01-01" || today.OfferedGPUHours != 4 || today.LeasedGPUHours != 0.5 || today.Fill != 0.125 {
			t.Errorf("today = %+v, want 2000-01-01 offered 4, leased 0.5, fill 0.125", today)
		}
		if today.EarningsMicros <= 0 || today.EarningsMicros != pb.Pending {
			t.Errorf("today's earnings = %d, want the settled %d", today.EarningsMicros, pb.Pending)
		}

		// A running lease counts up to now.
		_, l2 := mustStart(t, m)
		m.advance(t, 30*time.Minute)
		got, err = m.srv.ProviderFill(m.admin, providerID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if today := got.Days[0]; today.OfferedGPUHours != 6 || today.LeasedGPUHours != 1.5 || today.Fill != 0.25 {
			t.Errorf("with %s running 30 min: today = %+v, want offered 6, leased 1.5, fill 0.25", l2.ID, today)
		}
	})
}

func TestServer_ProviderFillAuthorization(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		providerID := idlegrid.CallerFromContext(m.provider).AccountID
		otherProvider, _, _, err := m.srv.CreateAccount(m.admin, "rival-gpus", idlegrid.RoleProvider)
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name       string
			ctx        context.Context
			providerID string
			days       int
			want       string
		}{
			{"Own", m.provider, providerID, 3, ""},
			{"OwnByDefault", m.provider, "", 0, ""},
			{"Admin", m.admin, providerID, 90, ""},
			{"AdminWithoutProvider", m.admin, "", 1, idlegrid.EINVALID},
			{"AdminNamesRenter", m.admin, m.renterID, 1, idlegrid.ENOTFOUND},
			{"AdminNamesNobody", m.admin, "acct_nobody", 1, idlegrid.ENOTFOUND},
			{"OtherProvider", as(otherProvider), providerID, 1, idlegrid.ENOTFOUND},
			{"Renter", m.renter, providerID, 1, idlegrid.EFORBIDDEN},
			{"Node", m.node, providerID, 1, idlegrid.EFORBIDDEN},
			{"Anonymous", context.Background(), providerID, 1, idlegrid.EUNAUTHORIZED},
			{"TooManyDays", m.provider, "", idlegrid.MaxFillDays + 1, idlegrid.EINVALID},
			{"NegativeDays", m.provider, "", -1, idlegrid.EINVALID},
		}
		for _, tt := range tests { // t.Run is not allowed inside a bubble
			h, err := m.srv.ProviderFill(tt.ctx, tt.providerID, tt.days)
			if got := idlegrid.ErrorCode(err); got != tt.want {
				t.Errorf("%s: code = %q (%v), want %q", tt.name, got, err, tt.want)
				continue
			}
			if err != nil {
				continue
			}
			wantDays := tt.days
			if wantDays == 0 {
				wantDays = idlegrid.DefaultFillDays
			}
			if h.ProviderID != providerID || len(h.Days) != wantDays {
				t.Errorf("%s: history of %s with %d days, want %s with %d", tt.name, h.ProviderID, len(h.Days), providerID, wantDays)
			}
		}
	})
}
