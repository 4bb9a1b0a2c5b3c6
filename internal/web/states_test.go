package web_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/web"
)

// TestDashboard_statesAndForms drives the dashboard in headless Chromium
// against scriptedAPI, through what a demo market shows only by chance: a
// provider's earnings after a bond staked from them, a running job
// cancelled (it stays running until its leases stop), the holds of leases
// that ended, more jobs than the list shows, mistakes in the forms' own
// units, amounts written as the page writes them, keys and errors that
// change under a form, and a server that does not answer.
func TestDashboard_statesAndForms(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a browser; skipped with -short")
	}
	chromium(t)
	stub := newScriptedAPI()
	ts := httptest.NewServer(web.Handler(stub))
	t.Cleanup(ts.Close)
	b := mustBrowser(t, ts.URL)
	opened := 0
	// open loads the page afresh as the key's user, refreshing every ms.
	open := func(ms int, view, key, who string) {
		b.t.Helper()
		opened++
		eval[bool](b, "forget the last key", `(sessionStorage.clear(), true)`)
		b.run("open the dashboard", chromedp.Navigate(fmt.Sprintf("%s/?refresh_ms=%d&n=%d#%s", ts.URL, ms, opened, view)))
		b.signIn(key, who)
	}
	// click clicks sel from the page's own script once it is there.
	click := func(sel string) {
		b.t.Helper()
		b.poll("click "+sel, fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (e) e.click(); return !!e; })()`, jsString(sel)))
	}
	// says fails the test unless sel shows want within 5 s: for what the
	// page's own script says at once.
	says := func(sel, want string) {
		b.t.Helper()
		js := fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && e.innerText.includes(%s); })()`, jsString(sel), jsString(want))
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			b.t.Errorf("%s does not show %q within 5s; it shows %q", sel, want, b.text(sel))
		}
	}
	const rarely = 600000 // a refresh far longer than the test: the page draws once
	now := time.Now().UTC()
	monthsAgo := func(n int) string {
		return time.Date(now.Year(), now.Month()-time.Month(n), 1, 0, 0, 0, 0, time.UTC).Format("2006-01")
	}

	// A bond staked from payable earnings leaves the balance's pending,
	// payable, in flight and paid out: what the provider earned, all time,
	// is its statements' earnings, month by month, less what upheld
	// disputes refunded of them.
	t.Run("earned all time counts a bond staked from earnings", func(t *testing.T) {
		b.t = t
		stub.set(func(s *scriptedAPI) {
			s.keys[fakeProviderKey].CreatedAt = now.AddDate(0, 0, -now.Day()+1).AddDate(0, -2, 0) // two months back
			s.earnings = map[string]idlegrid.Micros{monthsAgo(2): 1_700_000, monthsAgo(0): 2_000_001}
			s.refunds = map[string]idlegrid.Micros{monthsAgo(2): 200_000}
			// $2 of the $3.500001 earned staked as the bond, $0.50 paid out.
			s.balance = idlegrid.Balance{AccountID: "acct_provider", Pending: 1, Payable: 1_000_000, PaidOut: 500_000, Bond: 2_000_000}
		})
		t.Cleanup(func() { stub.set(func(s *scriptedAPI) { s.keys[fakeProviderKey].CreatedAt, s.refunds = now, nil }) })
		from := stub.count()
		open(1000, "provider", fakeProviderKey, "fake-provider (provider)")
		b.waitText("#panel-earnings", "Earned, all time\n$3.500001")
		for _, m := range []string{monthsAgo(2), monthsAgo(1), monthsAgo(0)} {
			if !slices.ContainsFunc(stub.asks(from, "GET", "/v1/statements"), func(a scriptedAsk) bool { return a.Query == "month="+m }) {
				t.Errorf("the earnings did not ask for the statement of %s", m)
			}
		}
		// A month long over is asked once; this one at every refresh.
		eventually(t, "another refresh", func() error {
			if n := len(stub.asks(from, "GET", "/v1/balance")); n < 3 {
				return fmt.Errorf("%d refreshes so far", n)
			}
			return nil
		})
		asked := map[string]int{}
		for _, a := range stub.asks(from, "GET", "/v1/statements") {
			asked[a.Query]++
		}
		if asked["month="+monthsAgo(2)] != 1 || asked["month="+monthsAgo(0)] < 2 {
			t.Errorf("statements asked over 3 refreshes, by month: %v; want %s once and %s at every refresh", asked, monthsAgo(2), monthsAgo(0))
		}
	})

	// The last 24 hours' chart names the days of its ends, not only hours
	// that would read backwards ("10:00 AM … 09:00 AM").
	t.Run("a day's chart names its days", func(t *testing.T) {
		b.t = t
		open(rarely, "provider", fakeProviderKey, "fake-provider (provider)")
		b.poll("the earnings chart", `!!document.querySelector('#panel-earnings svg')`)
		labels := eval[[]string](b, "read the chart's labels", `[...document.querySelectorAll('#panel-earnings svg text')].map((e) => e.textContent)`)
		dated := regexp.MustCompile(`^[A-Z][a-z]+ \d{1,2}, \d{2}:\d{2}`)
		if n := len(slices.DeleteFunc(slices.Clone(labels), func(l string) bool { return !dated.MatchString(l) })); n != 2 {
			t.Errorf("the earnings chart's labels %q: %d name a day and a time, want both ends", labels, n)
		}
	})

	// A payout written as the page writes amounts ("1,234.56") is asked
	// for, and the form is emptied so that a second press is not a second
	// payout by accident.
	t.Run("amounts as the page writes them", func(t *testing.T) {
		b.t = t
		open(rarely, "provider", fakeProviderKey, "fake-provider (provider)")
		b.run("ask for a payout", chromedp.SetValue(chromedp.ID("p-amount"), "$1,234.56"), chromedp.Click(chromedp.CSS(`#payout-form button[type=submit]`)))
		b.waitText("#toast", "Payout requested")
		stub.set(func(s *scriptedAPI) {
			if !slices.Equal(s.requested, []idlegrid.Micros{1_234_560_000}) {
				t.Errorf("payouts asked for %v, want [1234560000]", s.requested)
			}
		})
		if got := b.text("#payout-error"); got != "" {
			t.Errorf("the payout form says %q", got)
		}
		if got := eval[string](b, "read the amount", `document.getElementById('p-amount').value`); got != "" {
			t.Errorf("the amount reads %q after the payout was asked for, want it empty", got)
		}
	})

	// An error saving one node's windows is not shown under another's.
	t.Run("a window error is its node's", func(t *testing.T) {
		b.t = t
		open(rarely, "provider", fakeProviderKey, "fake-provider (provider)")
		b.poll("the nodes offered for editing", `document.querySelectorAll('#w-node option').length === 3`)
		click(`#window-form button[type=submit]`) // the stub has no PUT: an error
		b.poll("the error said", `document.getElementById('window-error').textContent !== ''`)
		b.run("choose another node", chromedp.SetValue(chromedp.ID("w-node"), "node_h100"),
			chromedp.Evaluate[chromedp.Void](`document.getElementById('w-node').dispatchEvent(new Event('change'))`))
		b.waitText("#panel-windows", "In force")
		if got := b.text("#window-error"); got != "" {
			t.Errorf("after choosing another node, the window editor still says %q", got)
		}
	})

	// Cancelling a job asks first; a running job asked to cancel stays
	// running until its leases stop, and the page says so rather than
	// offering to cancel it again. A lease that ended holds nothing.
	t.Run("cancel a running job", func(t *testing.T) {
		b.t = t
		ago := func(d time.Duration) string { return now.Add(-d).Format(time.RFC3339Nano) }
		stub.set(func(s *scriptedAPI) {
			s.jobs = []map[string]any{{"id": "job_run", "name": "trainer", "state": "running", "tier": "gold", "gpus": 1,
				"image": "python:3.12", "attempts": 2, "reason": "running on 1 node(s)", "created_at": ago(time.Hour),
				"started_at": ago(time.Hour), "charged_micros": 2_109, "max_price_micros_per_gpu_hour": 2_000_000}}
			s.leases = []map[string]any{
				{"id": "lease_ended", "job_id": "job_run", "node_id": "node_t4", "state": "preempted", "created_at": ago(time.Hour),
					"started_at": ago(time.Hour), "hold_micros": 210_909, "charged_micros": 2_109, "price_micros_per_gpu_hour": 421_800, "reason": "preempted"},
				{"id": "lease_live", "job_id": "job_run", "node_id": "node_h100", "state": "running", "created_at": ago(time.Minute),
					"hold_micros": 500_000, "charged_micros": 0, "price_micros_per_gpu_hour": 1_500_000, "progress": 0.5},
				{"id": "lease_pulling", "job_id": "job_run", "node_id": "node_t4", "state": "assigned", "created_at": ago(30 * time.Second),
					"hold_micros": 250_000, "charged_micros": 0, "price_micros_per_gpu_hour": 400_000,
					"pull": map[string]any{"pulled_bytes": 3 << 30, "image_bytes": 8 << 30, "at": ago(time.Second)}},
				{"id": "lease_backfill", "job_id": "job_run", "node_id": "node_h100", "state": "assigned", "created_at": ago(20 * time.Second),
					"hold_micros": 250_000, "charged_micros": 0, "price_micros_per_gpu_hour": 400_000, "start_by": ago(-30 * time.Minute)},
				{"id": "lease_slow", "job_id": "job_run", "node_id": "node_t4", "state": "preempted", "created_at": ago(50 * time.Minute),
					"hold_micros": 250_000, "charged_micros": 0, "price_micros_per_gpu_hour": 400_000,
					"reason": "the node had not started the lease by its start-by"},
			}
		})
		open(1000, "renter", fakeRenterKey, "fake-renter (renter)")
		// The complaint window is the server's, not the dashboard's 30 days.
		b.waitText("#panel-complaints", "To complain about a lease (within 14 days of its end)")
		click(`#panel-jobs button[data-action=job][data-id="job_run"]`)
		b.waitText("#panel-job", "lease_live")
		held := eval[[]string](b, "read the holds", `[...document.querySelectorAll('#panel-job tbody tr')].map((r) => r.children[5].innerText)`)
		if !slices.Equal(held, []string{"released", "released", "$0.50", "$0.25", "$0.25"}) {
			t.Errorf("the leases' Held column reads %q, want [released released $0.50 $0.25 $0.25]: the ended leases' holds were returned", held)
		}
		states := eval[[]string](b, "read the states", `[...document.querySelectorAll('#panel-job tbody tr')].map((r) => r.children[1].innerText)`)
		if !slices.Equal(states, []string{"preempted", "taken back", "running", "assigned", "assigned"}) {
			t.Errorf("the leases' State column reads %q, want [preempted, taken back, running, assigned, assigned]: a lease that never started was not preempted", states)
		}
		progress := eval[[]string](b, "read the progress", `[...document.querySelectorAll('#panel-job tbody tr')].map((r) => r.children[4].innerText)`)
		if !slices.Equal(progress, []string{"—", "—", "50%", "pulling 37.5%", "0% · start by in 30m"}) {
			t.Errorf("the leases' Progress column reads %q, want [— — 50%% pulling 37.5%% 0%% · start by in 30m]: the lease whose node pulls the image says how far, "+
				"and a lease with a start-by by when it must start", progress)
		}

		click(`#panel-job button[data-action=cancel][data-id="job_run"]`)
		b.within("the confirmation to open", 5*time.Second, `document.getElementById('confirm').open`)
		stub.set(func(s *scriptedAPI) {
			if len(s.cancelled) != 0 {
				t.Errorf("the job was cancelled before the dialog was confirmed: %q", s.cancelled)
			}
		})
		if got, want := b.text("#confirm-what"), "Job trainer is asked to stop now"; !strings.HasPrefix(got, want) {
			t.Errorf("the dialog says %q, want %q…", got, want)
		}
		if got := b.text("#confirm-cancel"); got != "Keep the job" {
			t.Errorf("the dialog's way out reads %q, want %q beside %q", got, "Keep the job", b.text("#confirm-ok"))
		}
		click("#confirm-ok")
		b.waitText("#result-job", "Cancel requested: job job_run ends once its leases have stopped.")
		b.waitText("#panel-job .body", "Cancel requested")
		if eval[bool](b, "look for the cancel button", `!!document.querySelector('#panel-job button[data-action=cancel]')`) {
			t.Errorf("a job asked to cancel is still offered to cancel:\n%s", b.text("#panel-job"))
		}
		b.waitText("#panel-jobs", "cancel requested")
		stub.set(func(s *scriptedAPI) {
			if !slices.Equal(s.cancelled, []string{"job_run"}) {
				t.Errorf("cancels asked %q, want job_run once", s.cancelled)
			}
		})
	})

	// The list shows the newest 30 jobs and says where the rest are.
	t.Run("more jobs than shown", func(t *testing.T) {
		b.t = t
		stub.set(func(s *scriptedAPI) {
			s.jobs, s.leases = nil, nil
			for i := range 31 {
				s.jobs = append(s.jobs, map[string]any{"id": fmt.Sprintf("job_%02d", 31-i), "state": "succeeded", "tier": "silver", "gpus": 1,
					"reason": "all leases completed", "created_at": now.Add(-time.Duration(i) * time.Minute).Format(time.RFC3339Nano)})
			}
		})
		open(rarely, "renter", fakeRenterKey, "fake-renter (renter)")
		b.waitText("#panel-jobs", "job_31")
		if got, want := b.text("#panel-jobs .hint"), "Showing your newest 30 jobs; idlegrid job ls --before job_02 lists the ones before"; !strings.HasPrefix(got, want) {
			t.Errorf("the jobs list's hint says %q, want %q…", got, want)
		}
	})

	// Minutes and gigabytes are checked in the form's own units, not in
	// the server's seconds and megabytes; a registry's host is asked for.
	t.Run("mistakes in the forms' own units", func(t *testing.T) {
		b.t = t
		open(rarely, "renter", fakeRenterKey, "fake-renter (renter)")
		from := stub.count()
		const (
			duration   = "Duration: write minutes, more than 0 and at most 43,200 (30 days)."
			checkpoint = "Checkpoints every: write minutes, at most 43,200 (30 days), or leave it empty for none."
		)
		for _, c := range []struct {
			duration, checkpoint string
			want                 string
			marked               string // the inputs marked invalid
		}{
			{"", "", duration, "j-duration"},
			{"0.001", "", duration, "j-duration"},
			{"60", "-5", checkpoint, "j-checkpoint"},
			{"-5", "-5", duration + "\n" + checkpoint, "j-duration,j-checkpoint"},
		} {
			b.run(fmt.Sprintf("submit with duration %q, checkpoints %q", c.duration, c.checkpoint),
				chromedp.SetValue(chromedp.ID("j-duration"), c.duration), chromedp.SetValue(chromedp.ID("j-checkpoint"), c.checkpoint),
				chromedp.Evaluate[chromedp.Void](`document.getElementById('submit-error').textContent = ''`),
				chromedp.Click(chromedp.CSS(`#submit-form button[type=submit]`)))
			b.poll("the form's answer", `document.getElementById('submit-error').textContent !== ''`)
			if got := b.text("#submit-error"); got != c.want {
				t.Errorf("duration %q, checkpoints %q: the form says %q, want %q", c.duration, c.checkpoint, got, c.want)
			}
			if got := eval[string](b, "read the inputs marked", `[...document.querySelectorAll('#submit-form [aria-invalid=true]')].map((e) => e.id).join(',')`); got != c.marked {
				t.Errorf("duration %q, checkpoints %q: inputs marked invalid %q, want %q", c.duration, c.checkpoint, got, c.marked)
			}
		}
		// Every one was asked of the server, in whole seconds, so that it
		// says all that is wrong at once.
		var sent []string
		for _, a := range stub.asks(from, "POST", "/v1/jobs") {
			sent = append(sent, a.Body)
		}
		for i, want := range []string{`"duration_seconds":0`, `"duration_seconds":0`, `"checkpoint_every_seconds":-300`, `"duration_seconds":-300`} {
			if i >= len(sent) || !strings.Contains(sent[i], want) {
				t.Errorf("job %d sent %q, want %s", i+1, sent, want)
				break
			}
		}

		b.run("search for -5 GB", chromedp.SetValue(chromedp.ID("o-vram"), "-5"), chromedp.Click(chromedp.CSS(`#offers-form button[type=submit]`)))
		says("#offers-error", "Min GPU memory: write gigabytes, more than 0, e.g. 40")

		b.run("save a login without a registry", chromedp.Click(chromedp.CSS(`#registry-form button[type=submit]`)))
		says("#registry-error", "Registry: write the host your images name, e.g. ghcr.io")
		if asks := stub.asks(from, "PUT", "/v1/registry-logins/-"); len(asks) != 0 {
			t.Errorf("the form asked the server about a registry named %q", "-")
		}
	})

	// The budget form offers the account's active keys as they are now:
	// one revoked and another made is a change, though they number the same.
	t.Run("the budget's keys follow the account's", func(t *testing.T) {
		b.t = t
		key := func(id, name string) map[string]any {
			return map[string]any{"id": id, "name": name, "prefix": "igk_" + id, "access": "all", "created_at": now}
		}
		stub.set(func(s *scriptedAPI) { s.apiKeys = []map[string]any{key("k1", "laptop"), key("k2", "ci")} })
		t.Cleanup(func() { stub.set(func(s *scriptedAPI) { s.apiKeys = nil }) })
		open(1000, "renter", fakeRenterKey, "fake-renter (renter)")
		options := `[...document.querySelectorAll('#b-key option')].map((o) => o.value).join(',')`
		b.poll("the keys offered", options+` === 'k1,k2'`)
		stub.set(func(s *scriptedAPI) {
			s.apiKeys[1]["revoked_at"] = now
			s.apiKeys = append(s.apiKeys, key("k3", "ci-new"))
		})
		if err := b.until(options + ` === 'k1,k3'`); err != nil {
			t.Errorf("after k2 was revoked and k3 made, the budget form offers %q, want k1,k3", eval[string](b, "read the keys", options))
		}
	})

	// A request that gets no answer says so in the page's words.
	t.Run("no answer from the server", func(t *testing.T) {
		b.t = t
		open(1000, "renter", fakeRenterKey, "fake-renter (renter)")
		b.waitText("#panel-offers", "st-4090")
		eval[bool](b, "cut the server off", `(() => { const orig = window.fetch;
			window.restoreFetch = () => { window.fetch = orig; };
			window.fetch = () => Promise.reject(new TypeError('Failed to fetch')); return true; })()`)
		b.waitText("#panel-offers", "Could not load: the server did not answer (Failed to fetch); is it running and reachable?")
		b.waitText("#live", "reconnecting")
		eval[bool](b, "restore the server", `(window.restoreFetch(), true)`)
		b.waitText("#panel-offers", "st-4090")
		b.waitText("#live", "live")
	})
}
