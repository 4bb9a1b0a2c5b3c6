package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// syncBuffer is a bytes.Buffer that a running command may write while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// background is a long-running command (server, dev) run by Main in a
// goroutine until the test cancels it.
type background struct {
	out, err syncBuffer
	cancel   context.CancelFunc
	code     chan int
}

func startMain(t *testing.T, args ...string) *background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{cancel: cancel, code: make(chan int, 1)}
	go func() {
		b.code <- Main(ctx, args, Stdio{Out: &b.out, Err: &b.err}, func(string) string { return "" })
	}()
	t.Cleanup(func() {
		if code := b.stop(t); code != 0 {
			t.Errorf("idlegrid %s exited %d after cancel, want 0\nstderr:\n%s", args[0], code, b.err.String())
		}
	})
	return b
}

// stop cancels the command and returns its exit code; it is safe to call twice.
func (b *background) stop(t *testing.T) int {
	t.Helper()
	b.cancel()
	select {
	case code := <-b.code:
		b.code <- code
		return code
	case <-time.After(waitLimit):
		t.Fatalf("command did not return within %s of cancel", waitLimit)
		return -1
	}
}

// Bounds of the polling waits: a loop checks every pollEvery, up to waitLimit.
const (
	pollEvery = 50 * time.Millisecond
	waitLimit = 90 * time.Second
)

// eventually calls check every pollEvery until it returns nil, and fails the
// test with check's last error when waitLimit passes first.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s: %v", what, waitLimit, err)
		}
		<-tick.C
	}
}

// waitForMatch waits until the command's stdout matches re and returns the
// first submatch.
func (b *background) waitForMatch(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	var got string
	eventually(t, "output matching "+re.String(), func() error {
		if m := re.FindStringSubmatch(b.out.String()); m != nil {
			got = m[1]
			return nil
		}
		select {
		case code := <-b.code:
			b.code <- code
			t.Fatalf("command exited %d before printing %s\nstdout:\n%s\nstderr:\n%s", code, re, b.out.String(), b.err.String())
		default:
		}
		return fmt.Errorf("not yet")
	})
	return got
}

// mustServer runs "idlegrid server" on a fresh SQLite file, with flags
// added, and returns its URL and the bootstrapped admin key.
func mustServer(t *testing.T, flags ...string) (url, adminKey string) {
	t.Helper()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "admin.key")
	b := startMain(t, append([]string{"server", "--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "idlegrid.db"), "--bootstrap-admin-key-file", keyFile}, flags...)...)
	url = b.waitForMatch(t, regexp.MustCompile(`^idlegrid server listening on (http://127\.0\.0\.1:\d+)\n`))
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return url, strings.TrimSpace(string(key))
}

// must runs a command that must succeed and returns its stdout.
func must(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	r := run(t, env, args...)
	if r.code != 0 {
		t.Fatalf("idlegrid %s: %s", strings.Join(args, " "), r)
	}
	return r.out
}

func mustJSON(t *testing.T, env map[string]string, v any, args ...string) {
	t.Helper()
	out := must(t, env, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("idlegrid %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestServerCommand_Bootstrap(t *testing.T) {
	dir := t.TempDir()
	db, keyFile := filepath.Join(dir, "idlegrid.db"), filepath.Join(dir, "admin.key")
	args := []string{"server", "--listen", "127.0.0.1:0", "--db", db, "--bootstrap-admin-key-file", keyFile}
	listening := regexp.MustCompile(`(?m)^idlegrid server listening on (http://127\.0\.0\.1:\d+)$`)

	first := startMain(t, args...)
	first.waitForMatch(t, listening)
	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode = %v, want 0600", fi.Mode().Perm())
	}
	key, _ := os.ReadFile(keyFile)
	if fi, err := os.Stat(filepath.Join(dir, "meter-journal")); err != nil || !fi.IsDir() {
		t.Errorf("the inference meter's journal beside the database: %v", err)
	}
	if !regexp.MustCompile(`msg="created the admin account; its API key is in the key file" account=acct_\w+ key_file=` + regexp.QuoteMeta(keyFile)).MatchString(first.err.String()) {
		t.Errorf("stderr does not announce the admin:\n%s", first.err.String())
	}
	if code := first.stop(t); code != 0 {
		t.Fatalf("server exited %d, want 0:\n%s", code, first.err.String())
	}

	// A restart on the same database keeps the admin and the file.
	second := startMain(t, args...)
	url := second.waitForMatch(t, listening)
	if again, _ := os.ReadFile(keyFile); string(again) != string(key) {
		t.Errorf("restart rewrote the key file")
	}
	if strings.Contains(second.err.String(), "created admin") {
		t.Errorf("restart created another admin:\n%s", second.err.String())
	}
	var accounts []*idlegrid.Account
	mustJSON(t, map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": strings.TrimSpace(string(key))}, &accounts, "account", "ls")
	if len(accounts) != 1 || accounts[0].Role != idlegrid.RoleAdmin {
		t.Errorf("accounts = %+v, want one admin", accounts)
	}

	// Every admin key revoked (or a first start cut short before its key
	// was kept): the next start gives the admin a key again, in the file.
	env := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": strings.TrimSpace(string(key))}
	var keys []*idlegrid.APIKey
	mustJSON(t, env, &keys, "key", "ls")
	if len(keys) != 1 {
		t.Fatalf("keys = %+v, want the admin's one", keys)
	}
	if r := run(t, env, "key", "revoke", keys[0].ID); r.code != 2 || !strings.Contains(r.err, "revoked nothing: "+keys[0].ID+" is the key in use") {
		t.Fatalf("revoke the key in use without --yes: %s; want it refused", r)
	}
	if r := run(t, env, "key", "revoke", keys[0].ID, "--yes"); r.code != 0 {
		t.Fatalf("revoke the admin's key: %s", r)
	}
	if code := second.stop(t); code != 0 {
		t.Fatalf("server exited %d, want 0:\n%s", code, second.err.String())
	}
	third := startMain(t, args...)
	url = third.waitForMatch(t, listening)
	fresh, _ := os.ReadFile(keyFile)
	if string(fresh) == string(key) || !strings.Contains(third.err.String(), "no admin had a usable API key") {
		t.Fatalf("after every admin key was revoked, the key file holds %q (was %q); stderr:\n%s", fresh, key, third.err.String())
	}
	mustJSON(t, map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": strings.TrimSpace(string(fresh))}, &accounts, "account", "ls")
	if len(accounts) != 1 {
		t.Errorf("accounts = %+v, want the one admin, acting with its new key", accounts)
	}
}

// TestServerCommand_secondOnOneDatabase: a second server on the SQLite
// database one is serving, even with a meter journal of its own, is
// refused the market lock; one on another database sharing the first's
// meter journal is refused the journal. Each exits at once saying why,
// and the first serves on.
func TestServerCommand_secondOnOneDatabase(t *testing.T) {
	dir := t.TempDir()
	args := []string{"server", "--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "idlegrid.db")}
	first := startMain(t, append(args, "--bootstrap-admin-key-file", filepath.Join(dir, "admin.key"))...)
	url := first.waitForMatch(t, regexp.MustCompile(`(?m)^idlegrid server listening on (http://127\.0\.0\.1:\d+)$`))

	// Without the refusals each would serve until waitLimit.
	r := runUntil(t, waitLimit, nil, append(args, "--meter-journal", filepath.Join(dir, "journal-2"))...)
	if r.code != 1 || !strings.Contains(r.err, "another idlegrid server is running the market on this database (") || !strings.Contains(r.err, "stop the other server first") {
		t.Fatalf("a second server on the database: %s\nwant exit 1, saying another runs the market and what to do", r)
	}
	r = runUntil(t, waitLimit, nil, "server", "--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "other.db"), "--meter-journal", filepath.Join(dir, "meter-journal"))
	if r.code != 1 || !strings.Contains(r.err, "the meter journal is in use by another server") || !strings.Contains(r.err, "give each server its own --meter-journal") {
		t.Fatalf("a server sharing the first's meter journal: %s\nwant exit 1, saying the journal is in use and what to do", r)
	}
	key, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	must(t, map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": strings.TrimSpace(string(key))}, "account", "ls")
}

func TestServerCommand_NoKeyFile(t *testing.T) {
	b := startMain(t, "server", "--listen", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "x.db"))
	b.waitForMatch(t, regexp.MustCompile(`listening on (http://\S+)`))
	if !regexp.MustCompile(`its API key \(shown once, keep it safe\):\nigk_\S+\n`).MatchString(b.err.String()) {
		t.Errorf("stderr does not show the admin key once:\n%s", b.err.String())
	}
}

func TestServerCommand_BadDatabase(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "server", "--listen", "127.0.0.1:0", "--db", filepath.Join(notADir, "x.db"))
	if r.code != 1 || !strings.HasPrefix(r.err, "idlegrid: open sqlite store") || !strings.Contains(r.err, "check --db") {
		t.Fatalf("got %s", r)
	}
}

func TestServerCommand_BadMeterJournal(t *testing.T) {
	dir := t.TempDir()
	notADir := filepath.Join(dir, "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "server", "--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "x.db"), "--meter-journal", filepath.Join(notADir, "journal"))
	if r.code != 1 || !strings.Contains(r.err, "meter journal") || !strings.Contains(r.err, "check --meter-journal") {
		t.Fatalf("got %s", r)
	}
}

// TestCommands_AgainstServer runs the account, key, token and job commands
// against a real server and checks their text and JSON output.
func TestCommands_AgainstServer(t *testing.T) {
	url, adminKey := mustServer(t)
	admin := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": adminKey}

	out := must(t, admin, "account", "create", "--name", "acme-research", "--role", "renter")
	m := regexp.MustCompile(`^created renter account (acct_\w+) \(acme-research\)\nAPI key \(shown once\): (igk_\w+)\nadd funds with: idlegrid account topup acct_\w+ 100\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("account create printed:\n%s", out)
	}
	renterID, renter := m[1], map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": m[2]}

	t.Run("TopUpAndBalance", func(t *testing.T) {
		out := must(t, admin, "account", "topup", renterID, "12.50", "--idempotency-key", "k1")
		want := "topped up " + renterID + " by $12.500000 (idempotency key k1)\n" +
			fmt.Sprintf("%-*s  AVAILABLE   HELD       SPENT      PENDING    PAYABLE    PAID OUT\n", len(renterID), "ACCOUNT") +
			renterID + "  $12.500000  $0.000000  $0.000000  $0.000000  $0.000000  $0.000000\n"
		if out != want {
			t.Errorf("topup printed:\n%s\nwant:\n%s", out, want)
		}
		must(t, admin, "account", "topup", renterID, "12.50", "--idempotency-key", "k1")
		var b idlegrid.Balance
		mustJSON(t, renter, &b, "account", "balance")
		if b.AccountID != renterID || b.Available != 12_500_000 {
			t.Errorf("balance after a retried top-up = %+v, want $12.50 available", b)
		}
	})

	t.Run("Forbidden", func(t *testing.T) {
		r := run(t, renter, "account", "ls")
		if r.code != 1 || !strings.HasPrefix(r.err, "idlegrid: ") || !strings.Contains(r.err, "this needs another role") {
			t.Errorf("a renter listing accounts: %s", r)
		}
	})

	t.Run("BadKey", func(t *testing.T) {
		r := run(t, map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": "igk_wrong"}, "job", "ls")
		if r.code != 1 || !strings.Contains(r.err, "set --key or IDLEGRID_KEY to a valid API key") {
			t.Errorf("a bad key: %s", r)
		}
	})

	t.Run("Jobs", func(t *testing.T) {
		var job idlegrid.Job
		out := must(t, renter, "job", "submit", "--json", "--name", "tiny", "--image", "ghcr.io/acme/x:1", "--gpus", "2",
			"--gpu-model", "H100-80GB,A100-80GB", "--tier", "gold", "--max-price", "2.5", "--duration", "90m", "--checkpoint-every", "30m",
			"--env", "A=1", "--", "python", "-c", "print(1)")
		if err := json.Unmarshal([]byte(out), &job); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if job.State != idlegrid.JobQueued || job.GPUs != 2 || job.DurationSeconds != 5400 || job.CheckpointEverySeconds != 1800 || job.Env["A"] != "1" ||
			strings.Join(job.Command, " ") != "python -c print(1)" || strings.Join(job.GPUModels, ",") != "H100-80GB,A100-80GB" {
			t.Fatalf("submitted %+v", job)
		}
		ls := must(t, renter, "job", "ls")
		if !regexp.MustCompile(`(?m)^ID +NAME +STATE +TIER +GPUS +CAP +CHARGED +AGE +REASON\n` + job.ID + ` +tiny +queued +gold +1x2 +\$2\.500000/GPU-h +\$0\.000000 +\d+s +`).MatchString(ls) {
			t.Errorf("job ls printed:\n%s", ls)
		}
		if get := must(t, renter, "job", "get", job.ID); !strings.Contains(get, "Max price   $2.500000/GPU-h\n") || !strings.Contains(get, "Command     python -c print(1)\n") ||
			!strings.Contains(get, "Checkpoint  every 30m0s\n") {
			t.Errorf("job get printed:\n%s", get)
		}
		if out := must(t, renter, "job", "explain", job.ID); !strings.Contains(out, job.ID+": ") ||
			!strings.Contains(out, "0 online nodes") || !strings.Contains(out, "estimated start: unknown") {
			t.Errorf("job explain printed:\n%s", out)
		}
		var x struct {
			JobID string `json:"job_id"`
		}
		if mustJSON(t, renter, &x, "job", "explain", job.ID, "--json"); x.JobID != job.ID {
			t.Errorf("job explain --json gave job %q, want %q", x.JobID, job.ID)
		}
		if out := must(t, renter, "market"); !strings.HasPrefix(out, "MODEL ") {
			t.Errorf("market printed:\n%s", out)
		}
		var stats []any
		if mustJSON(t, renter, &stats, "market", "--json"); len(stats) != 0 {
			t.Errorf("market --json on an empty market = %v, want []", stats)
		}
		if out := must(t, renter, "job", "logs", job.ID); out != "" {
			t.Errorf("logs of an unplaced job printed %q", out)
		}
		if out := must(t, renter, "job", "cancel", job.ID); !strings.HasPrefix(out, job.ID+": cancelled") {
			t.Errorf("job cancel printed %q", out)
		}
		var jobs []*idlegrid.Job
		mustJSON(t, renter, &jobs, "job", "ls", "--state", "queued")
		if len(jobs) != 0 {
			t.Errorf("queued jobs after cancel: %d", len(jobs))
		}
		r := run(t, renter, "job", "get", "job_nosuch")
		if r.code != 1 || !strings.Contains(r.err, "check the ID") {
			t.Errorf("job get of a missing job: %s", r)
		}
		// Bronze that cannot resume is told what it gives up; bronze that checkpoints is not.
		for _, every := range []string{"", "20m"} {
			args := []string{"job", "submit", "--image", "ghcr.io/acme/x:1", "--tier", "bronze", "--max-price", "0.4", "--duration", "1h"}
			if every != "" {
				args = append(args, "--checkpoint-every", every)
			}
			out := must(t, renter, args...)
			if hinted := strings.Contains(out, "say how often with --checkpoint-every"); hinted != (every == "") {
				t.Errorf("job submit %v printed:\n%s", args, out)
			}
			must(t, renter, "job", "cancel", regexp.MustCompile(`job_\w+`).FindString(out))
		}
	})

	t.Run("KeysAndTokens", func(t *testing.T) {
		var k createdKey
		mustJSON(t, renter, &k, "key", "create", "--name", "laptop")
		if !strings.HasPrefix(k.Secret, k.Key.Prefix) {
			t.Errorf("key secret %q does not start with its prefix %q", k.Secret, k.Key.Prefix)
		}
		if ls := must(t, renter, "key", "ls"); !strings.Contains(ls, k.Key.ID+"  laptop") {
			t.Errorf("key ls printed:\n%s", ls)
		}
		if out := must(t, renter, "key", "revoke", k.Key.ID); out != "revoked API key "+k.Key.ID+"\n" { // not the key in use: no question
			t.Errorf("key revoke printed %q", out)
		}
		r := run(t, map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": k.Secret}, "account", "balance")
		if r.code != 1 {
			t.Errorf("a revoked key still works: %s", r)
		}

		var provider createdAccount
		mustJSON(t, admin, &provider, "account", "create", "--name", "garage", "--role", "provider")
		prov := map[string]string{"IDLEGRID_ADDR": url, "IDLEGRID_KEY": provider.Secret}
		out := must(t, prov, "token", "create", "--name", "rack-3", "--max-uses", "2", "--ttl", "1h")
		m := regexp.MustCompile(`^created join token (\S+) \(rack-3\), valid until \S+\nsecret \(shown once\): (igj_\w+)\non the new node: idlegrid agent --config agent.yaml --join-token igj_\w+\n$`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("token create printed:\n%s", out)
		}
		if ls := must(t, prov, "token", "ls"); !regexp.MustCompile(m[1] + ` +rack-3 +\S+… +0/2 +\S+ +usable`).MatchString(ls) {
			t.Errorf("token ls printed:\n%s", ls)
		}
		must(t, prov, "token", "revoke", m[1])
		if ls := must(t, prov, "token", "ls"); !strings.Contains(ls, "revoked") {
			t.Errorf("token ls after revoke printed:\n%s", ls)
		}
		var nodes []*idlegrid.Node
		mustJSON(t, prov, &nodes, "node", "ls")
		if nodes == nil || len(nodes) != 0 {
			t.Errorf("node ls --json = %v, want []", nodes)
		}
	})

	t.Run("Transfers", func(t *testing.T) {
		out := must(t, admin, "account", "transfers", renterID)
		if !regexp.MustCompile(`(?m)^ID +KIND +AT +LEASE +ENTRIES\n\S+ +topup +\S+ +- +`).MatchString(out) || !strings.Contains(out, "renter:"+renterID+":available $12.500000") {
			t.Errorf("transfers printed:\n%s", out)
		}
	})
}

func TestServerFee(t *testing.T) {
	for _, tt := range []struct{ flag, want int64 }{{0, -1}, {1, 1}, {1000, 1000}, {10_000, 10_000}} {
		if got := serverFee(tt.flag); got != tt.want {
			t.Errorf("serverFee(%d) = %d, want %d", tt.flag, got, tt.want)
		}
	}
}

// TestServerPayoutHold: "--payout-hold 0" is documented as no hold, which
// server.Config spells negative; its zero is the 72h default.
func TestServerPayoutHold(t *testing.T) {
	for _, tt := range []struct{ flag, want time.Duration }{{0, -1}, {time.Minute, time.Minute}, {72 * time.Hour, 72 * time.Hour}} {
		if got := serverPayoutHold(tt.flag); got != tt.want {
			t.Errorf("serverPayoutHold(%s) = %s, want %s", tt.flag, got, tt.want)
		}
	}
}
