package server_test

import (
	"slices"
	"testing"
	"testing/synctest"

	"github.com/idlegrid/idlegrid"
)

// TestServer_ListNodes_after: a page's cursor must be a node the caller
// lists; the page after it goes on in the list's order.
func TestServer_ListNodes_after(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t) // barn-1 (silver $0.40) and barn-2 (silver $0.50)
		ids := func(f idlegrid.NodeFilter) []string {
			t.Helper()
			nodes, _, err := m.srv.ListNodes(m.provider, f)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range nodes {
				got = append(got, n.ID)
			}
			return got
		}
		for _, f := range []idlegrid.NodeFilter{{}, {Sort: idlegrid.NodesCheapest}, {Sort: idlegrid.NodesReliable}} {
			whole := ids(f)
			if len(whole) != 2 {
				t.Fatalf("nodes by %+v: %v, want both", f, whole)
			}
			page := f
			page.Limit = 1
			first := ids(page)
			page.After = whole[0]
			second := ids(page)
			page.After = whole[1]
			if !slices.Equal(first, whole[:1]) || !slices.Equal(second, whole[1:]) || len(ids(page)) != 0 {
				t.Errorf("nodes by %+v, a page of one at a time: %v, %v, %v; want %v and nothing after", f, first, second, ids(page), whole)
			}
		}
		other, _, _, err := m.srv.CreateAccount(m.admin, "other-barn", idlegrid.RoleProvider)
		if err != nil {
			t.Fatal(err)
		}
		stranger := idlegrid.NewContextWithCaller(m.admin, &idlegrid.Caller{AccountID: other.ID, Role: idlegrid.RoleProvider})
		_, _, err = m.srv.ListNodes(stranger, idlegrid.NodeFilter{After: m.nodeID})
		if e, ok := err.(*idlegrid.Error); !ok || e.Code != idlegrid.EINVALID || e.Field != "after" {
			t.Errorf("another provider pages after barn-1: %v, want EINVALID naming after", err)
		}
		if _, _, err := m.srv.ListNodes(m.renter, idlegrid.NodeFilter{After: m.nodeID}); err != nil {
			t.Errorf("a renter pages after barn-1: %v", err)
		}
	})
}
