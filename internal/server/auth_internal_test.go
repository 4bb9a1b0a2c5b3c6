package server

import (
	"context"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// TestRequireRole_saysWhichRole: a refusal names the caller's role and
// the roles that may, with their articles.
func TestRequireRole_saysWhichRole(t *testing.T) {
	ctx := idlegrid.NewContextWithCaller(context.Background(), &idlegrid.Caller{AccountID: "acct_1", Role: idlegrid.RoleAdmin})
	for _, tc := range []struct {
		roles []idlegrid.Role
		want  string
	}{
		{[]idlegrid.Role{idlegrid.RoleProvider}, "an admin account may not do this; it takes a provider account"},
		{[]idlegrid.Role{idlegrid.RoleRenter, idlegrid.RoleProvider}, "an admin account may not do this; it takes a renter or a provider account"},
	} {
		_, err := requireRole(ctx, tc.roles...)
		if idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN || idlegrid.ErrorMessage(err) != tc.want {
			t.Errorf("requireRole(%v) = %v, want forbidden: %q", tc.roles, err, tc.want)
		}
	}
	ctx = idlegrid.NewContextWithCaller(context.Background(), &idlegrid.Caller{AccountID: "acct_2", Role: idlegrid.RoleRenter})
	if _, err := requireRole(ctx, idlegrid.RoleRenter); err != nil {
		t.Errorf("a renter refused a renter's call: %v", err)
	}
}
