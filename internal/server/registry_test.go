package server_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestServer_RegistryLogins: a renter's login to a registry is kept sealed,
// listed without its secret, and carried by the start command of each of
// its jobs whose image is on that registry, and by no other.
func TestServer_RegistryLogins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		ctx := context.Background()
		const secret = "ghp_0123456789abcdef"
		got, err := m.srv.PutRegistryLogin(m.renter, idlegrid.RegistryLogin{Registry: "https://ghcr.io/", Username: "acme-bot", Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		if got.Registry != "ghcr.io" || got.Username != "acme-bot" || got.AccountID != m.renterID || got.Secret != "" || got.Sealed != nil {
			t.Errorf("PutRegistryLogin answered %+v, want ghcr.io's login for the renter, without its secret", got)
		}
		kept, err := m.store.FindRegistryLogin(ctx, m.renterID, "ghcr.io")
		if err != nil || len(kept.Sealed) == 0 || bytes.Contains(kept.Sealed, []byte(secret)) || kept.Secret != "" {
			t.Fatalf("the stored login: %+v, %v; want it sealed", kept, err)
		}
		list, err := m.srv.ListRegistryLogins(m.renter, "")
		if err != nil || len(list) != 1 || list[0].Registry != "ghcr.io" || list[0].Sealed != nil {
			t.Errorf("ListRegistryLogins = %+v, %v; want ghcr.io's, unsealed nothing", list, err)
		}
		other := otherRenter(t, m)
		if _, err := m.srv.ListRegistryLogins(other, m.renterID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("another renter lists the renter's logins: %v, want ENOTFOUND, as if there were no such account", err)
		}
		if list, err := m.srv.ListRegistryLogins(m.admin, m.renterID); err != nil || len(list) != 1 {
			t.Errorf("an admin lists the renter's logins: %+v, %v", list, err)
		}
		if _, err := m.srv.ListRegistryLogins(m.admin, "acct_nosuch"); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("an admin lists the logins of no account: %v, want ENOTFOUND", err)
		}

		// Three one-GPU jobs: the renter's on ghcr.io and on Docker Hub,
		// and another renter's on ghcr.io.
		private, hub := testSpec(), testSpec()
		private.GPUs, hub.GPUs = 1, 1
		private.Image = "ghcr.io/acme/trainer:2"
		mine, err := m.srv.SubmitJob(m.renter, private)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.srv.SubmitJob(m.renter, hub); err != nil {
			t.Fatal(err)
		}
		theirs, err := m.srv.SubmitJob(other, private)
		if err != nil {
			t.Fatal(err)
		}
		m.advance(t, 5*time.Second)
		auths := map[string]*idlegrid.RegistryAuth{}
		for _, node := range []context.Context{m.node, m.rival} {
			cmds, err := m.srv.Commands(node, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cmds {
				if c.Kind == idlegrid.CommandStart {
					auths[c.Lease.JobID] = c.RegistryAuth
				}
			}
		}
		if len(auths) != 3 {
			t.Fatalf("%d jobs started, want 3", len(auths))
		}
		want := idlegrid.RegistryAuth{Registry: "ghcr.io", Username: "acme-bot", Password: secret}
		for job, auth := range auths {
			switch {
			case job == mine.ID && (auth == nil || *auth != want):
				t.Errorf("the renter's ghcr.io job started with login %v, want %v", auth, want)
			case job != mine.ID && auth != nil:
				t.Errorf("job %s (theirs: %v) started with login %v, want none", job, job == theirs.ID, auth)
			}
		}

		if err := m.srv.RemoveRegistryLogin(m.renter, "", "ghcr.io"); err != nil {
			t.Fatal(err)
		}
		if err := m.srv.RemoveRegistryLogin(m.renter, "", "ghcr.io"); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("removing it twice: %v, want ENOTFOUND", err)
		}

		// An admin may remove a renter's login (a leaked password); nobody else.
		if _, err := m.srv.PutRegistryLogin(m.renter, idlegrid.RegistryLogin{Registry: "quay.io", Username: "bot", Secret: "s"}); err != nil {
			t.Fatal(err)
		}
		if err := m.srv.RemoveRegistryLogin(m.provider, m.renterID, "quay.io"); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("a provider removing a renter's login: %v, want ENOTFOUND, as if there were no such account", err)
		}
		if err := m.srv.RemoveRegistryLogin(m.admin, m.renterID, "https://quay.io/"); err != nil {
			t.Fatalf("an admin removing a renter's login: %v", err)
		}
		if logins, err := m.srv.ListRegistryLogins(m.renter, ""); err != nil || len(logins) != 0 {
			t.Errorf("the renter's logins after the admin removed the last = %+v (%v), want none", logins, err)
		}
	})
}

// TestServer_PutRegistryLogin_invalid: each field at fault is named, and
// only renters keep logins.
func TestServer_PutRegistryLogin_invalid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		for _, tc := range []struct {
			login idlegrid.RegistryLogin
			field string
		}{
			{idlegrid.RegistryLogin{Registry: "", Username: "u", Secret: "s"}, "registry"},
			{idlegrid.RegistryLogin{Registry: "acme", Username: "u", Secret: "s"}, "registry"},
			{idlegrid.RegistryLogin{Registry: "ghcr.io/acme", Username: "u", Secret: "s"}, "registry"},
			{idlegrid.RegistryLogin{Registry: "ghcr.io", Username: "", Secret: "s"}, "username"},
			{idlegrid.RegistryLogin{Registry: "ghcr.io", Username: "u", Secret: ""}, "password"},
			{idlegrid.RegistryLogin{Registry: "ghcr.io", Username: "u", Secret: string(make([]byte, idlegrid.MaxRegistrySecret+1))}, "password"},
		} {
			_, err := m.srv.PutRegistryLogin(m.renter, tc.login)
			if e, ok := err.(*idlegrid.Error); !ok || e.Code != idlegrid.EINVALID || e.Field != tc.field {
				t.Errorf("PutRegistryLogin(%q, %q) = %v, want EINVALID naming %s", tc.login.Registry, tc.login.Username, err, tc.field)
			}
		}
		if _, err := m.srv.PutRegistryLogin(m.provider, idlegrid.RegistryLogin{Registry: "ghcr.io", Username: "u", Secret: "s"}); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
			t.Errorf("a provider keeps a login: %v, want EFORBIDDEN", err)
		}
	})
}

// TestServer_RegistryLogins_idle: a login neither set nor handed to a node
// for 90 days is no longer listed nor handed out, before any sweep; the
// reaper's pass then deletes it. A login in use stays.
func TestServer_RegistryLogins_idle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, clock := mustExpiryMarket(t)
		ctx := context.Background()
		for _, reg := range []string{"ghcr.io", "quay.io"} {
			if _, err := m.srv.PutRegistryLogin(m.renter, idlegrid.RegistryLogin{Registry: reg, Username: "bot", Secret: "s-" + reg}); err != nil {
				t.Fatal(err)
			}
		}
		// starts submits a one-GPU job of image and returns the logins the
		// start commands of the renter's jobs carry now, by job.
		starts := func(image string) (string, map[string]*idlegrid.RegistryAuth) {
			t.Helper()
			spec := testSpec()
			spec.GPUs, spec.Image = 1, image
			j, err := m.srv.SubmitJob(m.renter, spec)
			if err != nil {
				t.Fatal(err)
			}
			m.advance(t, 5*time.Second)
			auths := map[string]*idlegrid.RegistryAuth{}
			for _, node := range []context.Context{m.node, m.rival} {
				cmds, err := m.srv.Commands(node, 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range cmds {
					if c.Kind == idlegrid.CommandStart {
						auths[c.Lease.JobID] = c.RegistryAuth
					}
				}
			}
			if _, ok := auths[j.ID]; !ok {
				t.Fatalf("job %s of %s did not start", j.ID, image)
			}
			return j.ID, auths
		}
		listed := func() []string {
			t.Helper()
			logins, err := m.srv.ListRegistryLogins(m.renter, "")
			if err != nil {
				t.Fatal(err)
			}
			var regs []string
			for _, l := range logins {
				regs = append(regs, l.Registry)
			}
			return regs
		}

		clock.add(60 * day)
		ghcrJob, auths := starts("ghcr.io/acme/trainer:2") // uses ghcr.io's login: 60 days idle at most from here
		if a := auths[ghcrJob]; a == nil || a.Password != "s-ghcr.io" {
			t.Fatalf("the ghcr.io job starts with %v, want ghcr.io's login", a)
		}

		clock.add(60 * day)
		if got := listed(); !slices.Equal(got, []string{"ghcr.io"}) {
			t.Errorf("listed 120 days on: %v, want ghcr.io alone (quay.io idle since it was set)", got)
		}
		quayJob, auths := starts("quay.io/acme/trainer:2")
		if a := auths[quayJob]; a != nil {
			t.Errorf("the quay.io job starts with %v, want no login: quay.io's is idle", a)
		}
		if a := auths[ghcrJob]; a == nil {
			t.Errorf("the ghcr.io job's start, again, carries no login; want ghcr.io's, used 60 days ago")
		}
		if _, err := m.store.FindRegistryLogin(ctx, m.renterID, "quay.io"); err != nil {
			t.Fatalf("quay.io's login before any sweep: %v; want it still stored, and ignored", err)
		}
		if err := m.srv.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := m.store.FindRegistryLogin(ctx, m.renterID, "quay.io"); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("quay.io's idle login after a reaper pass: %v, want it deleted", err)
		}
		if _, err := m.store.FindRegistryLogin(ctx, m.renterID, "ghcr.io"); err != nil {
			t.Errorf("ghcr.io's login, in use, after a reaper pass: %v, want it kept", err)
		}

		clock.add(91 * day) // 91 days after its last start
		if got := listed(); len(got) != 0 {
			t.Errorf("listed 91 days after ghcr.io's last use: %v, want none", got)
		}
		if err := m.srv.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := m.store.FindRegistryLogin(ctx, m.renterID, "ghcr.io"); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("ghcr.io's login 91 days after its last use, after a reaper pass: %v, want it deleted", err)
		}
	})
}
