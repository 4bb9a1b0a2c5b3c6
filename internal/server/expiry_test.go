package server_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/server"
)

const day = 24 * time.Hour

// mustExpiryMarket is mustMarket on a clock the test moves by days and
// months. Its reaper never runs on its own (its nodes' heartbeats are
// due yearly), so that what a test reads before it calls Reap is read
// before any sweep.
func mustExpiryMarket(t *testing.T) (*testMarket, *stepClock) {
	t.Helper()
	clock := &stepClock{}
	clock.set(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	m := mustMarketOn(t, goldForAll, func(s idlegrid.Store) idlegrid.Store { return s }, func(c *server.Config) {
		c.Clock, c.HeartbeatInterval = clock, 365*day
	})
	return m, clock
}

// mustEnded cancels the renter's job and checks that it ended.
func mustEnded(t *testing.T, m *testMarket, jobID string) {
	t.Helper()
	if _, err := m.srv.CancelJob(m.renter, jobID); err != nil {
		t.Fatal(err)
	}
	if j, err := m.store.FindJob(context.Background(), jobID); err != nil || !j.State.Terminal() {
		t.Fatalf("job %s after its cancel: %+v, %v; want it ended", jobID, j, err)
	}
}

// TestServer_SubmitJobOnce_keyExpires: a submission's key holds while its
// job is live, however long, and for a day after the job ends; then the
// same submission is a new job, before any sweep has run, and the old job
// no longer shows the key.
func TestServer_SubmitJobOnce_keyExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, clock := mustExpiryMarket(t)
		spec := testSpec()
		spec.GPUs = 1
		first, _, err := m.srv.SubmitJobOnce(m.renter, spec, "nightly")
		if err != nil {
			t.Fatal(err)
		}
		clock.add(3 * day) // live all along: a retry is still the same submission
		if again, replayed, err := m.srv.SubmitJobOnce(m.renter, spec, "nightly"); err != nil || !replayed || again.ID != first.ID {
			t.Fatalf("sent again while the job is live, 3 days on: %+v, replayed %v, %v; want %s", again, replayed, err, first.ID)
		}
		mustEnded(t, m, first.ID)
		clock.add(day - time.Minute)
		if again, replayed, err := m.srv.SubmitJobOnce(m.renter, spec, "nightly"); err != nil || !replayed || again.ID != first.ID {
			t.Fatalf("sent again a minute short of a day after the job ended: %+v, replayed %v, %v; want %s", again, replayed, err, first.ID)
		}

		clock.add(2 * time.Minute)
		second, replayed, err := m.srv.SubmitJobOnce(m.renter, spec, "nightly")
		if err != nil || replayed || second.ID == first.ID || second.IdempotencyKey != "nightly" {
			t.Fatalf("sent a day after the job ended: %+v, replayed %v, %v; want a new job under the key", second, replayed, err)
		}
		if j, err := m.store.FindJob(context.Background(), first.ID); err != nil || j.IdempotencyKey != "" {
			t.Errorf("the first job shows key %q (%v) once it expired, want none", j.IdempotencyKey, err)
		}
		if again, replayed, err := m.srv.SubmitJobOnce(m.renter, spec, "nightly"); err != nil || !replayed || again.ID != second.ID {
			t.Errorf("sent once more: %+v, replayed %v, %v; want the new job %s", again, replayed, err, second.ID)
		}
	})
}

// TestServer_Reap_expires: a reaper pass frees the keys of jobs that ended
// more than a day ago and deletes logins idle for 90 days; a top-up's key
// holds however late it is retried.
func TestServer_Reap_expires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, clock := mustExpiryMarket(t)
		ctx := context.Background()
		spec := testSpec()
		spec.GPUs = 1
		ended, _, err := m.srv.SubmitJobOnce(m.renter, spec, "weekly")
		if err != nil {
			t.Fatal(err)
		}
		mustEnded(t, m, ended.ID)
		live, _, err := m.srv.SubmitJobOnce(m.renter, spec, "long-queue")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.srv.PutRegistryLogin(m.renter, idlegrid.RegistryLogin{Registry: "quay.io", Username: "bot", Secret: "s"}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.srv.TopUp(m.admin, m.renterID, idlegrid.MicrosPerUnit, "invoice-7"); err != nil {
			t.Fatal(err)
		}
		topUps := func() int {
			t.Helper()
			ts, err := m.store.ListTransfers(ctx, idlegrid.TransferFilter{AccountID: m.renterID, Kinds: []idlegrid.TransferKind{idlegrid.TransferTopUp}})
			if err != nil {
				t.Fatal(err)
			}
			return len(ts)
		}
		before := topUps()

		clock.add(91 * day)
		if err := m.srv.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		if j, err := m.store.FindJob(ctx, ended.ID); err != nil || j.IdempotencyKey != "" {
			t.Errorf("the ended job's key after the pass: %q (%v), want it freed", j.IdempotencyKey, err)
		}
		if j, err := m.store.FindJob(ctx, live.ID); err != nil || j.IdempotencyKey != "long-queue" {
			t.Errorf("the live job's key after the pass: %q (%v), want it kept", j.IdempotencyKey, err)
		}
		if _, err := m.store.FindRegistryLogin(ctx, m.renterID, "quay.io"); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("the idle login after the pass: %v, want it deleted", err)
		}
		if _, err := m.srv.TopUp(m.admin, m.renterID, idlegrid.MicrosPerUnit, "invoice-7"); err != nil {
			t.Fatal(err)
		}
		if after := topUps(); after != before {
			t.Errorf("top-ups after one retried 91 days on: %d, want %d, as before", after, before)
		}
	})
}

// TestServer_Reap_expiresResponses: a reaper pass deletes every kept
// response expired by then, more than one batch of them, and keeps those
// that are not.
func TestServer_Reap_expiresResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, clock := mustExpiryMarket(t)
		ctx := context.Background()
		start := clock.Now()
		keep := func(ttl time.Duration) *idlegrid.KeptResponse {
			t.Helper()
			r := &idlegrid.KeptResponse{ID: idlegrid.NewID("resp"), RenterID: m.renterID, Model: "llama-3-8b",
				Input: json.RawMessage(`[{"role":"user","content":"hi"}]`), Response: json.RawMessage(`{"object":"response"}`),
				CreatedAt: start, ExpiresAt: start.Add(ttl)}
			if err := m.store.KeepResponse(ctx, r); err != nil {
				t.Fatal(err)
			}
			return r
		}
		var expired []*idlegrid.KeptResponse
		for range 501 { // more than a sweep's batch (expiryBatch)
			expired = append(expired, keep(30*day))
		}
		kept := keep(60 * day)

		clock.add(31 * day)
		if err := m.srv.Reap(ctx); err != nil {
			t.Fatal(err)
		}
		// Read as at the start, when none had expired: what is gone was deleted.
		for _, r := range []*idlegrid.KeptResponse{expired[0], expired[len(expired)-1]} {
			if _, err := m.store.FindResponse(ctx, m.renterID, r.ID, start); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
				t.Errorf("a response expired 30 days in, after a pass 31 days in: %v, want it deleted", err)
			}
		}
		if n, err := m.store.ForgetResponses(ctx, clock.Now(), 10); err != nil || n != 0 {
			t.Errorf("responses still due after the pass: %d (%v), want none", n, err)
		}
		if _, err := m.store.FindResponse(ctx, m.renterID, kept.ID, clock.Now()); err != nil {
			t.Errorf("a response kept for 60 days, after a pass 31 days in: %v, want it kept", err)
		}
	})
}
