package cli

import (
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// TestJobSubmit_sweep: a sweep submits one job per combination of its
// values, each with them in its env and a numbered name; sent again with
// its key it makes no job twice; a mistake is said before anything goes in.
func TestJobSubmit_sweep(t *testing.T) {
	_, renter, _, _, _ := moneyMarket(t)
	args := []string{"job", "submit", "--name", "lr-search", "--image", "python:3.12", "--duration", "1m", "--max-price", "0.01",
		"--env", "EPOCHS=3", "--sweep", "LR=1e-3,3e-4", "--sweep", "BATCH=32,64,128", "--idempotency-key", "grid-1"}
	var jobs []sweptJob
	mustJSON(t, renter, &jobs, append(args, "--json")...)
	if len(jobs) != 6 {
		t.Fatalf("a sweep of 2 × 3 values made %d jobs, want 6", len(jobs))
	}
	for i, want := range []struct{ name, lr, batch string }{
		{"lr-search-1", "1e-3", "32"}, {"lr-search-2", "1e-3", "64"}, {"lr-search-3", "1e-3", "128"},
		{"lr-search-4", "3e-4", "32"}, {"lr-search-5", "3e-4", "64"}, {"lr-search-6", "3e-4", "128"},
	} {
		j := jobs[i]
		if j.Name != want.name || j.Env["LR"] != want.lr || j.Env["BATCH"] != want.batch || j.Env["EPOCHS"] != "3" ||
			j.Settings["LR"] != want.lr || j.IdempotencyKey != "grid-1-"+string(rune('1'+i)) || j.Replayed {
			t.Errorf("job %d: %s %v settings %v key %q; want %s with LR=%s BATCH=%s EPOCHS=3", i+1, j.Name, j.Env, j.Settings,
				j.IdempotencyKey, want.name, want.lr, want.batch)
		}
	}

	// The same command again: the same jobs, none made twice.
	out := must(t, renter, args...)
	for _, want := range []string{"submitted a sweep of 6 jobs under idempotency key grid-1", "LR", "BATCH", "lr-search-6",
		"(submitted before)", "cancel those not ended: idlegrid job cancel --name lr-search- --yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("the sweep again printed:\n%s\nwant %q", out, want)
		}
	}
	var all []idlegrid.Job
	mustJSON(t, renter, &all, "job", "ls", "--limit", "100")
	if n := strings.Count(fmtNames(all), "lr-search-"); n != 6 {
		t.Errorf("%d jobs of the sweep stored after it ran twice, want 6", n)
	}
	var named []idlegrid.Job
	mustJSON(t, renter, &named, "job", "ls", "--name", "lr-search-", "--json")
	// The market's clock stands still here, so the six share a creation
	// time: only which jobs are listed is asked, not their order.
	if len(named) != 6 || strings.Count(fmtNames(named), "lr-search-") != 6 || !strings.Contains(out, "list them: idlegrid job ls --name lr-search-\n") {
		t.Errorf("job ls --name lr-search-: %s; want the sweep's 6 jobs, as the sweep said", fmtNames(named))
	}
	if r := run(t, renter, "job", "ls", "--name", "lr-search-", "--limit", "2"); !strings.Contains(r.out, "more may follow: idlegrid job ls --name lr-search- --limit 2 --before ") {
		t.Errorf("a full page of job ls --name: %s", r)
	}

	before := len(all)
	// The sweep's jobs cancelled by name, and none other.
	var cancelled []idlegrid.Job
	if r := run(t, renter, "job", "cancel", "--name", "lr-search-", "--json"); r.code != 2 || !strings.Contains(r.err, "cancelled nothing") || r.out != "" {
		t.Errorf("job cancel --name lr-search- without --yes: %s, want nothing cancelled, exit 2", r)
	}
	mustJSON(t, renter, &cancelled, "job", "cancel", "--name", "lr-search-", "--yes", "--json")
	if len(cancelled) != 6 || strings.Count(fmtNames(cancelled), "lr-search-") != 6 {
		t.Errorf("job cancel --name lr-search-: %s, want the sweep's 6 jobs", fmtNames(cancelled))
	}
	if out := must(t, renter, "job", "cancel", "--name", "lr-search-"); !strings.Contains(out, "nothing to cancel") {
		t.Errorf("job cancel --name again: %q, want nothing to cancel", out)
	}
	// With --json, none matching is an empty list, the words on stderr.
	if r := run(t, renter, "job", "cancel", "--name", "lr-search-", "--json"); r.code != 0 || r.out != "[]\n" || !strings.Contains(r.err, "nothing to cancel") {
		t.Errorf("job cancel --name again --json: %s, want [] and nothing to cancel on stderr", r)
	}
	if r := run(t, renter, "job", "cancel", "--name", "x", jobs[0].ID); r.code != 2 || !strings.Contains(r.err, "not both") {
		t.Errorf("job cancel with IDs and --name: %s", r)
	}
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--sweep", "LR"}, "want NAME=V1,V2,…"},
		{[]string{"--sweep", "IDLEGRID_X=1,2"}, "IDLEGRID_X is reserved"},
		{[]string{"--sweep", "LR=1,1"}, "neither empty nor repeated"},
		{[]string{"--sweep", "LR=1,2", "--sweep", "LR=3"}, "LR is swept twice"},
		{[]string{"--sweep", "A=" + seq(40), "--sweep", "B=" + seq(40)}, "more than 1000 jobs"},
		{[]string{"--sweep", "LR=1,2", "--wait"}, "--wait follows one job"},
	} {
		r := run(t, renter, append([]string{"job", "submit", "--image", "python:3.12", "--duration", "1m", "--max-price", "0.01"}, tc.flags...)...)
		if r.code != 2 || !strings.Contains(r.err, tc.want) {
			t.Errorf("job submit %v: %s; want a usage error saying %q", tc.flags, r, tc.want)
		}
	}
	mustJSON(t, renter, &all, "job", "ls", "--limit", "100")
	if len(all) != before {
		t.Errorf("%d jobs after the refused sweeps, want the %d before them", len(all), before)
	}
}

func fmtNames(jobs []idlegrid.Job) string {
	var b strings.Builder
	for _, j := range jobs {
		b.WriteString(j.Name + " ")
	}
	return b.String()
}

// seq is n distinct values: "x,xx,xxx,…".
func seq(n int) string {
	var parts []string
	for i := 1; i <= n; i++ {
		parts = append(parts, strings.Repeat("x", i))
	}
	return strings.Join(parts, ",")
}
