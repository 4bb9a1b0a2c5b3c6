package sqlstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// trustPageTimes are the times of the rows each trust list is paged
// through, in the order they are stored: not in time order, and with ties,
// which the store breaks by ID.
var trustPageTimes = []time.Duration{time.Minute, 0, time.Minute, 2 * time.Minute, 0, time.Minute, 0}

// trustPageSize is smaller than the rows, so that a list takes three pages.
const trustPageSize = 3

// testTrustListPaging reads verifications, challenges and quarantines a
// page at a time: every row once, newest first, ties by ID, and a cursor
// that is not a row of the list refused.
func testTrustListPaging(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	t.Run("Verifications", func(t *testing.T) {
		r, other := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleRenter)
		verify := func(renterID string, d time.Duration) string {
			v := &idlegrid.Verification{ID: id("verif"), RenterID: renterID, State: idlegrid.VerificationRerunning,
				Original:  idlegrid.Run{JobID: id("job"), LeaseID: id("lease"), ProviderID: "prov_1", Digest: "sha256:aa"},
				Rerun:     idlegrid.Run{JobID: id("job")},
				CreatedAt: at(d), UpdatedAt: at(d)}
			mustOK(t, db.CreateVerification(ctx, v, nil))
			return v.ID
		}
		var want []pageRow
		for _, d := range trustPageTimes {
			want = append(want, pageRow{verify(r.ID, d), d})
		}
		outside := verify(other.ID, time.Minute)
		got := pageAll(t, func(before string) ([]string, error) {
			vs, err := db.ListVerifications(ctx, idlegrid.VerificationFilter{RenterID: r.ID, Before: before, Limit: trustPageSize})
			return idsOf(vs, func(v *idlegrid.Verification) string { return v.ID }), err
		})
		checkPages(t, "ListVerifications", got, want)
		for _, before := range []string{outside, "verif_missing"} {
			_, err := db.ListVerifications(ctx, idlegrid.VerificationFilter{RenterID: r.ID, Before: before})
			wantField(t, err, "before")
		}
	})
	t.Run("Challenges", func(t *testing.T) {
		p := mustAccount(t, db, idlegrid.RoleProvider)
		n, m := mustNode(t, db, p.ID, 1), mustNode(t, db, p.ID, 1)
		issue := func(n *idlegrid.Node, d time.Duration) string {
			c := &idlegrid.Challenge{ID: id("chl"), NodeID: n.ID, GPUUUID: n.GPUs[0].UUID, Model: "H100-80GB", VRAMMB: 81920,
				Seed: "00112233445566778899aabbccddeeff", Size: 256, Reason: idlegrid.ChallengeAtRandom, State: idlegrid.ChallengeIssued,
				MinNanos: 10, MaxNanos: 40, IssuedAt: at(d), Deadline: at(d + 10*time.Minute)}
			mustOK(t, db.CreateChallenge(ctx, c))
			return c.ID
		}
		var want []pageRow
		for _, d := range trustPageTimes {
			want = append(want, pageRow{issue(n, d), d})
		}
		outside := issue(m, time.Minute)
		got := pageAll(t, func(before string) ([]string, error) {
			cs, err := db.ListChallenges(ctx, idlegrid.ChallengeFilter{NodeID: n.ID, Before: before, Limit: trustPageSize})
			return idsOf(cs, func(c *idlegrid.Challenge) string { return c.ID }), err
		})
		checkPages(t, "ListChallenges", got, want)
		for _, before := range []string{outside, "chl_missing"} {
			_, err := db.ListChallenges(ctx, idlegrid.ChallengeFilter{NodeID: n.ID, Before: before})
			wantField(t, err, "before")
		}
	})
	t.Run("Quarantines", func(t *testing.T) {
		p, other := mustAccount(t, db, idlegrid.RoleProvider), mustAccount(t, db, idlegrid.RoleProvider)
		nodeOf := map[string]string{} // quarantine ID → node ID
		quarantine := func(providerID string, d time.Duration) string {
			q := &idlegrid.Quarantine{ID: id("qua"), NodeID: mustNode(t, db, providerID, 1).ID, Reason: "VBIOS changed", Since: at(d)}
			mustOK(t, db.QuarantineNode(ctx, q))
			nodeOf[q.ID] = q.NodeID
			return q.ID
		}
		var want []pageRow
		for _, d := range trustPageTimes {
			want = append(want, pageRow{quarantine(p.ID, d), d})
		}
		outside := quarantine(other.ID, time.Minute)
		list := func(f idlegrid.QuarantineFilter) []string {
			f.ProviderID, f.Limit = p.ID, trustPageSize
			return pageAll(t, func(before string) ([]string, error) {
				f.Before = before
				qs, err := db.ListQuarantines(ctx, f)
				return idsOf(qs, func(q *idlegrid.Quarantine) string { return q.ID }), err
			})
		}
		checkPages(t, "ListQuarantines", list(idlegrid.QuarantineFilter{}), want)
		for _, before := range []string{outside, "qua_missing"} {
			_, err := db.ListQuarantines(ctx, idlegrid.QuarantineFilter{ProviderID: p.ID, Before: before})
			wantField(t, err, "before")
		}

		// The last of a page of those in force, lifted before the next page
		// is read, still says where that page begins.
		order := newestFirstOrder(want)
		lifted := order[trustPageSize-1]
		_, err := db.LiftQuarantine(ctx, nodeOf[lifted], "acct_admin", "", at(time.Hour))
		mustOK(t, err)
		next, err := db.ListQuarantines(ctx, idlegrid.QuarantineFilter{ProviderID: p.ID, ActiveOnly: true, Before: lifted, Limit: trustPageSize})
		mustOK(t, err)
		if got, want := idsOf(next, func(q *idlegrid.Quarantine) string { return q.ID }), order[trustPageSize:2*trustPageSize]; !slices.Equal(got, want) {
			t.Errorf("those in force after the lifted %s = %v, want %v", lifted, got, want)
		}
		inForce := slices.DeleteFunc(slices.Clone(order), func(id string) bool { return id == lifted })
		if got := list(idlegrid.QuarantineFilter{ActiveOnly: true}); !slices.Equal(got, inForce) {
			t.Errorf("those in force %d at a time = %v, want %v", trustPageSize, got, inForce)
		}
	})
}

// pageRow is a row stored for a paging test: its ID and time after t0.
type pageRow struct {
	id string
	at time.Duration
}

// newestFirstOrder is the IDs of rows in the order a list shows them:
// newest first, ties by ID, the greater first.
func newestFirstOrder(rows []pageRow) []string {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b pageRow) int {
		if a.at != b.at {
			return int(b.at - a.at)
		}
		return strings.Compare(b.id, a.id)
	})
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	return ids
}

// pageAll reads a list a page at a time, each after the last row of the
// one before, until a short page; a list that never ends fails tb.
func pageAll(tb testing.TB, list func(before string) ([]string, error)) []string {
	tb.Helper()
	var got []string
	for before, pages := "", 0; ; pages++ {
		if pages > len(trustPageTimes) {
			tb.Fatalf("still paging after %d pages: %v", pages, got)
		}
		page, err := list(before)
		mustOK(tb, err)
		if got = append(got, page...); len(page) < trustPageSize {
			return got
		}
		before = page[len(page)-1]
	}
}

// checkPages fails t unless got, the IDs read a page at a time, are want's
// rows in a list's order.
func checkPages(t *testing.T, name string, got []string, rows []pageRow) {
	t.Helper()
	if want := newestFirstOrder(rows); !slices.Equal(got, want) {
		t.Errorf("%s %d at a time = %v, want %v", name, trustPageSize, got, want)
	}
}

func idsOf[T any](vs []T, id func(T) string) []string {
	var out []string
	for _, v := range vs {
		out = append(out, id(v))
	}
	return out
}
