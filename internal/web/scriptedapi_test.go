package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/web"
)

// The fake API's keys, one per role.
const (
	fakeAdminKey    = "igk_fake_admin"
	fakeProviderKey = "igk_fake_provider"
	fakeRenterKey   = "igk_fake_renter"
)

// scriptedAPI stands for the JSON API with answers a test sets, so that the
// page meets what a demo market seldom has (amounts of a fraction of a
// cent, thousands of payouts waiting, a server that cannot answer) and the
// test can count what the page asks. It keeps no rules: it answers the
// listings the page reads with the filters they take, and every other path
// as a server without the endpoint does.
type scriptedAPI struct {
	mux *http.ServeMux

	mu       sync.Mutex
	keys     map[string]*idlegrid.Account // the keys it takes
	meStatus int                          // what GET /v1/me answers a good key; 0: the account
	asked    []scriptedAsk
	nodes    []*idlegrid.Node
	payouts  []*idlegrid.Payout  // newest first
	disputes []*idlegrid.Dispute // newest first
	balance  idlegrid.Balance
	fees     idlegrid.Micros
	settled  []string // the payouts settled, by ID

	earnings map[string]idlegrid.Micros // a provider's statement's earnings, by month ("2026-11")
	refunds  map[string]idlegrid.Micros // what its statement's upheld disputes refunded of them, by month
	jobs     []map[string]any           // the renter's jobs as the API answers them, newest first
	leases   []map[string]any           // their leases
	apiKeys  []map[string]any           // the renter's API keys
	// cancelled are the jobs a cancel was asked for, by ID; a running one
	// stays running, with cancel_requested_at, as the server answers.
	cancelled []string
	requested []idlegrid.Micros // the payouts asked for, by amount
	// inference is what GET /v1/inference/stats answers; nil: the server
	// has no gateway (404).
	inference *wire.InferenceStats
}

// scriptedAsk is a request the page made.
type scriptedAsk struct {
	Method, Path string
	Query        string // raw
	Body         string
	At           time.Time
}

func newScriptedAPI() *scriptedAPI {
	now := time.Now().UTC()
	s := &scriptedAPI{mux: http.NewServeMux(), keys: map[string]*idlegrid.Account{
		fakeAdminKey:    {ID: "acct_admin", Name: "fake-admin", Role: idlegrid.RoleAdmin, CreatedAt: now},
		fakeProviderKey: {ID: "acct_provider", Name: "fake-provider", Role: idlegrid.RoleProvider, CreatedAt: now},
		fakeRenterKey:   {ID: "acct_renter", Name: "fake-renter", Role: idlegrid.RoleRenter, CreatedAt: now},
	}}
	s.nodes = []*idlegrid.Node{
		fakeNode("node_4090", "st-4090", "RTX4090", 24564, now), // as an RTX 4090 reports its memory
		fakeNode("node_h100", "st-h100", "H100-80GB", 81559, now),
		fakeNode("node_t4", "st-t4", "T4", 15360, now),
	}
	s.routes()
	return s
}

func fakeNode(id, name, model string, vramMB int, now time.Time) *idlegrid.Node {
	return &idlegrid.Node{ID: id, ProviderID: "acct_provider", State: idlegrid.NodeOnline, LastHeartbeat: now, CreatedAt: now,
		Reliability: 0.9, LeasesCompleted: 9, Offer: idlegrid.Offer{Name: name, Region: "eu-west", Residency: "EU",
			GPUs:     []idlegrid.GPU{{UUID: "GPU-" + id, Model: model, VRAMMB: vramMB}},
			Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways},
			Ask:      idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 1_500_000}}}}
}

func (s *scriptedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.mu.Lock()
	s.asked = append(s.asked, scriptedAsk{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(body), At: time.Now()})
	s.mu.Unlock()
	s.mux.ServeHTTP(w, r)
}

// asks are the requests for method and path made since the request
// numbered from (see count).
func (s *scriptedAPI) asks(from int, method, path string) []scriptedAsk {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []scriptedAsk
	for _, a := range s.asked[min(from, len(s.asked)):] {
		if a.Method == method && a.Path == path {
			out = append(out, a)
		}
	}
	return out
}

// count is how many requests the page made so far.
func (s *scriptedAPI) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.asked)
}

func (s *scriptedAPI) set(f func(s *scriptedAPI)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func fakeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func fakeError(w http.ResponseWriter, status int, code, msg string) {
	fakeJSON(w, status, wire.ErrorBody{Error: wire.ErrorDetail{Code: code, Message: msg}})
}

// stubList is rows (newest first) as a listing answers them: of the states
// asked (state=a,b), after the row before=ID, up to limit=N (default 50).
func stubList[T any](r *http.Request, rows []T, id func(T) string, state func(T) string) []T {
	q := r.URL.Query()
	var states []string
	if q.Get("state") != "" {
		states = strings.Split(q.Get("state"), ",")
	}
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 {
		limit = 50
	}
	out := []T{}
	cursor := q.Get("before")
	if q.Get("order") == "oldest" { // rows are newest first
		rows, cursor = slices.Clone(rows), q.Get("after")
		slices.Reverse(rows)
	}
	skipping := cursor != ""
	for _, row := range rows {
		if skipping {
			skipping = id(row) != cursor
			continue
		}
		if states != nil && !slices.Contains(states, state(row)) {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, row)
	}
	return out
}

func (s *scriptedAPI) routes() {
	// answer registers a route that takes the stub's keys.
	answer := func(pattern string, fn func(w http.ResponseWriter, r *http.Request, who *idlegrid.Account)) {
		s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			defer s.mu.Unlock()
			who := s.keys[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
			if who == nil {
				fakeError(w, http.StatusUnauthorized, "unauthorized", "invalid or revoked API key")
				return
			}
			fn(w, r, who)
		})
	}
	fixed := func(pattern string, v any) {
		answer(pattern, func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) { fakeJSON(w, http.StatusOK, v) })
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fakeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	s.mux.HandleFunc("GET /v1/healthz", func(w http.ResponseWriter, r *http.Request) {
		fakeJSON(w, http.StatusOK, wire.Health{OK: true, Protocol: idlegrid.ProtocolVersion})
	})
	answer("GET /v1/me", func(w http.ResponseWriter, r *http.Request, who *idlegrid.Account) {
		if s.meStatus != 0 {
			fakeError(w, s.meStatus, "unavailable", "the fake API is down")
			return
		}
		fakeJSON(w, http.StatusOK, wire.Me{Account: who, KeyAccess: idlegrid.AccessAll})
	})
	answer("GET /v1/nodes", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		least, _ := strconv.Atoi(r.URL.Query().Get("min_vram_mb"))
		nodes := []*idlegrid.Node{}
		for _, n := range s.nodes {
			if slices.ContainsFunc(n.GPUs, func(g idlegrid.GPU) bool { return g.VRAMMB >= least }) {
				nodes = append(nodes, n)
			}
		}
		fakeJSON(w, http.StatusOK, map[string]any{"nodes": nodes, "free_gpus": map[string]int{}})
	})
	answer("GET /v1/inference/stats", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		if s.inference == nil {
			fakeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
			return
		}
		fakeJSON(w, http.StatusOK, s.inference)
	})
	answer("GET /v1/nodes/{id}/reputation", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		fakeJSON(w, http.StatusOK, map[string]any{"score": 0.9, "level_name": "newcomer", "badges": []string{"steady"}})
	})
	answer("GET /v1/nodes/{id}/schedule", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		always := idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
		fakeJSON(w, http.StatusOK, map[string]any{"node_id": r.PathValue("id"), "schedule": always, "published": always})
	})
	fixed("GET /v1/providers/{id}/reputation", map[string]any{"badges": []string{"newcomer"}})
	fixed("GET /v1/trust-policy", map[string]any{"version": 3, "complaint_window_hours": 336})
	answer("GET /v1/payouts", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		fakeJSON(w, http.StatusOK, wire.Payouts{Payouts: stubList(r, s.payouts,
			func(p *idlegrid.Payout) string { return p.ID }, func(p *idlegrid.Payout) string { return string(p.State) })})
	})
	answer("POST /v1/payouts/{id}/settle", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		for _, p := range s.payouts {
			if p.ID == r.PathValue("id") && p.State == idlegrid.PayoutRequested {
				p.State = idlegrid.PayoutSettled
				s.settled = append(s.settled, p.ID)
				fakeJSON(w, http.StatusOK, p)
				return
			}
		}
		fakeError(w, http.StatusConflict, "conflict", "no such payout waiting")
	})
	answer("GET /v1/disputes", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		fakeJSON(w, http.StatusOK, wire.Disputes{Disputes: stubList(r, s.disputes,
			func(d *idlegrid.Dispute) string { return d.ID }, func(d *idlegrid.Dispute) string { return string(d.State) })})
	})
	answer("GET /v1/balance", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		fakeJSON(w, http.StatusOK, s.balance)
	})
	answer("GET /v1/summary", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		fakeJSON(w, http.StatusOK, map[string]any{"jobs_by_state": map[string]int{}, "nodes_by_state": map[string]int{"online": len(s.nodes)},
			"gpus_busy": 0, "gpus_total": len(s.nodes), "spent_micros": 0, "earned_micros": 0, "fees_micros": s.fees, "held_micros": 0})
	})
	answer("GET /v1/leases", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		leases := []map[string]any{}
		if job := r.URL.Query().Get("job_id"); job != "" {
			for _, l := range s.leases {
				if l["job_id"] == job {
					leases = append(leases, l)
				}
			}
		}
		fakeJSON(w, http.StatusOK, map[string]any{"leases": leases})
	})
	fixed("GET /v1/leases/{id}/logs", map[string]any{"lines": []any{}})
	answer("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		for _, j := range s.jobs {
			if j["id"] == r.PathValue("id") {
				fakeJSON(w, http.StatusOK, j)
				return
			}
		}
		fakeError(w, http.StatusNotFound, "not_found", "no such job")
	})
	// A job is refused as the server refuses it for a duration or a
	// checkpoint interval out of range: every field at fault, a problem
	// each, each message opening with its field; none is ever taken.
	answer("POST /v1/jobs", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		var spec idlegrid.JobSpec
		json.NewDecoder(r.Body).Decode(&spec)
		var ps []wire.ErrorProblem
		if spec.DurationSeconds < 1 || spec.DurationSeconds > 2592000 {
			ps = append(ps, wire.ErrorProblem{Field: "job.duration_seconds", Message: "job.duration_seconds: must be between 1 and 2592000 (30 days)"})
		}
		if spec.CheckpointEverySeconds < 0 || spec.CheckpointEverySeconds > 2592000 {
			ps = append(ps, wire.ErrorProblem{Field: "job.checkpoint_every_seconds",
				Message: "job.checkpoint_every_seconds: must be between 0 (never) and 2592000 (30 days)"})
		}
		if len(ps) == 0 {
			fakeError(w, http.StatusServiceUnavailable, "unavailable", "the fake API takes no jobs")
			return
		}
		d := wire.ErrorDetail{Code: "invalid", Field: ps[0].Field, Message: ps[0].Message}
		if len(ps) > 1 {
			d.Problems = ps
		}
		fakeJSON(w, http.StatusBadRequest, wire.ErrorBody{Error: d})
	})
	answer("POST /v1/jobs/{id}/cancel", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		for _, j := range s.jobs {
			if j["id"] == r.PathValue("id") {
				s.cancelled = append(s.cancelled, r.PathValue("id"))
				if j["state"] == "queued" {
					j["state"] = "cancelled"
				}
				j["cancel_requested_at"] = time.Now().UTC()
				fakeJSON(w, http.StatusOK, j)
				return
			}
		}
		fakeError(w, http.StatusNotFound, "not_found", "no such job")
	})
	answer("POST /v1/payouts", func(w http.ResponseWriter, r *http.Request, who *idlegrid.Account) {
		var body struct {
			AmountMicros idlegrid.Micros `json:"amount_micros"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		s.requested = append(s.requested, body.AmountMicros)
		p := &idlegrid.Payout{ID: fmt.Sprintf("payout_asked%d", len(s.requested)), ProviderID: who.ID, AmountMicros: body.AmountMicros,
			State: idlegrid.PayoutRequested, CreatedAt: time.Now().UTC()}
		s.payouts = append([]*idlegrid.Payout{p}, s.payouts...)
		fakeJSON(w, http.StatusCreated, p)
	})
	fixed("GET /v1/transfers", map[string]any{"transfers": []any{}})
	fixed("GET /v1/market", []any{})
	answer("GET /v1/jobs", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		fakeJSON(w, http.StatusOK, map[string]any{"jobs": append([]map[string]any{}, s.jobs...)})
	})
	answer("GET /v1/statements", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		month, penalties := r.URL.Query().Get("month"), []any{}
		if refund := s.refunds[month]; refund > 0 {
			penalties = append(penalties, map[string]any{"dispute_id": "dispute_r" + month, "offence": "mismatched_result",
				"penalty_micros": 0, "penalty_to": "renter", "refund_micros": refund})
		}
		fakeJSON(w, http.StatusOK, map[string]any{"month": month, "lines": []any{},
			"total": map[string]any{"earnings_micros": s.earnings[month]}, "penalties": penalties,
			"refunded_micros": s.refunds[month], "net_micros": s.earnings[month] - s.refunds[month]})
	})
	answer("GET /v1/keys", func(w http.ResponseWriter, r *http.Request, _ *idlegrid.Account) {
		fakeJSON(w, http.StatusOK, map[string]any{"api_keys": append([]map[string]any{}, s.apiKeys...)})
	})
	fixed("GET /v1/spend-limits", map[string]any{"month": "2026-01", "limits": []any{}, "spend": map[string]any{}})
	fixed("GET /v1/registry-logins", map[string]any{"logins": []any{}})
	fixed("GET /v1/verifications", map[string]any{"verifications": []any{}})
	fixed("GET /v1/quarantine", []any{})
}

// waitingPayouts are n payouts waiting, newest first, a minute apart: the
// first amounts, then $1.00 each.
func waitingPayouts(n int, amounts ...idlegrid.Micros) []*idlegrid.Payout {
	now := time.Now().UTC()
	out := make([]*idlegrid.Payout, n)
	for i := range out {
		amount := idlegrid.MicrosPerUnit
		if i < len(amounts) {
			amount = amounts[i]
		}
		out[i] = &idlegrid.Payout{ID: fmt.Sprintf("payout_%05d", n-i), ProviderID: "acct_provider", AmountMicros: amount,
			State: idlegrid.PayoutRequested, CreatedAt: now.Add(-time.Duration(i) * time.Minute)}
	}
	return out
}

// TestDashboard_fakeAPI drives the dashboard in headless Chromium against
// scriptedAPI: amounts are shown to the micro where they are confirmed or move
// money; the payouts waiting past 5,000 are labelled for what they are;
// decided disputes show past many open ones; the provider's panels share
// one read of the nodes and their reputations a refresh; the renter's
// memory search keeps GPUs that report a little under their nominal GB;
// ?refresh_ms= cannot make the page refresh more than once a second; and a
// server that cannot check the kept key at page load keeps it and tries
// again, while one that refuses it signs out.
func TestDashboard_scriptedAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a browser; skipped with -short")
	}
	chromium(t)
	stub := newScriptedAPI()
	ts := httptest.NewServer(web.Handler(stub))
	t.Cleanup(ts.Close)
	b := mustBrowser(t, ts.URL)
	// open loads the page afresh, refreshing every ms, and keeps the tab's
	// key. Each address differs (n): one that differs from the last only
	// in its fragment would not load the page again.
	opened := 0
	open := func(ms int, view string) {
		b.t.Helper()
		opened++
		b.run("open the dashboard", chromedp.Navigate(fmt.Sprintf("%s/?refresh_ms=%d&n=%d#%s", ts.URL, ms, opened, view)))
	}
	const rarely = 600000 // a refresh far longer than the test: the page draws once

	t.Run("amounts to the micro", func(t *testing.T) {
		b.t = t
		stub.set(func(s *scriptedAPI) {
			s.payouts = waitingPayouts(2, 12_345_678, 1_999)
			s.fees = 1_999
			s.disputes = []*idlegrid.Dispute{{ID: "dispute_upheld", Offence: "broken_notice", State: idlegrid.DisputeUpheld,
				ProviderID: "acct_provider", Evidence: "stub", HarmMicros: 1_999, PenaltyMicros: 12_345_678, PenaltyTo: "renter",
				Resolution: "stub", CreatedAt: time.Now().UTC()}}
		})
		open(rarely, "operator")
		b.signIn(fakeAdminKey, "fake-admin (admin)")
		b.waitText("#panel-settle", "payout_00001")
		if got, want := b.text("#panel-settle tbody"), "payout_00002\tacct_provider\t$12.345678"; !strings.Contains(got, want) {
			t.Errorf("payouts to settle show\n%s\nwant a row %q", got, want)
		}
		if got, want := b.text("#panel-settle tbody"), "payout_00001\tacct_provider\t$0.001999"; !strings.Contains(got, want) {
			t.Errorf("payouts to settle show\n%s\nwant a row %q", got, want)
		}
		b.waitText("#panel-health", "Fees\n$0.001999")
		b.waitText("#panel-disputes", "dispute_upheld")
		if got := b.text("#panel-disputes tbody"); !strings.Contains(got, "$0.001999") || !strings.Contains(got, "$12.345678 to renter") {
			t.Errorf("the disputes show\n%s\nwant harm $0.001999 and penalty $12.345678 to renter", got)
		}

		// Reject's dialog names the exact amount too; backed out of.
		click := func(action, id string) {
			sel := fmt.Sprintf(`#panel-settle button[data-action=%s][data-id=%q]`, action, id)
			b.poll(action+" "+id, fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (e) e.click(); return !!e; })()`, jsString(sel)))
			b.run("wait for the confirmation", chromedp.WaitVisible(chromedp.ID("confirm-ok")))
		}
		click("reject", "payout_00001")
		if got, want := b.text("#confirm-what"), "Refuses $0.001999 to provider acct_provider;"; !strings.HasPrefix(got, want) {
			t.Errorf("the reject dialog says %q, want %q…", got, want)
		}
		// Back out and open the next at once, in one task: the dialog's
		// close event comes after the next one opened, and must leave it be.
		settle := `#panel-settle button[data-action=settle][data-id="payout_00002"]`
		eval[bool](b, "back out, and settle the other", fmt.Sprintf(`(() => {
			document.getElementById('confirm-cancel').click(); document.querySelector(%s).click(); return true; })()`, jsString(settle)))
		b.run("wait for the confirmation", chromedp.WaitVisible(chromedp.ID("confirm-ok")))
		if got, want := b.text("#confirm-what"), "Marks $12.345678 to provider acct_provider as paid."; !strings.HasPrefix(got, want) {
			t.Errorf("the settle dialog says %q, want %q…", got, want)
		}
		b.run("confirm", chromedp.SendKeys(chromedp.ID("confirm-text"), "bank-ref-1\r"))
		b.waitText("#result-settle", "Payout payout_00002 settled: ")
		if got, want := b.text("#result-settle"), "Payout payout_00002 settled: $12.345678 paid to acct_provider."; got != want {
			t.Errorf("the result says %q, want %q", got, want)
		}
		stub.set(func(s *scriptedAPI) {
			if !slices.Equal(s.settled, []string{"payout_00002"}) {
				t.Errorf("payouts settled %q, want payout_00002", s.settled)
			}
		})
	})

	// Past 5,000 the page holds the 5,000 that have waited longest, the
	// longest first, and says that newer ones wait too.
	t.Run("more than 5,000 payouts waiting", func(t *testing.T) {
		b.t = t
		stub.set(func(s *scriptedAPI) { s.payouts = waitingPayouts(5002) })
		open(rarely, "operator")
		b.waitText("#panel-settle", "More payouts wait than shown")
		hint := b.text("#panel-settle .hint")
		for _, want := range []string{"the 5,000 that have waited longest", "newer requests", "idlegrid payout ls --state requested --oldest"} {
			if !strings.Contains(hint, want) {
				t.Errorf("the hint %q does not say %q", hint, want)
			}
		}
		// payout_00001 is the oldest, first; _05001 and _05002, the
		// newest, are left out.
		rows := eval[[]string](b, "read the rows", `[...document.querySelectorAll('#panel-settle tbody tr')].map((r) => r.querySelector('td').innerText)`)
		if len(rows) != 5000 {
			t.Errorf("%d payouts shown, want 5000", len(rows))
		} else if rows[0] != "payout_00001" || rows[4999] != "payout_05000" {
			t.Errorf("payouts shown from %q to %q, want from payout_00001, the longest waiting, to payout_05000", rows[0], rows[4999])
		}
	})

	// With 30 or more disputes open, the newest 30 of any state are all
	// open: the decided ones are asked for as such. The oldest open one
	// says how long the queue has kept a bond waiting.
	t.Run("decided disputes behind many open", func(t *testing.T) {
		b.t = t
		stub.set(func(s *scriptedAPI) {
			s.payouts = nil
			var open []*idlegrid.Dispute
			for i := range 40 {
				open = append(open, &idlegrid.Dispute{ID: fmt.Sprintf("dispute_open%02d", i), Offence: "broken_notice",
					State: idlegrid.DisputeOpen, ProviderID: "acct_provider", Evidence: "stub", CreatedAt: time.Now().UTC().Add(-time.Duration(i) * time.Hour)})
			}
			s.disputes = append(open, &idlegrid.Dispute{ID: "dispute_dismissed", Offence: "broken_notice", State: idlegrid.DisputeDismissed,
				ProviderID: "acct_provider", Evidence: "stub", Resolution: "not proven", CreatedAt: time.Now().UTC().Add(-time.Hour)},
				&idlegrid.Dispute{ID: "dispute_upheld", Offence: "broken_notice", State: idlegrid.DisputeUpheld, ProviderID: "acct_provider",
					Evidence: "stub", PenaltyMicros: 1_999, PenaltyTo: "platform", Resolution: "proven", CreatedAt: time.Now().UTC().Add(-2 * time.Hour)})
		})
		open(rarely, "operator")
		b.waitText("#panel-disputes", "dispute_open39")
		text := b.text("#panel-disputes")
		for _, want := range []string{"dispute_dismissed", "dispute_upheld", "Open\n40\n", "Oldest open, waiting\n39h\n", "Shown\n42"} {
			if !strings.Contains(text, want) {
				t.Errorf("the disputes panel lacks %q:\n%s", want, text)
			}
		}
	})

	// Every panel of the provider's view that shows the nodes, their
	// reputations or the balance draws from one request a refresh.
	t.Run("provider panels share answers", func(t *testing.T) {
		b.t = t
		stub.set(func(s *scriptedAPI) {
			s.disputes = nil
			s.payouts = waitingPayouts(1, 1_999)
			s.balance = idlegrid.Balance{AccountID: "acct_provider", Payable: 1_999, Pending: 12_345_678, Bond: 3_000_000}
			s.earnings = map[string]idlegrid.Micros{time.Now().UTC().Format("2006-01"): 12_347_677}
		})
		eval[bool](b, "forget the last key", `(sessionStorage.clear(), true)`)
		open(rarely, "provider")
		from := stub.count() // signed out, the page asks nothing
		b.signIn(fakeProviderKey, "fake-provider (provider)")
		b.poll("every panel drawn", `(() => { const bodies = [...document.querySelectorAll('#view .body')];
			return bodies.length > 0 && !bodies.some((e) => e.innerText.includes('Loading…')); })()`)
		for _, path := range []string{"/v1/nodes", "/v1/balance", "/v1/nodes/node_4090/reputation", "/v1/nodes/node_t4/reputation"} {
			if n := len(stub.asks(from, "GET", path)); n != 1 {
				t.Errorf("one refresh asked GET %s %d times, want once", path, n)
			}
		}
		b.waitText("#panel-badges", "steady")
		b.waitText("#panel-payouts", "Payable now\n$0.001999")
		b.waitText("#panel-earnings", "Pending\n$12.345678")
		b.waitText("#panel-earnings", "Earned, all time\n$12.347677")
		b.waitText("#panel-bond", "Bond\n$3.00")
	})

	// A provider sees how the gateway routes to its own nodes' models, and
	// no one else's: a breaker cut off and how often it tripped, and
	// until when text completions and responses skip a model server that
	// answered them 404.
	t.Run("models served", func(t *testing.T) {
		b.t = t
		skipped := time.Now().UTC().Add(8 * time.Minute)
		queued := int64(3)
		stub.set(func(s *scriptedAPI) {
			s.inference = &wire.InferenceStats{
				Providers: []wire.ProviderLoad{
					{NodeID: "node_4090", NodeName: "st-4090", Model: "org/chat-8b", InFlight: 2, MaxConcurrency: 16, Queued: &queued,
						TTFTMS: 212.4, TokensPerSecond: 48.6, SuccessRate: 0.25, Breaker: "open", TextCompletionsSkippedUntil: &skipped,
						ResponsesSkippedUntil: &skipped},
					{NodeID: "node_elsewhere", NodeName: "not-mine", Model: "org/chat-8b", MaxConcurrency: 8, SuccessRate: 1, Breaker: "closed"},
				},
				Breakers: []wire.BreakerStats{{NodeID: "node_4090", NodeName: "st-4090", Model: "org/chat-8b", State: "open", Trips: 2}},
			}
		})
		t.Cleanup(func() { stub.set(func(s *scriptedAPI) { s.inference = nil }) })
		eval[bool](b, "forget the last key", `(sessionStorage.clear(), true)`)
		open(rarely, "provider")
		b.signIn(fakeProviderKey, "fake-provider (provider)")
		b.waitText("#panel-models", "st-4090")
		got := b.text("#panel-models tbody")
		for _, want := range []string{"org/chat-8b", "2 of 16", "3 queued at its server", "25%", "212 ms", "49", "cut off", "tripped 2 times", "text completions until in 8m", "responses until in 8m"} {
			if !strings.Contains(got, want) {
				t.Errorf("models served show\n%s\nwant %q", got, want)
			}
		}
		if strings.Contains(got, "not-mine") {
			t.Errorf("models served show another provider's node:\n%s", got)
		}
	})

	// "24 GB" is 24000 MB, as GPU makers count: an RTX 4090 reports 24564.
	t.Run("memory in decimal GB", func(t *testing.T) {
		b.t = t
		eval[bool](b, "forget the last key", `(sessionStorage.clear(), true)`)
		open(rarely, "renter")
		b.signIn(fakeRenterKey, "fake-renter (renter)")
		b.waitText("#panel-offers", "st-t4")
		from := stub.count()
		b.run("search for 24 GB", chromedp.SetValue(chromedp.ID("o-vram"), "24"), chromedp.Click(chromedp.CSS(`#offers-form button[type=submit]`)))
		b.poll("the search drawn", `!document.querySelector('#panel-offers .body').innerText.includes('st-t4')`)
		if got := b.text("#panel-offers .body"); !strings.Contains(got, "st-4090") || !strings.Contains(got, "st-h100") {
			t.Errorf("nodes with at least 24 GB:\n%s\nwant st-4090 (24564 MB) and st-h100", got)
		}
		asks := stub.asks(from, "GET", "/v1/nodes")
		if len(asks) == 0 || !strings.Contains(asks[0].Query, "min_vram_mb=24000") {
			t.Errorf("the search asked %+v, want min_vram_mb=24000", asks)
		}
	})

	// ?refresh_ms=1 refreshes once a second at most.
	t.Run("refresh at most once a second", func(t *testing.T) {
		b.t = t
		from := stub.count()
		open(1, "renter")
		b.waitText("#who-name", "fake-renter (renter)")
		var at []time.Time
		eventually(t, "four refreshes", func() error {
			asks := stub.asks(from, "GET", "/v1/balance")
			at = at[:0]
			for _, a := range asks {
				at = append(at, a.At)
			}
			if len(at) < 4 {
				return fmt.Errorf("%d refreshes so far", len(at))
			}
			return nil
		})
		for i := 1; i < len(at); i++ {
			if gap := at[i].Sub(at[i-1]); gap < 950*time.Millisecond {
				t.Errorf("refresh %d came %s after the one before, want at least 1s", i+1, gap)
			}
		}
	})

	// At page load, a server that cannot answer GET /v1/me says nothing
	// about the key: the page says so, keeps the key and asks again.
	t.Run("a failing server keeps the key", func(t *testing.T) {
		b.t = t
		stub.set(func(s *scriptedAPI) { s.meStatus = http.StatusServiceUnavailable })
		from := stub.count()
		open(rarely, "renter")
		b.waitText("#signin-error", "Could not check your key with the server: the fake API is down.")
		eventually(t, "the key checked again", func() error {
			if n := len(stub.asks(from, "GET", "/v1/me")); n < 2 {
				return fmt.Errorf("GET /v1/me asked %d times", n)
			}
			return nil
		})
		if got := eval[string](b, "read the kept key", `sessionStorage.getItem('idlegrid.key') || ''`); got != fakeRenterKey {
			t.Errorf("the tab keeps the key %q after the server failed, want %q", got, fakeRenterKey)
		}
		stub.set(func(s *scriptedAPI) { s.meStatus = 0 })
		b.waitText("#who-name", "fake-renter (renter)")
		b.waitText("#panel-offers", "st-4090")
		// Every panel drawn, so that none asks with the key the next
		// subtest refuses, which would sign this page out before it opens
		// the next.
		b.poll("every panel drawn", `(() => { const bodies = [...document.querySelectorAll('#view .body')];
			return bodies.length > 0 && !bodies.some((e) => e.innerText.includes('Loading…')); })()`)
	})

	// A key the server refuses at page load signs the page out.
	t.Run("a refused key signs out", func(t *testing.T) {
		b.t = t
		stub.set(func(s *scriptedAPI) { delete(s.keys, fakeRenterKey) })
		open(rarely, "renter")
		b.waitText("#signin-error", "Your key was refused: invalid or revoked API key")
		if got := eval[string](b, "read the kept key", `sessionStorage.getItem('idlegrid.key') || ''`); got != "" {
			t.Errorf("the tab keeps the refused key %q", got)
		}
		if eval[bool](b, "is the view shown", `!document.getElementById('view').hidden`) {
			t.Error("the view is shown for a refused key")
		}
	})
}
