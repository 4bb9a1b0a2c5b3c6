package cli

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestJobCommands_state: the commands about one job say what state it is
// in: explain refuses a job that runs or ended rather than say it could
// start now; cancel of a running job says that its lease is being
// stopped; leases say what set each price; logs of a job cancelled before
// it ran say that it never ran.
func TestJobCommands_state(t *testing.T) {
	m := mustMoneyMarket(t)
	var jobs []idlegrid.Job
	mustJSON(t, m.renter, &jobs, "job", "ls")
	done := jobs[0].ID // moneyMarket's job, succeeded
	r := run(t, m.renter, "job", "explain", done)
	if r.code != 1 || !strings.Contains(r.err, "is not queued: it ended ") || !strings.Contains(r.err, ", succeeded") ||
		!strings.Contains(r.err, "'idlegrid job get "+done+"'") {
		t.Errorf("job explain of a job that ended: %s\nwant exit 1, saying it ended, and how to see it", r)
	}

	id, lease := m.runningJob(t)
	if r := run(t, m.renter, "job", "explain", id); r.code != 1 || !strings.Contains(r.err, "is not queued: it has been running since ") {
		t.Errorf("job explain of a running job: %s\nwant exit 1, saying it runs", r)
	}
	r = run(t, m.renter, "job", "leases", id)
	if r.code != 0 || !regexp.MustCompile(`PRICE +PRICED BY +HOLD`).MatchString(r.out) ||
		!regexp.MustCompile(lease.ID+`.* \$\d+\.\d+/GPU-h +(the runner-up|a busy rival|the cap|the ask|gang clearing) +\$`).MatchString(r.out) {
		t.Errorf("job leases: %s\nwant a PRICED BY column beside the price", r)
	}
	r = run(t, m.renter, "job", "cancel", id)
	if want := id + ": cancelling: stopping its lease on " + lease.NodeID + "; the job is cancelled once it stops"; r.code != 0 || !strings.HasPrefix(r.out, want) {
		t.Errorf("job cancel of a running job: %s\nwant it to start %q", r, want)
	}

	r = run(t, m.renter, "job", "submit", "--image", "python:3.12", "--duration", "1m", "--max-price", "0.01", "--json")
	var queued idlegrid.Job
	if r.code != 0 || json.Unmarshal([]byte(r.out), &queued) != nil {
		t.Fatalf("job submit: %s", r)
	}
	if r := run(t, m.renter, "job", "logs", queued.ID); r.code != 0 || !strings.Contains(r.err, "has no lease yet") {
		t.Errorf("job logs of a queued job: %s", r)
	}
	must(t, m.renter, "job", "cancel", queued.ID)
	r = run(t, m.renter, "job", "logs", queued.ID)
	if r.code != 0 || !strings.Contains(r.err, queued.ID+" never ran, so it has no logs: it ended cancelled before it was placed") || strings.Contains(r.err, "yet") {
		t.Errorf("job logs of a job cancelled before it ran: %s", r)
	}
}

// TestCommands_notFound: a command given an ID that is not there fails,
// and says how to find the right one, rather than print nothing.
func TestCommands_notFound(t *testing.T) {
	m := mustMoneyMarket(t)
	for _, tc := range []struct {
		who        map[string]string
		args       []string
		want, hint string
	}{
		{m.renter, []string{"job", "logs", "job_nope"}, `job "job_nope" not found`, "'idlegrid job ls'"},
		{m.renter, []string{"job", "logs", "job_nope", "-f"}, `job "job_nope" not found`, "'idlegrid job ls'"},
		{m.renter, []string{"job", "leases", "job_nope"}, `job "job_nope" not found`, "'idlegrid job ls'"},
		{m.admin, []string{"account", "transfers", "acct_nope"}, `account "acct_nope" not found`, "'idlegrid account ls'"},
		{m.admin, []string{"account", "notices", "acct_nope"}, `account "acct_nope" not found`, "'idlegrid account ls'"},
		{m.renter, []string{"registry", "logout", "ghcr.io"}, "has no login to registry ghcr.io", "'idlegrid registry ls'"},
	} {
		r := run(t, tc.who, tc.args...)
		if r.code != 1 || !strings.Contains(r.err, tc.want) || !strings.Contains(r.err, tc.hint) {
			t.Errorf("%s: %s\nwant exit 1, %q and a hint naming %s", strings.Join(tc.args, " "), r, tc.want, tc.hint)
		}
	}
	if out := must(t, m.renter, "account", "notices", m.renterID); strings.Contains(out, "not found") {
		t.Errorf("account notices of the renter's own account, which has none: %q", out)
	}
}

// TestCommands_serverRefusesFlag: a flag's value the server refuses is a
// mistake in the command line, named as the flag typed: exit 2.
func TestCommands_serverRefusesFlag(t *testing.T) {
	m := mustMoneyMarket(t)
	r := run(t, m.renter, "job", "ls", "--before", "job_nosuch")
	if want := `idlegrid: --before: no job job_nosuch of yours to list from; give the last job ID of the page before`; r.code != 2 || firstLines(r.err, 1) != want {
		t.Errorf("job ls --before job_nosuch: %s\nwant exit 2 and %q", r, want)
	}
	r = run(t, m.renter, "lease", "ls", "--limit", "20000")
	if r.code != 2 || !strings.HasPrefix(r.err, "idlegrid: --limit: ") {
		t.Errorf("lease ls --limit 20000: %s\nwant exit 2, naming --limit", r)
	}
}

// TestMoneyCommands_hints: what a provider is told to do when its money
// does not cover a bond or a payout is what a provider can do, and a bond
// release says how much bond there is, not a ledger account's name; a
// payout settled already points to the list of payouts.
func TestMoneyCommands_hints(t *testing.T) {
	m := mustMoneyMarket(t)
	for _, args := range [][]string{{"bond", "post", "1000"}, {"payout", "request", "1000"}} {
		r := run(t, m.provider, args...)
		if r.code != 1 || strings.Contains(r.err, "topup") || !strings.Contains(r.err, "'idlegrid account' shows your payable and pending earnings") {
			t.Errorf("%s: %s\nwant what a provider can do, not a top-up", strings.Join(args, " "), r)
		}
	}
	r := run(t, m.provider, "bond", "release", "1")
	if r.code != 1 || strings.Contains(r.err, "ledger account") || strings.Contains(r.err, "topup") ||
		!strings.Contains(r.err, "your bond is $0.000000, less than the $1.000000 to release") {
		t.Errorf("bond release of more than the bond: %s", r)
	}
	var b idlegrid.Balance
	mustJSON(t, m.provider, &b, "account", "balance")
	var p idlegrid.Payout
	mustJSON(t, m.provider, &p, "payout", "request", units(b.Payable))
	must(t, m.admin, "payout", "settle", p.ID)
	r = run(t, m.admin, "payout", "settle", p.ID)
	if r.code != 1 || strings.Contains(r.err, "'get'") || !strings.Contains(r.err, "'idlegrid payout ls'") {
		t.Errorf("payout settle twice: %s\nwant a hint naming payout ls", r)
	}
}

// TestDevCommand_addressTaken: dev names its own flag for the address,
// --addr, when the one it was given is taken.
func TestDevCommand_addressTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustOK(t, err)
	defer ln.Close()
	r := runUntil(t, 30*time.Second, nil, "dev", "--addr", ln.Addr().String(), "--data", t.TempDir())
	if r.code != 1 || !strings.Contains(r.err, "pick another address with --addr") {
		t.Errorf("dev on a taken address: %s\nwant it to name --addr", r)
	}
}

// TestListenAddress_malformed: an address that is none (no port, a URL, a
// port past 65535) is a mistake in the command line, exit 2, named as the
// flag given, and leaves no database behind; a taken one is a failure.
func TestListenAddress_malformed(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--listen", "nope"}, `idlegrid: --listen: "nope" is not an address: missing port in address; give HOST:PORT`},
		{[]string{"server", "--listen", "127.0.0.1:99999"}, `idlegrid: --listen: "127.0.0.1:99999" is not an address: port "99999" is not a port number`},
		{[]string{"server", "--listen", "http://127.0.0.1:7070"}, `idlegrid: --listen: "http://127.0.0.1:7070" is a URL: give the address alone, 127.0.0.1:7070, without http://`},
		{[]string{"dev", "--addr", "localhost"}, `idlegrid: --addr: "localhost" is not an address: missing port in address`},
	} {
		dir := t.TempDir()
		args := tt.args
		if args[0] == "server" {
			args = append(args, "--db", filepath.Join(dir, "x.db"))
		} else {
			args = append(args, "--data", dir)
		}
		r := runUntil(t, 30*time.Second, nil, args...)
		if r.code != 2 || !strings.HasPrefix(r.err, tt.want) {
			t.Errorf("%v: %s\nwant exit 2 and stderr beginning %q", tt.args, r, tt.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "x.db")); err == nil {
			t.Errorf("%v left a database behind", tt.args)
		}
	}
}
