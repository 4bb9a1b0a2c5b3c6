package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestNoneListed: a listing that finds nothing says so, naming the
// filters typed (quoted for the shell where need be) or the page asked
// past, rather than print a bare header; --json prints [].
func TestNoneListed(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/jobs":
			w.Write([]byte(`{"jobs":[]}`))
		case "/v1/leases":
			w.Write([]byte(`{"leases":[]}`))
		case "/v1/jobs/job_q":
			w.Write([]byte(`{"id":"job_q","state":"queued"}`))
		case "/v1/jobs/job_c":
			w.Write([]byte(`{"id":"job_c","state":"cancelled"}`))
		default:
			w.Write([]byte(`{}`))
		}
	}))
	defer ts.Close()
	vars := map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "k"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"job", "ls"}, "no jobs to list yet (submit one with 'idlegrid job submit')\n"},
		{[]string{"job", "ls", "--state", "failed", "--name", "lr search"}, "no job matches --name 'lr search' --state failed\n"},
		{[]string{"job", "ls", "--before", "job_x", "--limit", "5"}, "no more jobs before job_x\n"},
		{[]string{"job", "ls", "--json"}, "[]\n"},
		{[]string{"job", "leases", "job_q"}, "job_q has no lease yet: it is queued ('idlegrid job explain job_q' says why it waits)\n"},
		{[]string{"job", "leases", "job_c"}, "job_c has no lease: it ended, cancelled, before it was placed on a node\n"},
		{[]string{"job", "leases", "job_q", "--json"}, "[]\n"},
	} {
		if r := run(t, vars, tt.args...); r.code != 0 || r.out != tt.want {
			t.Errorf("%s: %s\nwant exit 0 and %q", strings.Join(tt.args, " "), r, tt.want)
		}
	}
}
