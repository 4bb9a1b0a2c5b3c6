package cli

import (
	"context"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// TestTokenCommand_createOutOfRange: a --max-uses or --ttl the server
// refuses is a mistake in the command line, named as the flag typed.
func TestTokenCommand_createOutOfRange(t *testing.T) {
	url, adminKey := mustServer(t)
	_, _, providerKey, err := client.New(url, adminKey).CreateAccount(context.Background(), "garage", idlegrid.RoleProvider)
	if err != nil {
		t.Fatal(err)
	}
	prov := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": providerKey}
	for _, tt := range []struct {
		name string
		args []string
		want string // the first line of stderr
	}{
		{"MaxUses", []string{"--max-uses", "20000"}, "idlegrid: --max-uses: must be between 1 and 10000"},
		{"LongTTL", []string{"--ttl", "100000h"}, "idlegrid: --ttl: must be between 60 seconds and 30 days"},
		{"ShortTTL", []string{"--ttl", "10s"}, "idlegrid: --ttl: must be between 60 seconds and 30 days"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, prov, append([]string{"token", "create", "--name", "rack-3"}, tt.args...)...)
			if got := firstLines(r.err, 1); r.code != 2 || got != tt.want {
				t.Fatalf("got %s\nwant exit 2, stderr starting %q", r, tt.want)
			}
		})
	}
}
