package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
)

// TestAPI_trustListPaging reads verifications, a node's challenges and
// quarantines through the client a page at a time, past the first page,
// over rows that share their times; and refuses a cursor that is not one
// of the list's rows with 400 naming before.
func TestAPI_trustListPaging(t *testing.T) {
	ctx := context.Background()
	f := mustOpen(t, httpapi.Options{})
	provider, acct, providerSecret := f.mustAccount(t, "barn", idlegrid.RoleProvider)
	_, renter, _ := f.mustAccount(t, "acme", idlegrid.RoleRenter)
	_, _, nodeID := f.mustNode(t, provider, "rig1")
	n, err := f.Store.FindNode(ctx, nodeID)
	mustOK(t, err)
	// Seven of each, two or three to a time, stored out of time order.
	base := f.Clock.Now().Add(-time.Hour)
	var verifications, challenges, quarantines []string
	for i, d := range []time.Duration{time.Minute, 0, time.Minute, 2 * time.Minute, 0, time.Minute, 0} {
		verifications = append(verifications, mustVerification(t, f, renter.ID, acct.ID, base.Add(d)))
		challenges = append(challenges, mustChallenge(t, f, n, base.Add(d)))
		quarantines = append(quarantines, mustQuarantine(t, f, nodeID, base.Add(d), i < 6))
	}

	const size = 3
	t.Run("Verifications", func(t *testing.T) {
		all, err := provider.ListVerifications(ctx, idlegrid.VerificationFilter{})
		mustOK(t, err)
		got := readPages(t, size, func(before string) ([]string, error) {
			vs, err := provider.ListVerifications(ctx, idlegrid.VerificationFilter{Limit: size, Before: before})
			return idsOf(vs, func(v *idlegrid.Verification) string { return v.ID }), err
		})
		checkPaged(t, got, idsOf(all, func(v *idlegrid.Verification) string { return v.ID }), verifications)
	})
	t.Run("Challenges", func(t *testing.T) {
		all, err := provider.ListChallenges(ctx, nodeID, idlegrid.ChallengeFilter{})
		mustOK(t, err)
		got := readPages(t, size, func(before string) ([]string, error) {
			cs, err := provider.ListChallenges(ctx, nodeID, idlegrid.ChallengeFilter{Limit: size, Before: before})
			return idsOf(cs, func(c *idlegrid.Challenge) string { return c.ID }), err
		})
		checkPaged(t, got, idsOf(all, func(c *idlegrid.Challenge) string { return c.ID }), challenges)
	})
	t.Run("Quarantines", func(t *testing.T) {
		all, err := provider.ListQuarantines(ctx, true)
		mustOK(t, err)
		got := readPages(t, size, func(before string) ([]string, error) {
			qs, err := provider.ListQuarantinesPage(ctx, idlegrid.QuarantineFilter{Limit: size, Before: before})
			return idsOf(qs, func(q *idlegrid.Quarantine) string { return q.ID }), err
		})
		checkPaged(t, got, idsOf(all, func(q *idlegrid.Quarantine) string { return q.ID }), quarantines)
	})
	t.Run("BadCursor", func(t *testing.T) {
		for _, path := range []string{
			"/v1/verifications?before=verif_missing",
			"/v1/verifications?before=" + challenges[0], // not a verification
			"/v1/nodes/" + nodeID + "/challenges?before=chl_missing",
			"/v1/nodes/" + nodeID + "/challenges?state=failed&before=" + quarantines[0],
			"/v1/quarantine?state=all&before=qua_missing",
			"/v1/quarantine?before=" + verifications[0],
		} {
			got := mustDo(t, request(t, http.MethodGet, f.URL+path, providerSecret, ""))
			if got.Status != http.StatusBadRequest || got.Err(t).Field != "before" {
				t.Errorf("GET %s: %d %s, want 400 naming before", path, got.Status, got.Body)
			}
		}
		// Another provider's rows are not in this provider's lists.
		other, _, _ := f.mustAccount(t, "silo", idlegrid.RoleProvider)
		_, err := other.ListQuarantinesPage(ctx, idlegrid.QuarantineFilter{Before: quarantines[6]})
		if e, ok := err.(*idlegrid.Error); !ok || e.Code != idlegrid.EINVALID || e.Field != "before" {
			t.Errorf("another provider's page after %s: %v, want invalid before", quarantines[6], err)
		}
	})
}

// readPages reads a list through list a page of size at a time, each
// after the last of the one before, until a short page.
func readPages(t *testing.T, size int, list func(before string) ([]string, error)) []string {
	t.Helper()
	var got []string
	for before, pages := "", 0; pages < 100; pages++ {
		page, err := list(before)
		mustOK(t, err)
		if got = append(got, page...); len(page) < size {
			return got
		}
		before = page[len(page)-1]
	}
	t.Fatalf("still paging after 100 pages: %d rows", len(got))
	return nil
}

// checkPaged fails t unless got, read a page at a time, is the whole list
// read at once and holds every row stored.
func checkPaged(t *testing.T, got, whole, stored []string) {
	t.Helper()
	if !slices.Equal(got, whole) {
		t.Errorf("a page at a time = %v, want the whole list %v", got, whole)
	}
	for _, id := range stored {
		if !slices.Contains(got, id) {
			t.Errorf("%s, stored, is on no page of %v", id, got)
		}
	}
}

func mustVerification(tb testing.TB, f *fixture, renterID, providerID string, at time.Time) string {
	tb.Helper()
	v := &idlegrid.Verification{ID: idlegrid.NewID("verif"), RenterID: renterID, State: idlegrid.VerificationRerunning,
		Original:  idlegrid.Run{JobID: idlegrid.NewID("job"), LeaseID: idlegrid.NewID("lease"), ProviderID: providerID, Digest: "sha256:aa"},
		Rerun:     idlegrid.Run{JobID: idlegrid.NewID("job")},
		CreatedAt: at, UpdatedAt: at}
	mustOK(tb, f.Store.CreateVerification(context.Background(), v, nil))
	return v.ID
}

func mustChallenge(tb testing.TB, f *fixture, n *idlegrid.Node, at time.Time) string {
	tb.Helper()
	c := &idlegrid.Challenge{ID: idlegrid.NewID("chl"), NodeID: n.ID, GPUUUID: n.GPUs[0].UUID, Model: n.GPUs[0].Model,
		VRAMMB: n.GPUs[0].VRAMMB, Seed: "00112233445566778899aabbccddeeff", Size: 256, Reason: idlegrid.ChallengeAtRandom,
		State: idlegrid.ChallengeIssued, MinNanos: 10, MaxNanos: 40, IssuedAt: at, Deadline: at.Add(10 * time.Minute)}
	mustOK(tb, f.Store.CreateChallenge(context.Background(), c))
	return c.ID
}

// mustQuarantine quarantines the node since at and, with lift, lifts it.
func mustQuarantine(tb testing.TB, f *fixture, nodeID string, at time.Time, lift bool) string {
	tb.Helper()
	ctx := context.Background()
	q := &idlegrid.Quarantine{ID: idlegrid.NewID("qua"), NodeID: nodeID, Reason: "VBIOS changed", Since: at}
	mustOK(tb, f.Store.QuarantineNode(ctx, q))
	if lift {
		_, err := f.Store.LiftQuarantine(ctx, nodeID, "acct_admin", "reflashed", at)
		mustOK(tb, err)
	}
	return q.ID
}

// mustOK fails tb on err.
func mustOK(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

func idsOf[T any](vs []T, id func(T) string) []string {
	var out []string
	for _, v := range vs {
		out = append(out, id(v))
	}
	return out
}
