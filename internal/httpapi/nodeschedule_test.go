package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
)

func TestAPI_nodeSchedule(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	provider, _, providerKey := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	_, _, otherKey := f.mustAccount(t, "other", idlegrid.RoleProvider)
	_, _, renterKey := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	agent, _, nodeID := f.mustNode(t, provider, "rig1")
	path := f.URL + "/v1/nodes/" + nodeID + "/schedule"
	evenings := `{"schedule":{"mode":"windows","time_zone":"Europe/Berlin","weekly":[{"days":["mon","fri"],"start":"18:00","end":"23:00"}]}}`

	decode := func(t *testing.T, a answer) idlegrid.NodeSchedule {
		t.Helper()
		var ns idlegrid.NodeSchedule
		if err := json.Unmarshal(a.Body, &ns); err != nil {
			t.Fatalf("decode %s: %v", a.Body, err)
		}
		return ns
	}

	t.Run("the owner sets it", func(t *testing.T) {
		got := mustDo(t, request(t, "PUT", path, providerKey, evenings))
		if got.Status != http.StatusOK {
			t.Fatalf("status %d, want 200: %s", got.Status, got.Body)
		}
		ns := decode(t, got)
		if ns.Owner == nil || ns.Schedule.Mode != idlegrid.ScheduleWindows || ns.Published.Mode != idlegrid.ScheduleAlways {
			t.Errorf("got %+v, want the owner's windows in force over the agent's always", ns)
		}
		n, err := provider.FindNode(ctx, nodeID)
		if err != nil {
			t.Fatal(err)
		}
		if n.Schedule.TimeZone != "Europe/Berlin" || len(n.Schedule.Weekly) != 1 {
			t.Errorf("node's schedule = %+v, want the owner's", n.Schedule)
		}
	})
	t.Run("the agent republishing does not undo it", func(t *testing.T) {
		if err := agent.UpdateOffer(ctx, idlegrid.OfferRequest{Offer: testOffer("rig1"), AgentVersion: "test"}); err != nil {
			t.Fatal(err)
		}
		got := decode(t, mustDo(t, request(t, "GET", path, providerKey, "")))
		if got.Schedule.Mode != idlegrid.ScheduleWindows || got.Schedule.TimeZone != "Europe/Berlin" {
			t.Errorf("after the agent republished, schedule = %+v, want the owner's", got.Schedule)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		for _, tt := range []struct {
			name, method, secret, body string
			status                     int
			field                      string
		}{
			{"another provider", "PUT", otherKey, evenings, http.StatusNotFound, ""},
			{"another provider reads", "GET", otherKey, "", http.StatusNotFound, ""},
			{"a renter", "PUT", renterKey, evenings, http.StatusForbidden, ""},
			{"an admin may not decide", "PUT", f.AdminSecret, evenings, http.StatusForbidden, ""},
			{"no key", "PUT", "", evenings, http.StatusUnauthorized, ""},
			{"bad mode", "PUT", providerKey, `{"schedule":{"mode":"sometimes"}}`, http.StatusBadRequest, "schedule.mode"},
			{"bad day", "PUT", providerKey, `{"schedule":{"mode":"windows","weekly":[{"days":["funday"],"start":"18:00","end":"23:00"}]}}`, http.StatusBadRequest, "schedule.weekly[0].days"},
			{"unknown field", "PUT", providerKey, `{"schedule":{"mode":"always"},"extra":1}`, http.StatusBadRequest, "extra"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				got := mustDo(t, request(t, tt.method, path, tt.secret, tt.body))
				if got.Status != tt.status {
					t.Fatalf("status %d, want %d: %s", got.Status, tt.status, got.Body)
				}
				if tt.field != "" && got.Err(t).Field != tt.field {
					t.Errorf("field %q, want %q", got.Err(t).Field, tt.field)
				}
			})
		}
	})
	t.Run("an admin may look", func(t *testing.T) {
		got := mustDo(t, request(t, "GET", path, f.AdminSecret, ""))
		if got.Status != http.StatusOK {
			t.Fatalf("status %d: %s", got.Status, got.Body)
		}
	})
	t.Run("removing hands it back to the agent", func(t *testing.T) {
		got := mustDo(t, request(t, "DELETE", path, providerKey, ""))
		if got.Status != http.StatusOK {
			t.Fatalf("status %d: %s", got.Status, got.Body)
		}
		if ns := decode(t, got); ns.Owner != nil || ns.Schedule.Mode != idlegrid.ScheduleAlways {
			t.Errorf("got %+v, want the agent's always and no owner schedule", ns)
		}
	})
}
