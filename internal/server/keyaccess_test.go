package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// mustKeyAs makes an API key with access for the account owner speaks for,
// and returns the context of a caller that authenticated with it, and the
// key.
func mustKeyAs(t *testing.T, m *testMarket, owner context.Context, access idlegrid.Access) (context.Context, *idlegrid.APIKey) {
	t.Helper()
	k, secret, err := m.srv.CreateAPIKey(owner, "team-"+string(access), access)
	if err != nil {
		t.Fatalf("create a key with access %s: %v", access, err)
	}
	if k.Access != access {
		t.Fatalf("created key has access %q, want %q", k.Access, access)
	}
	c, err := m.srv.AuthenticateKey(context.Background(), secret)
	if err != nil {
		t.Fatal(err)
	}
	return idlegrid.NewContextWithCaller(context.Background(), c), k
}

func TestServer_KeyAccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		all, _ := mustKeyAs(t, m, m.renter, idlegrid.AccessAll)
		use, useKey := mustKeyAs(t, m, m.renter, idlegrid.AccessUse)
		read, readKey := mustKeyAs(t, m, m.renter, idlegrid.AccessRead)
		budget := 5 * idlegrid.MicrosPerUnit
		if _, err := m.srv.SetKeyLimit(all, useKey.ID, &budget); err != nil {
			t.Fatal(err)
		}
		adminUse, _ := mustKeyAs(t, m, m.admin, idlegrid.AccessUse)
		providerUse, _ := mustKeyAs(t, m, m.provider, idlegrid.AccessUse)

		tests := []struct {
			name string
			call func() error
			want string // "": allowed
		}{
			{"UseLiftsItsOwnLimit", func() error { _, err := m.srv.SetKeyLimit(use, useKey.ID, nil); return err }, idlegrid.EFORBIDDEN},
			{"UseRaisesItsOwnLimit", func() error { _, err := m.srv.SetKeyLimit(use, useKey.ID, &budget); return err }, idlegrid.EFORBIDDEN},
			{"UseMintsAKey", func() error { _, _, err := m.srv.CreateAPIKey(use, "escape", ""); return err }, idlegrid.EFORBIDDEN},
			{"UseMintsAReadKey", func() error { _, _, err := m.srv.CreateAPIKey(use, "ro", idlegrid.AccessRead); return err }, idlegrid.EFORBIDDEN},
			{"UseRevokesAKey", func() error { return m.srv.RevokeAPIKey(use, "", useKey.ID) }, idlegrid.EFORBIDDEN},
			{"UseRoutesItself", func() error {
				_, err := m.srv.SetKeyRouting(use, useKey.ID, idlegrid.Routing{Region: []string{"eu-west"}})
				return err
			}, idlegrid.EFORBIDDEN},
			{"UseRemovesItsRouting", func() error { return m.srv.RemoveKeyRouting(use, useKey.ID) }, idlegrid.EFORBIDDEN},
			{"UseAddsARegistryLogin", func() error {
				_, err := m.srv.PutRegistryLogin(use, idlegrid.RegistryLogin{Registry: "ghcr.io", Username: "u", Secret: "p"})
				return err
			}, idlegrid.EFORBIDDEN},
			{"UseSubmits", func() error { _, err := m.srv.SubmitJob(use, testSpec()); return err }, ""},
			{"UseReads", func() error { _, err := m.srv.ListSpendLimits(use, ""); return err }, ""},
			{"ReadSubmits", func() error { _, err := m.srv.SubmitJob(read, testSpec()); return err }, idlegrid.EFORBIDDEN},
			{"AllLimitsAReadKey", func() error { _, err := m.srv.SetKeyLimit(all, readKey.ID, ptr(idlegrid.Micros(5))); return err }, idlegrid.EINVALID},
			{"ReadReads", func() error { _, err := m.srv.ListJobs(read, idlegrid.JobFilter{}); return err }, ""},
			{"AllSubmits", func() error { _, err := m.srv.SubmitJob(all, testSpec()); return err }, ""},
			{"AllMintsAKey", func() error { _, _, err := m.srv.CreateAPIKey(all, "more", idlegrid.AccessUse); return err }, ""},
			{"AllLiftsALimit", func() error { _, err := m.srv.SetKeyLimit(all, useKey.ID, nil); return err }, ""},
			{"AdminUseTopsUp", func() error { _, err := m.srv.TopUp(adminUse, m.renterID, 1, "x"); return err }, idlegrid.EFORBIDDEN},
			{"AdminUseCreatesAccount", func() error { _, _, _, err := m.srv.CreateAccount(adminUse, "x", idlegrid.RoleAdmin); return err }, idlegrid.EFORBIDDEN},
			{"AdminUseListsAccounts", func() error { _, err := m.srv.ListAccounts(adminUse, idlegrid.AccountFilter{}); return err }, ""},
			{"AdminUseQuarantines", func() error { _, err := m.srv.QuarantineNode(adminUse, m.nodeID, "x"); return err }, idlegrid.EFORBIDDEN},
			{"AdminUseLiftsAQuarantine", func() error { _, err := m.srv.LiftQuarantine(adminUse, m.nodeID, "x"); return err }, idlegrid.EFORBIDDEN},
			{"ProviderUseMakesJoinToken", func() error { _, _, err := m.srv.CreateJoinToken(providerUse, "x", 1, time.Hour); return err }, idlegrid.EFORBIDDEN},
			{"ProviderUseRequestsPayout", func() error { _, err := m.srv.RequestPayout(providerUse, 1, "p1"); return err }, idlegrid.EFORBIDDEN},
		}
		for _, tt := range tests { // t.Run is not allowed inside a bubble
			if got := idlegrid.ErrorCode(tt.call()); got != tt.want {
				t.Errorf("%s: code = %q, want %q", tt.name, got, tt.want)
			}
		}

		_, err := m.srv.SetKeyLimit(use, useKey.ID, nil)
		if msg := idlegrid.ErrorMessage(err); !strings.Contains(msg, "access is use") || !strings.Contains(msg, "idlegrid key create --access all") {
			t.Errorf("a use key lifting its limit is told %q; want its access and what to do", msg)
		}
		_, err = m.srv.SubmitJob(read, testSpec())
		if msg := idlegrid.ErrorMessage(err); !strings.Contains(msg, "access is read") || !strings.Contains(msg, "--access use") {
			t.Errorf("a read key submitting is told %q; want its access and what to do", msg)
		}
		var e *idlegrid.Error
		_, _, err = m.srv.CreateAPIKey(m.renter, "x", "root")
		if !errors.As(err, &e) || e.Code != idlegrid.EINVALID || e.Field != "key.access" {
			t.Errorf("a key with access root: %v, want EINVALID naming key.access", err)
		}
	})
}

// TestServer_KeyRoutingBindsJobs: a bound key (access use) whose routing
// keeps its work to a data residency, or a region, submits only jobs that
// require one of them, saying which field and what to do; the owner's key
// is bound by nothing.
func TestServer_KeyRoutingBindsJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		all, allKey := mustKeyAs(t, m, m.renter, idlegrid.AccessAll)
		eu, euKey := mustKeyAs(t, m, m.renter, idlegrid.AccessUse)
		west, westKey := mustKeyAs(t, m, m.renter, idlegrid.AccessUse)
		if _, err := m.srv.SetKeyRouting(all, euKey.ID, idlegrid.Routing{DataResidency: []string{"EU"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.srv.SetKeyRouting(all, westKey.ID, idlegrid.Routing{Region: []string{"eu-west"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.srv.SetKeyRouting(all, allKey.ID, idlegrid.Routing{DataResidency: []string{"EU"}}); err != nil {
			t.Fatal(err)
		}
		spec := func(region string, preferred bool, residency string) idlegrid.JobSpec {
			s := testSpec()
			s.Region, s.RegionPreferred, s.Residency = region, preferred, residency
			return s
		}
		for _, tt := range []struct {
			name  string
			ctx   context.Context
			spec  idlegrid.JobSpec
			field string // "": submitted
		}{
			{"NoResidency", eu, spec("", false, ""), "job.residency"},
			{"OtherResidency", eu, spec("", false, "US"), "job.residency"},
			{"ItsResidency", eu, spec("", false, "EU"), ""},
			{"NoRegion", west, spec("", false, ""), "job.region"},
			{"RegionOnlyPreferred", west, spec("eu-west", true, ""), "job.region"},
			{"ItsRegion", west, spec("eu-west", false, ""), ""},
			{"UnboundKey", all, spec("", false, ""), ""},
			{"OwnersKeyWithRouting", all, spec("", false, "US"), ""},
		} {
			_, err := m.srv.SubmitJob(tt.ctx, tt.spec)
			var e *idlegrid.Error
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("%s: %v, want it submitted", tt.name, err)
			case tt.field != "" && (!errors.As(err, &e) || e.Code != idlegrid.EFORBIDDEN || e.Field != tt.field || !strings.Contains(e.Message, "another key")):
				t.Errorf("%s: %v, want forbidden on %s, saying what to do", tt.name, err, tt.field)
			}
		}
	})
}
