package idlegrid_test

import (
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// TestAccount_Validate: a name is text a person can read and tell apart:
// not blank, no spaces at its ends, no control characters.
func TestAccount_Validate(t *testing.T) {
	for name, want := range map[string]string{
		"acme":                   "",
		"Acme Labs":              "",
		"":                       "required",
		"   ":                    "not only spaces",
		" acme":                  "no spaces at its start or end",
		"acme\t2":                "control characters",
		"a\nb":                   "control characters",
		strings.Repeat("a", 101): "at most 100 characters",
	} {
		err := (&idlegrid.Account{Name: name, Role: idlegrid.RoleRenter}).Validate()
		switch {
		case want == "" && err != nil:
			t.Errorf("name %q: %v, want it taken", name, err)
		case want != "" && (idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), "account.name: ") || !strings.Contains(err.Error(), want)):
			t.Errorf("name %q: %v, want account.name refused, saying %q", name, err, want)
		}
	}
}
