package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the client, and so the agent that uses it, free of
// the coordinator: no server, store, engine or database driver.
func TestDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", "github.com/idlegrid/idlegrid/client").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	banned := []string{
		"github.com/idlegrid/idlegrid/internal/server",
		"github.com/idlegrid/idlegrid/internal/sqlstore",
		"github.com/idlegrid/idlegrid/internal/market",
		"github.com/idlegrid/idlegrid/internal/httpapi", // the handlers; httpapi/wire is fine
		"database/sql",
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, b := range banned {
			if dep == b {
				t.Errorf("client imports %s", dep)
			}
		}
	}
}
