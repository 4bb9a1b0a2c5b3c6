package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// TestReadmeTour runs the README's tour, line by line, against "idlegrid
// dev": every idlegrid command in it must succeed, and so must the curl
// call to the gateway, so that the front door never shows a command that
// no longer works. The tour's placeholders are filled in as a reader
// would: DIR with the data directory, JOB_ID with the first job it
// submits, LEASE_ID with that job's lease, NODE_ID with a node, QUEUED_ID
// with a job that waits (the demo renter's second job is one no node can
// take).
func TestReadmeTour(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a whole market; skipped with -short")
	}
	tour := readmeTour(t)
	dir := t.TempDir()
	b := startMain(t, "dev", "--addr", "127.0.0.1:0", "--data", dir, "--speed", "20")
	url := b.waitForMatch(t, regexp.MustCompile(`(?m)^  API +(http://127\.0\.0\.1:\d+)$`))
	env := map[string]string{}
	ids := map[string]string{"DIR": dir}
	for _, line := range tour {
		line = fillIn(line, ids)
		switch {
		case strings.HasPrefix(line, "go install "):
			// The test runs the commands in this process.
		case strings.HasPrefix(line, "export "):
			exportVars(t, env, strings.TrimPrefix(line, "export "), url)
		case strings.HasPrefix(line, "curl "):
			eventually(t, line, func() error { return curlTour(line, env) })
		case strings.HasPrefix(line, "idlegrid "):
			runTourLine(t, env, ids, line)
		default:
			t.Fatalf("the tour has a line this test cannot run: %q", line)
		}
	}
	for _, id := range []string{"JOB_ID", "LEASE_ID", "NODE_ID"} {
		if ids[id] == "" {
			t.Errorf("the tour never needed %s; the test's placeholders are out of date", id)
		}
	}
}

// readmeTour is the commands of the README's tour: its first sh block,
// with continued lines joined and comments cut.
func readmeTour(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## A short tour")
	if !ok {
		t.Fatal(`README.md has no "## A short tour"`)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("the README's tour has no sh block")
	}
	block = strings.ReplaceAll(block, "\\\n", " ")
	comment := regexp.MustCompile(`(^|\s+)#\s.*$`)
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(comment.ReplaceAllString(l, "")); l != "" {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
	}
	return lines
}

// fillIn replaces the placeholders the tour uses with what is known so far.
func fillIn(line string, ids map[string]string) string {
	for k, v := range ids {
		if v != "" {
			line = strings.ReplaceAll(line, k, v)
		}
	}
	return line
}

// exportVars sets the tour's variables, NAME=VALUE each; a value of
// $(cat FILE) is the file's content.
func exportVars(t *testing.T, env map[string]string, assigns, url string) {
	t.Helper()
	all := regexp.MustCompile(`(\w+)=(\$\(cat [^)]*\)|\S+)`).FindAllStringSubmatch(assigns, -1)
	if len(all) == 0 {
		t.Fatalf("export %q: no NAME=VALUE", assigns)
	}
	for _, a := range all {
		k, v := a[1], a[2]
		if file, ok := strings.CutPrefix(v, "$(cat "); ok {
			b, err := os.ReadFile(strings.TrimSuffix(file, ")"))
			if err != nil {
				t.Fatal(err)
			}
			v = strings.TrimSpace(string(b))
		}
		if k == "IDLEGRID_ADDR" {
			v = url // the tour assumes the default port
		}
		env[k] = v
	}
}

// runTourLine runs one idlegrid command of the tour until it succeeds (some
// need the market to move on first: a lease to exist, a receipt to come),
// after filling in the placeholders it needs.
func runTourLine(t *testing.T, env, ids map[string]string, line string) {
	t.Helper()
	for _, id := range []string{"JOB_ID", "LEASE_ID", "NODE_ID"} {
		if strings.Contains(line, id) {
			eventually(t, "a value for "+id, func() error { return findID(t, env, ids, id) })
			line = fillIn(line, ids)
		}
	}
	args := strings.Fields(line)[1:]
	var last result
	eventually(t, line, func() error {
		if strings.Contains(line, "QUEUED_ID") { // looked up each time: the market moves on under the tour
			id, err := queuedJob(t, env)
			if err != nil {
				return err
			}
			args = strings.Fields(strings.ReplaceAll(line, "QUEUED_ID", id))[1:]
		}
		switch last = run(t, env, args...); last.code {
		case 0:
			return nil
		case 2: // a mistake in the command line: no waiting mends it
			t.Fatalf("%s: %s", line, last)
		}
		return errors.New(last.String())
	})
	if args[0] == "job" && args[1] == "submit" && ids["JOB_ID"] == "" {
		ids["JOB_ID"] = regexp.MustCompile(`job_[a-z0-9]+`).FindString(last.out)
		if ids["JOB_ID"] == "" {
			t.Fatalf("%s printed no job ID:\n%s", line, last.out)
		}
	}
}

// findID looks up the value of a placeholder the tour has not given yet.
func findID(t *testing.T, env, ids map[string]string, id string) error {
	switch id {
	case "NODE_ID":
		var nodes []*idlegrid.Node
		mustJSON(t, env, &nodes, "node", "ls")
		if len(nodes) == 0 {
			return errors.New("no node has joined yet")
		}
		ids[id] = nodes[0].ID
	case "LEASE_ID":
		var leases []*idlegrid.Lease
		mustJSON(t, env, &leases, "job", "leases", ids["JOB_ID"])
		if len(leases) == 0 {
			return fmt.Errorf("job %s has no lease yet", ids["JOB_ID"])
		}
		ids[id] = leases[0].ID
	case "JOB_ID":
		return errors.New("the tour uses JOB_ID before it submits a job")
	}
	return nil
}

// queuedJob is the ID of a job that waits now.
func queuedJob(t *testing.T, env map[string]string) (string, error) {
	var jobs []*idlegrid.Job
	mustJSON(t, env, &jobs, "job", "ls", "--state", "queued")
	if len(jobs) == 0 {
		return "", errors.New("no job waits")
	}
	return jobs[0].ID, nil
}

// tourIDs are the placeholders of the tour's curl calls, each for the
// last ID it got with that prefix.
var tourIDs = map[string]string{"RESPONSE_ID": "resp_", "CONVERSATION_ID": "conv_"}

// curlTour makes the tour's curl call: a POST of -d's body with its
// headers, which must answer 200. RESPONSE_ID is the last response's ID
// the tour got, CONVERSATION_ID the last conversation's.
func curlTour(line string, env map[string]string) error {
	for k, v := range env {
		line = strings.ReplaceAll(line, "$"+k, v)
	}
	for placeholder := range tourIDs {
		if !strings.Contains(line, placeholder) {
			continue
		}
		if env[placeholder] == "" {
			return fmt.Errorf("%q names %s, but the tour made none before it", line, placeholder)
		}
		line = strings.ReplaceAll(line, placeholder, env[placeholder])
	}
	m := regexp.MustCompile(`^curl (\S+) -H "([^:]+): ([^"]+)" -d '([^']*)'$`).FindStringSubmatch(line)
	if m == nil {
		return fmt.Errorf("a curl line this test cannot read: %q", line)
	}
	req, err := http.NewRequest(http.MethodPost, m[1], strings.NewReader(m[4]))
	if err != nil {
		return err
	}
	req.Header.Set(m[2], m[3])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	var answer struct{ ID string }
	if json.Unmarshal(body, &answer) == nil {
		for placeholder, prefix := range tourIDs {
			if strings.HasPrefix(answer.ID, prefix) {
				env[placeholder] = answer.ID // which the tour's next calls name
			}
		}
	}
	return nil
}
