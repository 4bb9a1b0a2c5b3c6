package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/cli"
)

// update rewrites docs/img/dashboard.png from the renter's view.
var update = flag.Bool("update", false, "rewrite docs/img/dashboard.png")

// Bounds of the waits on the running market: a condition is polled until it
// holds, up to waitLimit, and the test fails with what the page showed.
const waitLimit = 90 * time.Second

// chromium finds a headless-capable Chromium or Chrome. Under CI (CI=true)
// a missing browser fails the test, because .ci/run installs it; elsewhere
// the test skips and says how to get one.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("IDLEGRID_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium binary found, and CI=true: .ci/run should have installed Debian's chromium package")
	}
	t.Skip("no chromium binary found (looked for chromium, chromium-browser, google-chrome, headless-shell); " +
		"install one (apt-get install chromium) or set IDLEGRID_CHROMIUM to run the browser tests")
	return ""
}

// syncBuffer is a bytes.Buffer that the running market writes while the
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

// devMarket is "idlegrid dev" running in this process, and the keys it wrote.
type devMarket struct {
	URL, AdminKey, RenterKey, ProviderKey string
	// OtherProvider and OtherProviderKey are a second provider's name and
	// key.
	OtherProvider, OtherProviderKey string
}

// mustDevMarket runs "idlegrid dev" on a free port until the test ends.
func mustDevMarket(t *testing.T) *devMarket {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- cli.Main(ctx, []string{"dev", "--addr", "127.0.0.1:0", "--data", dir, "--speed", "30", "--jobs-per-minute", "6"},
			cli.Stdio{Out: &out, Err: &errOut}, func(string) string { return "" })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case c := <-code:
			if c != 0 {
				t.Errorf("idlegrid dev exited %d:\n%s", c, errOut.String())
			}
		case <-time.After(waitLimit):
			t.Errorf("idlegrid dev did not stop within %s", waitLimit)
		}
	})
	apiLine := regexp.MustCompile(`(?m)^  API +(http://127\.0\.0\.1:\d+)$`)
	var m devMarket
	eventually(t, "idlegrid dev prints its address", func() error {
		if s := apiLine.FindStringSubmatch(out.String()); s != nil {
			m.URL = s[1]
			return nil
		}
		select {
		case c := <-code:
			code <- c
			t.Fatalf("idlegrid dev exited %d before serving:\n%s", c, errOut.String())
		default:
		}
		return fmt.Errorf("no API line in:\n%s", out.String())
	})
	m.AdminKey = mustRead(t, filepath.Join(dir, "admin.key"))
	m.RenterKey = mustRead(t, filepath.Join(dir, "renter.key"))
	var state struct {
		Providers map[string]struct{ Key string } `json:"providers"`
	}
	if err := json.Unmarshal([]byte(mustRead(t, filepath.Join(dir, "dev.json"))), &state); err != nil {
		t.Fatal(err)
	}
	m.ProviderKey = state.Providers["fjord-compute"].Key
	if m.ProviderKey == "" {
		t.Fatalf("dev.json has no key for the provider fjord-compute: %+v", state)
	}
	for _, name := range slices.Sorted(maps.Keys(state.Providers)) {
		if name != "fjord-compute" {
			m.OtherProvider, m.OtherProviderKey = name, state.Providers[name].Key
			break
		}
	}
	if m.OtherProviderKey == "" {
		t.Fatalf("dev.json has no provider but fjord-compute: %+v", state)
	}
	return &m
}

func mustRead(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// eventually polls check until it returns nil, failing with its last error
// after waitLimit.
// chat calls the dev market's demo model through the gateway.
func chat(url, key string) error {
	body := `{"model":"sim-8b-instruct","messages":[{"role":"user","content":"Hello"}],"max_tokens":4}`
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, answer)
	}
	return nil
}

// checkpointedJob waits for a job among the renter's 30 newest, those the
// jobs panel lists, with a lease that reported a checkpoint, and returns its ID.
func checkpointedJob(t *testing.T, c *client.Client) string {
	t.Helper()
	var id string
	eventually(t, "a demo job's lease reports a checkpoint", func() error {
		jobs, err := c.ListJobs(context.Background(), idlegrid.JobFilter{Limit: 100})
		if err != nil {
			return err
		}
		slices.SortFunc(jobs, func(a, b *idlegrid.Job) int { return b.CreatedAt.Compare(a.CreatedAt) })
		for _, j := range jobs[:min(len(jobs), 30)] {
			ls, err := c.ListLeases(context.Background(), idlegrid.LeaseFilter{JobID: j.ID})
			if err != nil {
				return err
			}
			for _, l := range ls {
				if l.CheckpointAt != nil {
					id = j.ID
					return nil
				}
			}
		}
		return errors.New("no lease of the 30 newest jobs has reported a checkpoint yet")
	})
	return id
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, waitLimit, err)
		}
		<-tick.C
	}
}

// browser is one headless Chromium tab on the dashboard.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string // where screenshots go
}

func mustBrowser(t *testing.T, url string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1000), chromedp.Flag("lang", "en-US"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelTab)
	// The whole walk takes well under a minute on an idle machine; the
	// bound is for a loaded CI runner under -race, below go test's 10m.
	ctx, cancelTime := context.WithTimeout(ctx, 8*time.Minute)
	t.Cleanup(cancelTime)
	shots := os.Getenv("IDLEGRID_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	b := &browser{t: t, ctx: ctx, shots: shots}
	b.run("open the dashboard", chromedp.Navigate(url+"/?refresh_ms=1000"), chromedp.WaitVisible(chromedp.ID("key")))
	return b
}

func (b *browser) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v\npage:\n%s", what, err, b.text("body"))
	}
}

// eval evaluates js in the page.
func eval[T any](b *browser, what, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// waitText waits until the element sel shows want, or one of the others.
func (b *browser) waitText(sel, want string, others ...string) {
	b.t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && %s.some((w) => e.innerText.includes(w)); })()`,
		jsString(sel), jsStrings(append([]string{want}, others...)))
	if err := b.until(js); err != nil {
		b.t.Fatalf("%s does not show %q: %v\nit shows:\n%s", sel, want, err, b.text(sel))
	}
}

func (b *browser) text(sel string) string {
	s, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](
		fmt.Sprintf(`(document.querySelector(%s) || {innerText: "(missing)"}).innerText`, jsString(sel))))
	return s
}

func jsStrings(s []string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", path)
}

// signIn signs in with the keyboard only: type the key, press Enter.
func (b *browser) signIn(key, wantWho string) {
	b.t.Helper()
	b.run("sign in", chromedp.WaitVisible(chromedp.ID("key")), chromedp.Focus(chromedp.ID("key")),
		chromedp.SendKeys(chromedp.ID("key"), key+"\r"))
	b.waitText("#who-name", wantWho)
}

func (b *browser) signOut() {
	b.t.Helper()
	b.run("sign out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("key")))
}

// slowRequests delays every request the page makes by 400 ms, counting
// those in flight (window.pending) and when the last began or ended
// (window.lastFetch), until window.restoreFetch() is called.
const slowRequests = `(() => {
	const orig = window.fetch;
	window.restoreFetch = () => { window.fetch = orig; };
	window.pending = 0; window.lastFetch = Date.now();
	window.fetch = async (...args) => {
		window.pending++; window.lastFetch = Date.now();
		try { await new Promise((r) => setTimeout(r, 400)); return await orig(...args); }
		finally { window.pending--; window.lastFetch = Date.now(); }
	};
	return true;
})()`

// requestsDone is true once the page has had no request in flight for a
// second.
const requestsDone = `window.pending === 0 && Date.now() - window.lastFetch > 1000`

// switchWhileLoading signs out and in with key, whose account is who, while
// the panels' requests are slowed down and in flight, and checks that the
// page never shows hidden, something only the account before may see: a
// panel that was loading for that account must not draw into the next
// one's view (of the same role, so the same panels).
func (b *browser) switchWhileLoading(key, who, hidden string) {
	b.t.Helper()
	eval[bool](b, "slow the requests down", slowRequests)
	b.poll("a refresh in flight", `window.pending > 0`)
	b.signOut()
	// Watched from the sign-out on, and only while the page names the
	// next account: before, the view is the last account's own.
	eval[bool](b, "watch the view", fmt.Sprintf(`(() => {
		window.leaked = "";
		window.leakWatch = new MutationObserver(() => {
			const v = document.getElementById("view");
			if (document.getElementById("who-name").innerText === %[1]s && v.innerText.includes(%[2]s)) window.leaked = v.innerText;
		});
		window.leakWatch.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
		return true;
	})()`, jsString(who), jsString(hidden)))
	b.signIn(key, who)
	// The next account's panels refresh on; only the requests slowed so
	// far are waited for (the counters stay with the slow fetch), and then
	// a second for the old panels to finish with unslowed ones.
	eval[bool](b, "restore the requests", `(window.restoreFetch(), true)`)
	b.poll("the old panels' requests to end", requestsDone)
	if leaked := eval[string](b, "read what the view showed", `(window.leakWatch.disconnect(), window.leaked)`); leaked != "" {
		b.t.Errorf("signed in as %s, the view showed %q, which only the account before may see:\n%s", who, hidden, leaked)
	}
}

// signOutWhileLoading signs out while the panels' requests are slowed down
// and in flight, starts typing the next key, and checks that nothing the
// old panels asked for afterwards signed the next user out again (which
// cleared the half-typed key in CI).
func (b *browser) signOutWhileLoading() {
	b.t.Helper()
	eval[bool](b, "slow the requests down", slowRequests)
	b.poll("a refresh in flight", `window.pending > 0`)
	b.signOut()
	const typing = "igk_half_typed"
	b.run("start typing a key", chromedp.SendKeys(chromedp.ID("key"), typing))
	b.poll("the old panels' requests to end", requestsDone)
	if got := eval[string](b, "read the key", `document.getElementById("key").value`); got != typing {
		b.t.Errorf("the key being typed reads %q after the old panels finished loading, want %q", got, typing)
	}
	if got := b.text("#signin-error"); got != "Signed out." {
		b.t.Errorf("the sign-in form says %q after the old panels finished loading, want %q", got, "Signed out.")
	}
	eval[bool](b, "restore the requests", `(window.restoreFetch(), document.getElementById("key").value = "") === ""`)
}

// poll waits until the expression js is true in the page.
func (b *browser) poll(what, js string) {
	b.t.Helper()
	if err := b.until(js); err != nil {
		b.t.Fatalf("wait for %s: %v", what, err)
	}
}

// until waits up to waitLimit for the expression js to be true in the page.
func (b *browser) until(js string) error {
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(waitLimit)))
	return err
}

// within waits up to d for the expression js to be true in the page: for
// what must happen sooner than the page's refresh would make it.
func (b *browser) within(what string, d time.Duration, js string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(d))); err != nil {
		b.t.Fatalf("%s: not within %s: %v\njob details:\n%s", what, d, err, b.text("#panel-job"))
	}
}

// chooseJob clicks the job in the jobs panel, from the page's own script
// (see the renter's test for why).
func (b *browser) chooseJob(id string) {
	b.t.Helper()
	b.poll("choose job "+id, fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (e) e.click(); return !!e; })()`,
		jsString(`#panel-jobs button[data-action=job][data-id="`+id+`"]`)))
}

// countWatches counts the page's requests to the jobs' watch
// (GET /v1/jobs/{id}/watch), by job: window.watchAsks, those made,
// window.watchTimes, when, and window.watching, those not answered yet; and
// the page's reads of a job (window.jobReads). While window.watchAnswer is
// set, the page meets a server other than this one: 404 answers the watch
// as an older server does, "no such endpoint"; 503, a server failing.
const countWatches = `(() => {
	const orig = window.fetch;
	window.restoreFetch = () => { window.fetch = orig; };
	window.watchAsks = {}; window.watchTimes = {}; window.watching = {}; window.jobReads = {}; window.watchAnswer = 0;
	window.fetch = (url, init) => {
		const read = /^\/v1\/jobs\/([^/?]+)$/.exec(String(url));
		if (read) window.jobReads[read[1]] = (window.jobReads[read[1]] || 0) + 1;
		const m = /^\/v1\/jobs\/([^/?]+)\/watch/.exec(String(url));
		if (!m) return orig(url, init);
		const job = m[1];
		window.watchAsks[job] = (window.watchAsks[job] || 0) + 1;
		(window.watchTimes[job] = window.watchTimes[job] || []).push(Date.now());
		if (window.watchAnswer) return Promise.resolve(new Response(JSON.stringify({ error: {
			code: { 404: 'not_found', 429: 'too_many' }[window.watchAnswer] || 'unavailable',
			message: window.watchAnswer === 404 ? 'no such endpoint: GET ' + url : 'try again later' } }),
			{ status: window.watchAnswer, headers: Object.assign({ 'Content-Type': 'application/json' },
				window.watchAnswer === 429 ? { 'Retry-After': '3' } : {}) }));
		window.watching[job] = (window.watching[job] || 0) + 1;
		const done = () => { window.watching[job]--; };
		const p = orig(url, init);
		p.then(done, done);
		return p;
	};
	return true;
})()`

// checkAccessible fails on inputs without a label and on horizontal
// scrolling of the whole page.
func (b *browser) checkAccessible(where string) {
	b.t.Helper()
	unlabelled := eval[[]string](b, "check labels", `[...document.querySelectorAll('input, select, textarea')]
		.filter((e) => e.offsetParent !== null && !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))
		.map((e) => e.id || e.name || e.outerHTML.slice(0, 60))`)
	if len(unlabelled) > 0 {
		b.t.Errorf("%s: inputs without a label: %v", where, unlabelled)
	}
	if eval[bool](b, "check width", `document.documentElement.scrollWidth > window.innerWidth + 1`) {
		b.t.Errorf("%s: the page scrolls sideways", where)
	}
}

// money is how the dashboard writes micros below $1,000: exactly, six
// decimals less trailing zeros down to cents ($1.234567, $0.001999, $3.00).
func money(m idlegrid.Micros) string {
	s := fmt.Sprintf("$%d.%06d", m/idlegrid.MicrosPerUnit, m%idlegrid.MicrosPerUnit)
	for len(s)-strings.IndexByte(s, '.') > 3 && strings.HasSuffix(s, "0") {
		s = s[:len(s)-1]
	}
	return s
}

// TestDashboard drives the dashboard in headless Chromium against a whole
// demo market: a renter signs in, submits a job from the form, watches it
// run and sees its charge; a provider edits a node's windows and sees a
// dispute against its bond; the operator sees the system's health and
// upholds that dispute from the keyboard; each role sees only its views.
func TestDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a whole market and a browser; skipped with -short")
	}
	chromium(t) // skip before starting a market for nothing
	m := mustDevMarket(t)
	b := mustBrowser(t, m.URL)
	ctx := context.Background()

	t.Run("a wrong key is refused", func(t *testing.T) {
		b.t = t // report in the subtest
		b.run("type a wrong key", chromedp.SendKeys(chromedp.ID("key"), "igk_wrong\r"))
		b.waitText("#signin-error", "invalid or revoked API key")
		eval[bool](b, "clear the key", `(document.getElementById("key").value = "") === ""`)
		b.checkAccessible("sign-in")
		b.screenshot("signin")
	})

	var jobID string
	t.Run("renter", func(t *testing.T) {
		b.t = t // report in the subtest
		// A job sure to save checkpoints, for the Saved column below: the
		// demo's own checkpointing jobs are a chance draw, and at this
		// speed may end before their first one is reported. 20 minutes
		// with one every minute is 40 s with one every 2 s here.
		if _, err := client.New(m.URL, m.RenterKey).SubmitJob(ctx, idlegrid.JobSpec{Name: "checkpointing-sweep", Kind: idlegrid.KindSweep,
			Image: "ghcr.io/acme/sweep:2", GPUs: 1, Nodes: 1, Tier: idlegrid.TierBronze, Interruptible: true,
			MaxPriceMicrosPerGPUHour: idlegrid.MicrosPerUnit, DurationSeconds: 1200, CheckpointEverySeconds: 60}); err != nil {
			t.Fatal(err)
		}
		b.signIn(m.RenterKey, "demo-renter (renter)")
		b.waitText("#nav", "Renter")
		if nav := b.text("#nav"); strings.Contains(nav, "Provider") || strings.Contains(nav, "Operator") {
			t.Errorf("a renter's views are %q, want Renter and Market only", nav)
		}
		b.waitText("#panel-spend", "Available")
		// A spec wrong in three fields: all are said and marked at once.
		b.run("submit a job with no GPUs, no duration and a past deadline",
			chromedp.SetValue(chromedp.ID("j-gpus"), "0"),
			chromedp.SetValue(chromedp.ID("j-duration"), "0"),
			chromedp.SetValue(chromedp.ID("j-deadline"), "2020-01-01T00:00"),
			chromedp.Click(chromedp.CSS(`#submit-form button[type=submit]`)))
		// The duration is said in the form's minutes, not the API's seconds.
		b.waitText("#submit-error", "Duration: write minutes, more than 0 and at most 43,200 (30 days).")
		if msg := b.text("#submit-error"); !strings.Contains(msg, "job.gpus: must be between 1 and 16") ||
			!strings.Contains(msg, "job.deadline: must be in the future") {
			t.Errorf("submit error = %q, want the GPUs' and the deadline's problems too", msg)
		}
		if got := eval[string](b, "read the inputs marked", `[...document.querySelectorAll('#submit-form [aria-invalid=true]')].map((e) => e.id).join(',')`); got != "j-gpus,j-duration,j-deadline" {
			t.Errorf("inputs marked invalid = %q, want j-gpus,j-duration,j-deadline", got)
		}
		b.run("fill the job form",
			chromedp.SetValue(chromedp.ID("j-deadline"), ""),
			chromedp.SetValue(chromedp.ID("j-gpus"), "1"),
			chromedp.SetValue(chromedp.ID("j-name"), "browser-job"),
			chromedp.SetValue(chromedp.ID("j-image"), "python:3.12"),
			chromedp.SetValue(chromedp.ID("j-price"), "9.50"),
			chromedp.SetValue(chromedp.ID("j-duration"), "1"),
			chromedp.SetValue(chromedp.ID("j-checkpoint"), "10"),
			chromedp.Click(chromedp.CSS(`#submit-form button[type=submit]`)))
		b.waitText("#toast", "Submitted job_")
		if n := eval[int](b, "count the inputs marked", `document.querySelectorAll('#submit-form [aria-invalid]').length`); n != 0 {
			t.Errorf("%d inputs still marked invalid after a submission that was taken", n)
		}
		jobID = regexp.MustCompile(`job_[a-z0-9]+`).FindString(b.text("#toast"))
		b.waitText("#panel-jobs", "browser-job")
		b.waitText("#panel-job", jobID)
		b.waitText("#panel-job", "running")
		b.screenshot("renter-running")
		b.waitText("#panel-job", "succeeded")

		job, err := client.New(m.URL, m.RenterKey).FindJob(ctx, jobID)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != idlegrid.JobSucceeded || job.ChargedMicros <= 0 || job.CheckpointEverySeconds != 600 {
			t.Fatalf("job %s is %s charged %d, checkpoints every %ds; want succeeded with a charge, every 600s",
				jobID, job.State, job.ChargedMicros, job.CheckpointEverySeconds)
		}
		b.waitText("#panel-job", money(job.ChargedMicros))
		// Its lease names the node as its owner does, read as the market
		// shows it.
		leases, err := client.New(m.URL, m.RenterKey).ListLeases(ctx, idlegrid.LeaseFilter{JobID: jobID})
		if err != nil || len(leases) == 0 {
			t.Fatalf("the job's leases: %v, %v", leases, err)
		}
		ran, err := client.New(m.URL, m.RenterKey).FindNode(ctx, leases[0].NodeID)
		if err != nil || ran.Name == "" {
			t.Fatalf("the renter reads node %s: %+v, %v", leases[0].NodeID, ran, err)
		}
		b.waitText("#panel-job table", ran.Name)
		// A lease's last checkpoint shows beside it: the checkpointing
		// sweep's, or a bronze demo job's.
		saved := checkpointedJob(t, client.New(m.URL, m.RenterKey))
		// Clicked from the page's own script: the jobs panel is redrawn
		// every refresh, and a node chromedp found could be gone before
		// its click landed.
		open := fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (e) e.click(); return !!e; })()`,
			jsString(`#panel-jobs button[data-action=job][data-id="`+saved+`"]`))
		eventually(t, "open the job that checkpointed", func() error {
			if !eval[bool](b, "click the job", open) {
				return errors.New("the jobs panel does not list it yet")
			}
			return nil
		})
		b.waitText("#panel-job", saved)
		if n := eval[int](b, "read the Saved column", `(() => {
			const t = document.querySelector('#panel-job table');
			const i = [...t.querySelectorAll('thead th')].map((h) => h.innerText.trim()).indexOf('Saved');
			return i < 0 ? -1 : [...t.querySelectorAll('tbody tr')].filter((r) => r.children[i].querySelector('time')).length;
		})()`); n < 1 {
			t.Errorf("job %s's leases show %d checkpoint times in a Saved column (-1: no such column), want at least 1", saved, n)
		}
		// The nodes on offer, searched: the fleet's RTX4090s and no H100;
		// a region written wrong is said by the form.
		b.waitText("#panel-offers table", "nb-h100-01")
		b.waitText("#panel-offers thead", "Free now")
		b.waitText("#panel-offers thead", "Level")
		// The dev fleet's nodes are newcomers, at level 0: none is on
		// offer to a job that asks level 1.
		b.run("search the nodes at trust level 1 or above",
			chromedp.SetValue(chromedp.ID("o-level"), "1"),
			chromedp.Click(chromedp.CSS(`#offers-form button[type=submit]`)))
		b.waitText("#panel-offers", "No node on offer matches.")
		b.run("search a trust level past the most",
			chromedp.SetValue(chromedp.ID("o-level"), "17"),
			chromedp.Click(chromedp.CSS(`#offers-form button[type=submit]`)))
		b.waitText("#offers-error", "min_level: must be an integer between 1 and 16")
		b.run("search any trust level again",
			chromedp.SetValue(chromedp.ID("o-level"), ""),
			chromedp.Click(chromedp.CSS(`#offers-form button[type=submit]`)))
		b.waitText("#panel-offers table", "nb-h100-01")
		b.run("search the nodes on offer for RTX4090s",
			chromedp.SetValue(chromedp.ID("o-models"), "RTX4090"),
			chromedp.Click(chromedp.CSS(`#offers-form button[type=submit]`)))
		b.poll("the search to show only RTX4090s", `(() => {
			const t = document.querySelector('#panel-offers table');
			return !!t && t.innerText.includes('ml-4090-01') && !t.innerText.includes('nb-h100-01');
		})()`)
		b.run("search a region written wrong",
			chromedp.SetValue(chromedp.ID("o-regions"), "EU-West"),
			chromedp.Click(chromedp.CSS(`#offers-form button[type=submit]`)))
		b.waitText("#offers-error", `"EU-West" is not a region`)
		b.run("search with a price written wrong",
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#o-regions').value = document.querySelector('#o-models').value = ''`),
			chromedp.SetValue(chromedp.ID("o-price"), "cheap"),
			chromedp.Click(chromedp.CSS(`#offers-form button[type=submit]`)))
		b.waitText("#offers-error", "Max price: write dollars per GPU-hour")
		b.run("search the cheapest first, under $5 a GPU-hour",
			chromedp.SetValue(chromedp.ID("o-price"), "5"), chromedp.SetValue(chromedp.ID("o-sort"), "price"),
			chromedp.Click(chromedp.CSS(`#offers-form button[type=submit]`)))
		b.poll("the offers to be listed cheapest first", `(() => {
			const t = document.querySelector('#panel-offers table');
			if (!t || document.querySelector('#offers-error').textContent) return false;
			const i = [...t.querySelectorAll('thead th')].map((h) => h.innerText.trim()).indexOf('Silver ask');
			const asks = [...t.querySelectorAll('tbody tr')].map((r) => Number(r.children[i].innerText.replace(/[^0-9.]/g, '')));
			return asks.length > 2 && asks.every((a, k) => k === 0 || asks[k - 1] <= a) && asks[0] < asks[asks.length - 1];
		})()`)
		b.run("search more free GPUs than a node has",
			chromedp.SetValue(chromedp.ID("o-free"), "65"),
			chromedp.Click(chromedp.CSS(`#offers-form button[type=submit]`)))
		b.waitText("#offers-error", "min_free_gpus: must be an integer between 1 and 64")
		b.run("search the nodes with a GPU free now",
			chromedp.SetValue(chromedp.ID("o-free"), "1"),
			chromedp.Click(chromedp.CSS(`#offers-form button[type=submit]`)))
		b.poll("the offers to show only nodes with a GPU free", `(() => {
			const t = document.querySelector('#panel-offers table');
			if (!t || document.querySelector('#offers-error').textContent) return false;
			const i = [...t.querySelectorAll('thead th')].map((h) => h.innerText.trim()).indexOf('Free now');
			const free = [...t.querySelectorAll('tbody tr')].map((r) => Number(r.children[i].innerText));
			return free.length > 0 && free.every((n) => n >= 1);
		})()`)
		// The demo renter calls the demo model every 15 s or so; one call
		// of our own makes sure there is one (before the key's routing
		// below confines it to a region where no node serves the model).
		eventually(t, "the demo model answers through the gateway", func() error { return chat(m.URL, m.RenterKey) })
		b.waitText("#panel-inference", "sim-8b-instruct")
		if head := b.text("#panel-inference thead"); !strings.Contains(head, "Latency p50 / p95") || !strings.Contains(head, "Tokens/s p50") {
			t.Errorf("the inference panel's columns are %q, want latency p50 / p95 and tokens/s", head)
		}
		// idlegrid dev keeps the gateway's default bounds on what a
		// renter's conversations hold.
		if held := b.text("#panel-inference"); !strings.Contains(held, "items of 1,000,000 and") || !strings.Contains(held, "characters of 1,073,741,824;") {
			t.Errorf("the inference panel says %q, want what the renter's conversations hold of 1,000,000 items", held)
		}
		b.waitText("#panel-routing", "defaults")
		// A key's routing defaults for the inference gateway: as set, in
		// the form once the key is chosen; set by the form, a region
		// written wrong said and marked; then removed.
		rc := client.New(m.URL, m.RenterKey)
		keys, err := rc.ListAPIKeys(ctx, "")
		if err != nil || len(keys) == 0 {
			t.Fatalf("the renter's keys: %v, %v", keys, err)
		}
		key := keys[0].ID
		if _, err := rc.SetKeyRouting(ctx, key, idlegrid.Routing{Sort: idlegrid.RoutingSortLatency, Region: []string{"eu-west"}}); err != nil {
			t.Fatal(err)
		}
		b.waitText("#panel-routing", "sort by latency · region eu-west")
		b.poll("the key to be offered", fmt.Sprintf(`!!document.querySelector('#rt-key option[value=%s]')`, jsString(key)))
		b.run("choose the key", chromedp.SetValue(chromedp.ID("rt-key"), key),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#rt-key').dispatchEvent(new Event('change'))`))
		if got := eval[string](b, "read the form", `document.querySelector('#rt-sort').value + ' ' + document.querySelector('#rt-region').value`); got != "latency eu-west" {
			t.Errorf("the form shows the key's routing as %q, want latency eu-west", got)
		}
		b.run("save a region written wrong",
			chromedp.SetValue(chromedp.ID("rt-region"), "eu-west, EU West"),
			chromedp.Click(chromedp.CSS(`#routing-form button[type=submit]`)))
		b.waitText("#routing-error", `"EU West" is not a region`)
		if got := eval[string](b, "read the inputs marked", `[...document.querySelectorAll('#routing-form [aria-invalid=true]')].map((e) => e.id).join(',')`); got != "rt-region" {
			t.Errorf("inputs marked invalid = %q, want rt-region", got)
		}
		b.run("save two regions, a price cap and no failover",
			chromedp.SetValue(chromedp.ID("rt-region"), "eu-west, us-east"),
			chromedp.SetValue(chromedp.ID("rt-in"), "$1.50"),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('#rt-fallbacks').checked = false`),
			chromedp.Click(chromedp.CSS(`#routing-form button[type=submit]`)))
		b.waitText("#toast", "Routing saved")
		b.waitText("#panel-routing", "sort by latency · region eu-west, us-east · max $1.500000 in / $— out per 1M tokens · no failover")
		got, err := rc.KeyRouting(ctx, key)
		if r := got.Routing; err != nil || r.Sort != idlegrid.RoutingSortLatency || strings.Join(r.Region, ",") != "eu-west,us-east" ||
			r.MaxPrice == nil || r.MaxPrice.Prompt == nil || *r.MaxPrice.Prompt != 1_500_000 || r.MaxPrice.Completion != nil ||
			r.AllowFallbacks == nil || *r.AllowFallbacks || r.Sticky != nil {
			t.Errorf("the key's routing after the form: %+v, %v", got, err)
		}
		b.run("remove the routing", chromedp.Click(chromedp.ID("rt-remove")))
		b.waitText("#toast", "Routing removed")
		b.poll("the key to route by the defaults", fmt.Sprintf(`(() => {
			const t = document.querySelector('#panel-routing table');
			return !!t && [...t.querySelectorAll('tbody tr')].some((r) => r.innerText.includes(%s) && r.innerText.includes('defaults'));
		})()`, jsString(keys[0].Prefix)))
		// A registry login: a registry written wrong is said and marked; a
		// good one is listed, its password never shown again, and removed
		// from its row after a confirmation.
		b.waitText("#panel-registries", "No registry logins")
		const token = "ghp_browser-token-never-shown"
		b.run("save a login to a registry written wrong",
			chromedp.SetValue(chromedp.ID("r-registry"), "acme"),
			chromedp.SetValue(chromedp.ID("r-user"), "acme-bot"),
			chromedp.SetValue(chromedp.ID("r-password"), token),
			chromedp.Click(chromedp.CSS(`#registry-form button[type=submit]`)))
		b.waitText("#registry-error", "registry: must be a registry host")
		if got := eval[string](b, "read the inputs marked", `[...document.querySelectorAll('#registry-form [aria-invalid=true]')].map((e) => e.id).join(',')`); got != "r-registry" {
			t.Errorf("inputs marked invalid = %q, want r-registry", got)
		}
		b.run("save a login to ghcr.io",
			chromedp.SetValue(chromedp.ID("r-registry"), "https://ghcr.io/"),
			chromedp.Click(chromedp.CSS(`#registry-form button[type=submit]`)))
		b.waitText("#toast", "Login to ghcr.io saved")
		b.waitText("#panel-registries table", "ghcr.io", "acme-bot")
		if page := eval[string](b, "read the page", `document.documentElement.outerHTML + [...document.querySelectorAll('input')].map((e) => e.value).join(' ')`); strings.Contains(page, token) {
			t.Error("the page still holds the registry password after it was saved")
		}
		if logins, err := client.New(m.URL, m.RenterKey).ListRegistryLogins(ctx, ""); err != nil || len(logins) != 1 || logins[0].Username != "acme-bot" {
			t.Errorf("the renter's logins after the form: %+v, %v", logins, err)
		}
		if !eval[bool](b, "click Remove", `(() => { const e = document.querySelector('#panel-registries button[data-action=logout][data-id="ghcr.io"]'); if (e) e.click(); return !!e; })()`) {
			t.Fatal("no Remove button for the ghcr.io login")
		}
		b.run("wait for the confirmation", chromedp.WaitVisible(chromedp.ID("confirm-ok")))
		b.run("confirm", chromedp.Click(chromedp.ID("confirm-ok")))
		b.waitText("#result-registries", "Login removed")
		b.waitText("#panel-registries", "No registry logins")
		// A panel shows what the server has, or says honestly that it has not.
		b.waitText("#panel-verifications", "No verifications yet", "Re-run")
		b.checkAccessible("renter")
		b.screenshot("renter")
		if *update { // the README's picture: the jobs, the job's charge and its logs
			b.run("scroll to the jobs", chromedp.Evaluate[chromedp.Void](`document.getElementById("toast").className = "toast";
				window.scrollTo(0, document.getElementById("panel-jobs").offsetTop - document.querySelector("header").offsetHeight - 8)`))
			png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join("..", "..", "docs", "img", "dashboard.png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})

	// The renter complains about the lease of the job it ran, from the
	// job's details: a complaint without evidence is not sent, one claiming
	// more harm than the lease cost is refused as the server says, and the
	// one opened, under the dialog's Idempotency-Key, is listed in the
	// renter's complaints.
	var complaintID, complainedOf string // the renter's complaint, and the provider told of it
	t.Run("renter complains", func(t *testing.T) {
		b.t = t // report in the subtest
		if jobID == "" {
			t.Skip("needs the job the renter subtest ran")
		}
		rc := client.New(m.URL, m.RenterKey)
		leases, err := rc.ListLeases(ctx, idlegrid.LeaseFilter{JobID: jobID})
		if err != nil || len(leases) == 0 {
			t.Fatalf("the job's leases: %v, %v", leases, err)
		}
		lease := leases[0]
		if ds, err := rc.ListDisputes(ctx, idlegrid.DisputeFilter{}); err == nil && len(ds) == 0 {
			b.waitText("#panel-complaints", "No complaints or disputes about your leases. To complain about a lease")
		}
		eval[bool](b, "record the complaints sent", `(() => {
			const orig = window.fetch;
			window.restoreFetch = () => { window.fetch = orig; };
			window.complaintKeys = [];
			window.fetch = (url, init) => {
				if (String(url) === '/v1/disputes' && init && init.method === 'POST') window.complaintKeys.push(init.headers['Idempotency-Key'] || '');
				return orig(url, init);
			};
			return true;
		})()`)
		b.chooseJob(jobID)
		b.poll("click Complain on lease "+lease.ID, fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (e) e.click(); return !!e; })()`,
			jsString(`#panel-job button[data-action=complain][data-id="`+lease.ID+`"]`)))
		b.run("wait for the complaint", chromedp.WaitVisible(chromedp.ID("c-evidence")))
		b.waitText("#confirm-h", "Complain about lease "+lease.ID)
		b.run("complain of a broken notice without evidence",
			chromedp.SetValue(chromedp.ID("c-offence"), "broken_notice"), chromedp.Click(chromedp.ID("confirm-ok")))
		b.waitText("#confirm-error", "Evidence: required")
		b.checkAccessible("renter, complaining")
		const evidence = "browser test: the lease stopped without its notice"
		b.run("claim more harm than the lease cost", chromedp.SendKeys(chromedp.ID("c-evidence"), evidence),
			chromedp.SetValue(chromedp.ID("c-harm"), "$1,000,000"), chromedp.Click(chromedp.ID("confirm-ok")))
		b.waitText("#confirm-error", "at most what lease "+lease.ID+" cost you")
		b.screenshot("renter-complaint")
		b.run("claim what the lease cost", chromedp.Evaluate[chromedp.Void](`document.getElementById('c-harm').value = ''`),
			chromedp.Click(chromedp.ID("confirm-ok")))
		b.waitText("#result-job", "opened: an admin decides it")
		if eval[bool](b, "is the dialog open", `document.getElementById("confirm").open`) {
			t.Error("the complaint dialog is still open after the complaint was opened")
		}
		if keys := eval[[]string](b, "read the keys", `(window.restoreFetch(), window.complaintKeys)`); len(keys) != 2 || keys[0] == "" || keys[1] != keys[0] {
			t.Errorf("complaints sent with Idempotency-Keys %q; want two (none without evidence), both with the dialog's key", keys)
		}
		id := regexp.MustCompile(`dispute_[A-Za-z0-9]+`).FindString(b.text("#result-job"))
		ds, err := rc.ListDisputes(ctx, idlegrid.DisputeFilter{LeaseID: lease.ID})
		if err != nil || len(ds) != 1 {
			t.Fatalf("the lease's disputes: %v, %v; want the complaint", ds, err)
		}
		if d := ds[0]; d.ID != id || d.Offence != "broken_notice" || d.State != idlegrid.DisputeOpen || d.Evidence != evidence ||
			d.HarmMicros != lease.ChargedMicros || d.ProviderID != lease.ProviderID {
			t.Errorf("the complaint is %+v; want %s, an open broken_notice of provider %s with the evidence typed and the lease's charge %s as its harm",
				d, id, lease.ProviderID, lease.ChargedMicros)
		}
		b.waitText("#panel-complaints", id)
		ns, err := client.New(m.URL, m.AdminKey).ListNotices(ctx, idlegrid.NoticeFilter{AccountID: lease.ProviderID})
		if err != nil || !slices.ContainsFunc(ns, func(n *idlegrid.Notice) bool { return strings.Contains(n.Message, id) }) {
			t.Errorf("the notices of the lease's provider %s: %v (%v), want one of complaint %s", lease.ProviderID, ns, err, id)
		}
		complaintID, complainedOf = id, lease.ProviderID
		if row := eval[string](b, "read the complaint's row", fmt.Sprintf(`[...document.querySelectorAll('#panel-complaints tbody tr')]
			.filter((r) => r.innerText.includes(%s)).map((r) => r.innerText).join('')`, jsString(id))); !strings.Contains(row, "broken notice") ||
			!strings.Contains(row, lease.ID) || !strings.Contains(row, "open") || !strings.Contains(row, money(lease.ChargedMicros)) {
			t.Errorf("the complaints list %s as %q; want its offence, lease, state and harm", id, row)
		}
		b.screenshot("renter-complained")
	})

	// Job details follow the chosen job with the server's watch: the page
	// is opened with a refresh far longer than the test, so only the
	// watch can show the job's changes.
	t.Run("job details follow the job", func(t *testing.T) {
		b.t = t // report in the subtest
		t.Cleanup(func() {
			if t.Failed() { // the next subtests' page: the usual refresh and no counting
				chromedp.Run(b.ctx, chromedp.Navigate(m.URL+"/?refresh_ms=1000#renter"))
			}
		})
		rc := client.New(m.URL, m.RenterKey)
		// Jobs that stay queued, their cap below every ask, until the test
		// cancels them.
		queued := func(name string) string {
			j, err := rc.SubmitJob(ctx, idlegrid.JobSpec{Name: name, Kind: idlegrid.KindEval, Image: "python:3.12", GPUs: 1, Nodes: 1,
				Tier: idlegrid.TierSilver, MaxPriceMicrosPerGPUHour: 1, DurationSeconds: 600})
			if err != nil {
				t.Fatal(err)
			}
			return j.ID
		}
		first, second := queued("watched-first"), queued("watched-second")
		b.run("reopen the dashboard refreshing every 10 minutes", chromedp.Navigate(m.URL+"/?refresh_ms=600000#renter"))
		b.waitText("#who-name", "demo-renter (renter)") // the key survives in the tab
		b.waitText("#panel-jobs", "watched-second")
		eval[bool](b, "count the watches", countWatches)
		b.chooseJob(first)
		b.waitText("#panel-job", first)
		b.waitText("#panel-job h3", "queued")
		b.within("the first job's watch to be asked", 5*time.Second, fmt.Sprintf(`window.watching[%s] === 1`, jsString(first)))
		// Choosing another job ends the first one's watch: its request is
		// aborted, it asks no more, and nothing it gets is drawn.
		b.chooseJob(second)
		b.waitText("#panel-job", second)
		b.within("the first job's watch to end and the second's to be asked", 5*time.Second, fmt.Sprintf(
			`window.watching[%s] === 0 && window.watching[%s] === 1`, jsString(first), jsString(second)))
		firstAsks := eval[int](b, "count the first job's watches", fmt.Sprintf(`window.watchAsks[%s]`, jsString(first)))
		eval[bool](b, "watch the job details", fmt.Sprintf(`(() => {
			window.leaked = "";
			window.leakWatch = new MutationObserver(() => {
				const p = document.getElementById("panel-job");
				if (p.innerText.includes(%[1]s)) window.leaked = p.innerText;
			});
			window.leakWatch.observe(document.getElementById("panel-job"), { subtree: true, childList: true, characterData: true });
			return true;
		})()`, jsString(first)))
		for _, id := range []string{first, second} {
			if _, err := rc.CancelJob(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		// Within seconds, where the refresh would take ten minutes: the
		// panel, and the jobs list, which the watch's news refreshes.
		b.within("the job details to show the job cancelled", 15*time.Second, `(() => {
			const h = document.querySelector('#panel-job h3');
			return !!h && h.innerText.includes('cancelled');
		})()`)
		b.waitText("#panel-job", "Never placed: cancelled by the renter")
		b.within("the jobs list to show the job cancelled", 15*time.Second, fmt.Sprintf(`(() => {
			const b = document.querySelector(%s);
			return !!b && b.closest('tr').innerText.includes('cancelled');
		})()`, jsString(`#panel-jobs button[data-action=job][data-id="`+second+`"]`)))
		if leaked := eval[string](b, "read what the panel showed", `(window.leakWatch.disconnect(), window.leaked)`); leaked != "" {
			t.Errorf("after choosing job %s, the job details showed job %s, chosen before:\n%s", second, first, leaked)
		}
		if n := eval[int](b, "count the first job's watches", fmt.Sprintf(`window.watchAsks[%s]`, jsString(first))); n != firstAsks {
			t.Errorf("job %s's watch was asked %d times after another job was chosen, want none", first, n-firstAsks)
		}
		b.screenshot("renter-watched")

		// An older server, without the watch: the page asks it once, and
		// the refresh draws the job. A server failing: the page asks again
		// after a pause that doubles, and the refresh draws the job
		// meanwhile.
		b.run("reopen the dashboard", chromedp.Navigate(m.URL+"/?refresh_ms=1000#renter"))
		b.waitText("#who-name", "demo-renter (renter)")
		b.waitText("#panel-jobs", "watched-first")
		eval[bool](b, "answer the watch as an older server", countWatches+` && (window.watchAnswer = 404) === 404`)
		b.chooseJob(first)
		b.waitText("#panel-job h3", "cancelled")
		b.poll("the refresh to read the job three times", fmt.Sprintf(`window.jobReads[%s] >= 3`, jsString(first)))
		if n := eval[int](b, "count the watches", fmt.Sprintf(`window.watchAsks[%s]`, jsString(first))); n != 1 {
			t.Errorf("a server without the watch was asked it %d times for job %s, want once", n, first)
		}
		eval[bool](b, "answer the watch as a failing server", `(window.watchAnswer = 503) === 503`)
		b.chooseJob(second)
		b.poll("the watch to be asked three times", fmt.Sprintf(`(window.watchTimes[%s] || []).length >= 3`, jsString(second)))
		b.waitText("#panel-job", second)
		if gaps := eval[[]int](b, "read the pauses", fmt.Sprintf(`(() => { const t = window.watchTimes[%s];
			return t.slice(1).map((x, i) => x - t[i]); })()`, jsString(second))); gaps[0] < 900 || gaps[1] < 1900 {
			t.Errorf("a failing watch was asked again after %v ms, want pauses of at least 1 s, then 2 s", gaps)
		}
		// Over a rate limit, the page waits what Retry-After says (3 s here)
		// before asking again.
		eval[bool](b, "answer the watch as a server over its limit", `(window.watchAnswer = 429) === 429`)
		b.chooseJob(first)
		b.poll("the watch to be asked twice more", fmt.Sprintf(`(window.watchTimes[%s] || []).length >= 3`, jsString(first)))
		// The first ask was the older server's, above.
		if at := eval[[]int](b, "read the times", fmt.Sprintf(`window.watchTimes[%s]`, jsString(first))); at[2]-at[1] < 2900 {
			t.Errorf("a watch refused with Retry-After: 3 was asked again after %d ms, want at least 3 s", at[2]-at[1])
		}
		eval[bool](b, "restore the requests", `(window.restoreFetch(), true)`)

		// The jobs list says why a queued job waits from its explanation,
		// which reads every node on the server's scheduler: asked once, and
		// shown again at the next refreshes without asking.
		third := queued("explained-once")
		defer rc.CancelJob(ctx, third)
		eval[bool](b, "count the explanations", fmt.Sprintf(`(() => {
			const orig = window.fetch;
			window.explainAsks = 0; window.jobLists = 0;
			window.fetch = (url, init) => {
				if (String(url) === '/v1/jobs/' + %s + '/explain') window.explainAsks++;
				if (String(url).startsWith('/v1/jobs?')) window.jobLists++;
				return orig(url, init);
			};
			window.restoreFetch = () => { window.fetch = orig; };
			return true;
		})()`, jsString(third)))
		b.waitText("#panel-jobs", "explained-once")
		b.poll("six refreshes of the jobs list after the job's first", `window.explainAsks >= 1 && window.jobLists >= 7`)
		if n := eval[int](b, "count the explanations", `window.explainAsks`); n != 1 {
			t.Errorf("the queued job was explained %d times in six refreshes, want once", n)
		}
		eval[bool](b, "restore the requests", `(window.restoreFetch(), true)`)
	})

	t.Run("market", func(t *testing.T) {
		b.t = t // report in the subtest
		b.run("open the market", chromedp.Click(chromedp.CSS(`#nav a[data-view=market]`)))
		b.waitText("#view h1", "Market")
		b.waitText("#panel-prices", "H100-80GB")
		b.waitText("#panel-fill", "Leased now")
		// Each panel draws from its own answer, so the charts may come a
		// refresh apart.
		charts := `document.querySelectorAll('#view svg.chart[role=img][aria-label]').length`
		if err := b.until(charts + ` >= 2`); err != nil {
			t.Errorf("the market view has %d labelled charts, want at least 2 (prices, supply and demand): %v\nprices panel:\n%s",
				eval[int](b, "count charts", charts), err, b.text("#panel-prices"))
		}
		b.screenshot("market")
		b.signOut()
	})

	// The operator charges the provider with an offence, through the API;
	// the provider sees it against their bond, and the operator upholds it
	// on the page.
	admin := client.New(m.URL, m.AdminKey)
	var dispute *idlegrid.Dispute
	var charged *idlegrid.Account // the provider the dispute charges
	const bond = 100 * idlegrid.MicrosPerUnit
	t.Run("provider", func(t *testing.T) {
		b.t = t // report in the subtest
		me, err := client.New(m.URL, m.ProviderKey).Me(ctx)
		if err != nil {
			t.Fatal(err)
		}
		charged = me
		if _, err := admin.PostBond(ctx, me.ID, bond, "browser-test-bond"); err != nil {
			t.Fatal(err)
		}
		dispute, err = admin.OpenDispute(ctx, idlegrid.Dispute{Offence: "broken_notice", ProviderID: me.ID, HarmMicros: 3 * idlegrid.MicrosPerUnit,
			Evidence: "browser test: a guaranteed lease stopped without notice"})
		if err != nil {
			t.Fatal(err)
		}
		b.signIn(m.ProviderKey, "fjord-compute (provider)")
		b.waitText("#panel-bond", dispute.ID)
		b.waitText("#panel-bond", "$100.00")
		b.waitText("#panel-nodes", "fj-l40s-01")
		b.waitText("#panel-nodes", "online")
		b.waitText("#panel-models", "No node of yours serves a model") // fjord-compute's serve none
		b.waitText("#panel-reliability", "What would raise it")
		b.waitText("#panel-badges", "newcomer", "not available on this server yet")
		b.waitText("#panel-asks", "Suggested")
		b.waitText("#panel-earnings", "GPU-hours leased") // the fill chart reads the server's history, not page samples
		b.waitText("#panel-windows", "In force")
		if complainedOf == me.ID { // the provider is told of the renter's complaint
			b.waitText("#panel-notices", "complained of broken_notice on lease")
			b.waitText("#panel-notices", complaintID)
		} else { // the complaint was another provider's
			b.waitText("#panel-notices", "No notices: the market tells you here")
		}
		nodeID := eval[string](b, "read the chosen node", `document.getElementById('w-node').value`)
		// Windows wrong in two places: both are said, a line each.
		b.run("set a zone that does not exist, and add a window",
			chromedp.SetValue(chromedp.ID("w-tz"), "Mars/Olympus"),
			chromedp.Click(chromedp.ID("w-add")))
		eval[bool](b, "untick the new window's days", `(() => { const ws = document.querySelectorAll('[data-window]');
			ws[ws.length - 1].querySelectorAll('input[name=day]').forEach((c) => { c.checked = false; }); return true; })()`)
		b.run("save", chromedp.Click(chromedp.CSS(`#window-form button[type=submit]`)))
		b.waitText("#window-error", "time_zone")
		if msg := b.text("#window-error"); !regexp.MustCompile(`time_zone: unknown time zone "Mars/Olympus"\n.*\.days: name at least one day`).MatchString(msg) {
			t.Errorf("window error = %q, want the zone's and the days' problems, a line each", msg)
		}
		eval[bool](b, "remove the window", `(() => { const ws = document.querySelectorAll('[data-window]');
			ws[ws.length - 1].querySelector('[data-action=w-remove]').click(); return true; })()`)
		b.run("edit the window",
			chromedp.SetValue(chromedp.ID("w-tz"), "Europe/Berlin"),
			chromedp.Click(chromedp.ID("w-add")))
		b.run("save", chromedp.Click(chromedp.CSS(`#window-form button[type=submit]`)))
		b.waitText("#toast", "Windows saved")
		b.waitText("#panel-windows", "set by you")
		b.waitText("#w-inforce", "Europe/Berlin")

		ns, err := client.New(m.URL, m.ProviderKey).NodeSchedule(ctx, nodeID)
		if err != nil {
			t.Fatal(err)
		}
		if ns.Owner == nil || ns.Schedule.Mode != idlegrid.ScheduleWindows || ns.Schedule.TimeZone != "Europe/Berlin" {
			t.Errorf("node %s schedule after the edit = %+v, want the owner's windows in Europe/Berlin", nodeID, ns)
		}
		b.waitText("#panel-nodes", "Europe/Berlin")

		// Drain the node from its row, after a confirmation that asks for no
		// words, then undrain it.
		for _, step := range []struct{ action, result string }{{"drain", "is draining"}, {"undrain", "is drained no more"}} {
			button := fmt.Sprintf(`#panel-nodes button[data-action=%s][data-id=%q]`, step.action, nodeID)
			b.poll("the "+step.action+" button", fmt.Sprintf(`!!document.querySelector(%s)`, jsString(button)))
			if !eval[bool](b, "click "+step.action, fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (e) e.click(); return !!e; })()`, jsString(button))) {
				t.Fatalf("no %s button for node %s", step.action, nodeID)
			}
			b.run("wait for the confirmation", chromedp.WaitVisible(chromedp.ID("confirm-ok")))
			if eval[bool](b, "is the text box shown", `!document.getElementById("confirm-text").hidden`) {
				t.Errorf("the %s confirmation asks for words it does not record", step.action)
			}
			b.run("confirm", chromedp.Click(chromedp.ID("confirm-ok")))
			b.waitText("#result-nodes", step.result)
			n, err := client.New(m.URL, m.ProviderKey).FindNode(ctx, nodeID)
			if err != nil {
				t.Fatal(err)
			}
			if draining := n.DrainingSince != nil; draining != (step.action == "drain") {
				t.Errorf("after %s on the page the node is draining: %v", step.action, draining)
			}
		}
		checkPayoutForm(b)
		b.checkAccessible("provider")
		b.screenshot("provider")
		// Another provider signs in while fjord-compute's panels load:
		// none of fjord-compute's nodes may show in theirs.
		b.switchWhileLoading(m.OtherProviderKey, m.OtherProvider+" (provider)", "fj-l40s-01")
		b.signOutWhileLoading()
	})

	t.Run("operator", func(t *testing.T) {
		b.t = t // report in the subtest
		b.signIn(m.AdminKey, "admin (admin)")
		b.waitText("#view h1", "Operator")
		b.waitText("#panel-health", "GPUs busy")
		b.waitText("#panel-health", "ok")
		// The demo's model, as the gateway routes to its two providers.
		b.waitText("#panel-models", "sim-8b-instruct")
		b.waitText("#panel-models", "nb-h100-01")
		b.waitText("#panel-models", "taking requests")
		b.waitText("#panel-settle", "No payouts waiting")
		b.waitText("#panel-quarantine", "None right now")
		b.waitText("#panel-verifications", "No verifications yet", "Re-run")
		b.checkAccessible("operator")
		b.screenshot("operator")

		// Uphold the dispute with the keyboard only: Enter on its button opens
		// the confirmation, which refuses an empty resolution; Enter confirms.
		b.waitText("#panel-disputes", dispute.ID)
		uphold := fmt.Sprintf(`#panel-disputes button[data-action=uphold][data-id=%q]`, dispute.ID)
		// The panel is redrawn every refresh, so a node found by selector
		// may be gone before the browser is told to focus it: the page
		// focuses the button itself, and keeps the focus across redraws.
		if !eval[bool](b, "focus the uphold button", fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (e) e.focus(); return !!e; })()`, jsString(uphold))) {
			t.Fatalf("no uphold button for dispute %s", dispute.ID)
		}
		// The operator's panels name the provider, not only its ID.
		if row := eval[string](b, "read the dispute's row", fmt.Sprintf(`[...document.querySelectorAll('#panel-disputes tbody tr')]
			.map((r) => r.innerText).find((t) => t.includes(%s)) || ''`, jsString(dispute.ID))); !strings.Contains(row, charged.Name) {
			t.Errorf("the dispute's row %q does not name its provider %s", row, charged.Name)
		}
		b.run("open the confirmation", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.ID("confirm-text")))
		b.waitText("#confirm", "Uphold dispute "+dispute.ID)
		b.waitText("#confirm-what", "Finds provider "+charged.Name+" ("+charged.ID+") guilty")
		if got := eval[string](b, "read the focus", `document.activeElement.id`); got != "confirm-text" {
			t.Errorf("the focus is on %q after opening the confirmation, want confirm-text", got)
		}
		b.run("confirm with no resolution", chromedp.KeyEvent("\r"))
		b.waitText("#confirm-error", "required")
		b.checkAccessible("operator, confirming")
		b.screenshot("operator-confirm")
		const resolution = "the lease's receipts show the stop without notice"
		b.run("confirm", chromedp.SendKeys(chromedp.ID("confirm-text"), resolution+"\r"))
		b.waitText("#result-disputes", "Dispute "+dispute.ID+" upheld: ")
		if eval[bool](b, "is the confirmation open", `document.getElementById("confirm").open`) {
			t.Error("the confirmation is still open after the dispute was upheld")
		}
		b.waitText("#panel-disputes", resolution)
		got, err := admin.FindDispute(ctx, dispute.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != idlegrid.DisputeUpheld || got.Resolution != resolution || got.PenaltyMicros <= 0 {
			t.Errorf("dispute after upholding it on the page: state %s, resolution %q, penalty %d; want upheld, %q, a penalty",
				got.State, got.Resolution, got.PenaltyMicros, resolution)
		}
		bal, err := admin.Balance(ctx, got.ProviderID)
		if err != nil {
			t.Fatal(err)
		}
		if want := bond - got.PenaltyMicros; bal.Bond != want {
			t.Errorf("the provider's bond after the penalty is %d, want %d", bal.Bond, want)
		}
		b.waitText("#result-disputes", "taken from the bond of "+charged.Name+" ("+got.ProviderID+")")
		b.screenshot("operator-upheld")
	})

	t.Run("phone", func(t *testing.T) {
		b.t = t // report in the subtest
		b.run("narrow the window", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
		b.run("open the market", chromedp.Click(chromedp.CSS(`#nav a[data-view=market]`)))
		b.waitText("#panel-prices", "H100-80GB")
		b.checkAccessible("market on a phone")
		b.screenshot("phone-market")
		b.run("reload", chromedp.Reload())
		b.waitText("#nav", "Operator") // the key survives a reload of the tab
	})
}

// stubPayouts answers the page's payout requests itself, after 300 ms,
// with the status in window.payoutAnswer, and records each request's
// Idempotency-Key in window.payoutKeys.
const stubPayouts = `(() => {
	window.payoutKeys = []; window.payoutAnswer = 503;
	const orig = window.fetch;
	window.fetch = (url, init) => {
		if (String(url) !== '/v1/payouts' || !init || init.method !== 'POST') return orig(url, init);
		window.payoutKeys.push(init.headers['Idempotency-Key']);
		const status = window.payoutAnswer;
		const body = status === 201 ? { id: 'payout_stub', state: 'requested', amount_micros: 1000000 }
			: { error: { code: status === 402 ? 'payment_required' : 'unavailable', message: 'stubbed ' + status + ' #' + window.payoutKeys.length } };
		return new Promise((resolve) => setTimeout(() => resolve(new Response(JSON.stringify(body),
			{ status, headers: { 'Content-Type': 'application/json' } })), 300));
	};
	return true;
})()`

// checkPayoutForm: a double click requests one payout, a retry after the
// server failed carries the same Idempotency-Key (the first may have been
// taken), and one after a refusal a new one.
func checkPayoutForm(b *browser) {
	b.t.Helper()
	eval[bool](b, "stub the payouts", stubPayouts)
	b.run("write an amount", chromedp.SetValue(chromedp.ID("p-amount"), "1.00"))
	submit := func(what string, times, answer int, wantError string) {
		eval[bool](b, what, fmt.Sprintf(`(() => { window.payoutAnswer = %d;
			const btn = document.querySelector('#payout-form button[type=submit]');
			for (let i = 0; i < %d; i++) btn.click(); return true; })()`, answer, times))
		b.waitText("#payout-error", wantError)
	}
	submit("double-click while the server fails", 2, 503, "stubbed 503 #1")
	submit("retry", 1, 402, "stubbed 402 #2")
	submit("retry after the refusal", 1, 503, "stubbed 503 #3")
	keys := eval[[]string](b, "read the keys", `window.payoutKeys`)
	if len(keys) != 3 || keys[0] != keys[1] || keys[2] == keys[0] || keys[0] == "" {
		b.t.Errorf("payout requests' Idempotency-Keys = %q; want three requests (a double click is one), the retry "+
			"after a failure with the first's key, the one after a refusal with a new key", keys)
	}
}
