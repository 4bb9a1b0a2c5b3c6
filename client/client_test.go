package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
)

// recorded is one request as the test server saw it.
type recorded struct {
	Method, URI string
	Header      http.Header
	Body        []byte
}

// recorder is a test server that records requests and answers each with
// status and body.
type recorder struct {
	mu     sync.Mutex
	reqs   []recorded
	status int
	body   string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, recorded{r.Method, r.URL.RequestURI(), r.Header.Clone(), body})
	status, answer := rec.status, rec.body
	rec.mu.Unlock()
	if status == 0 {
		status = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, answer)
}

func (rec *recorder) last(tb testing.TB) recorded {
	tb.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) == 0 {
		tb.Fatal("no request reached the server")
	}
	return rec.reqs[len(rec.reqs)-1]
}

// mustServe starts rec on a real listener.
func mustServe(tb testing.TB, h http.Handler) *httptest.Server {
	tb.Helper()
	s := httptest.NewServer(h)
	tb.Cleanup(s.Close)
	return s
}

func TestClient_requests(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		answer     string
		call       func(c *client.Client) error
		wantMethod string
		wantURI    string
		wantBody   string // JSON, compared after decoding; "" for none
	}{
		{
			name:   "create account",
			answer: `{"account":{"id":"acct_1","name":"ann","role":"renter"},"api_key":{"id":"key_1"},"secret":"igk_s"}`,
			call: func(c *client.Client) error {
				a, k, secret, err := c.CreateAccount(ctx, "ann", idlegrid.RoleRenter)
				if err == nil && (a.ID != "acct_1" || k.ID != "key_1" || secret != "igk_s") {
					return errors.New("answer not decoded")
				}
				return err
			},
			wantMethod: "POST", wantURI: "/v1/accounts", wantBody: `{"name":"ann","role":"renter"}`,
		},
		{
			name:   "list jobs with states and limit",
			answer: `{"jobs":[{"id":"job_1","state":"queued"}]}`,
			call: func(c *client.Client) error {
				jobs, err := c.ListJobs(ctx, idlegrid.JobFilter{States: []idlegrid.JobState{idlegrid.JobQueued, idlegrid.JobRunning}, Limit: 5})
				if err == nil && (len(jobs) != 1 || jobs[0].ID != "job_1") {
					return errors.New("answer not decoded")
				}
				return err
			},
			wantMethod: "GET", wantURI: "/v1/jobs?limit=5&state=queued%2Crunning",
		},
		{
			name:   "cancel job",
			answer: `{"id":"job_1","state":"cancelled"}`,
			call: func(c *client.Client) error {
				_, err := c.CancelJob(ctx, "job_1")
				return err
			},
			wantMethod: "POST", wantURI: "/v1/jobs/job_1/cancel",
		},
		{
			name:   "lease logs",
			answer: `{"lines":[{"seq":4,"stream":"stdout","text":"hi"}]}`,
			call: func(c *client.Client) error {
				lines, err := c.LeaseLogs(ctx, "lease_1", 3, 10)
				if err == nil && (len(lines) != 1 || lines[0].Text != "hi") {
					return errors.New("answer not decoded")
				}
				return err
			},
			wantMethod: "GET", wantURI: "/v1/leases/lease_1/logs?after=3&limit=10",
		},
		{
			name:   "own balance",
			answer: `{"account_id":"acct_1","available_micros":5}`,
			call: func(c *client.Client) error {
				b, err := c.Balance(ctx, "")
				if err == nil && b.Available != 5 {
					return errors.New("answer not decoded")
				}
				return err
			},
			wantMethod: "GET", wantURI: "/v1/balance",
		},
		{
			name:   "someone's balance",
			answer: `{"account_id":"acct_2"}`,
			call: func(c *client.Client) error {
				_, err := c.Balance(ctx, "acct_2")
				return err
			},
			wantMethod: "GET", wantURI: "/v1/accounts/acct_2/balance",
		},
		{
			name:   "join token ttl in seconds",
			answer: `{"join_token":{"id":"jt_1"},"secret":"igj_s"}`,
			call: func(c *client.Client) error {
				_, _, err := c.CreateJoinToken(ctx, "rack", 3, 90*time.Minute)
				return err
			},
			wantMethod: "POST", wantURI: "/v1/join-tokens", wantBody: `{"name":"rack","max_uses":3,"ttl_seconds":5400}`,
		},
		{
			name:   "revoke key answers no content",
			answer: ``,
			call: func(c *client.Client) error {
				return c.RevokeAPIKey(ctx, "", "key_1")
			},
			wantMethod: "DELETE", wantURI: "/v1/keys/key_1",
		},
		{
			name:   "ids are escaped",
			answer: `{"id":"x"}`,
			call: func(c *client.Client) error {
				_, err := c.FindJob(ctx, "a/b?c")
				return err
			},
			wantMethod: "GET", wantURI: "/v1/jobs/a%2Fb%3Fc",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{body: tt.answer}
			srv := mustServe(t, rec)
			if err := tt.call(client.New(srv.URL, "igk_secret")); err != nil {
				t.Fatalf("call: %v", err)
			}
			got := rec.last(t)
			if got.Method != tt.wantMethod || got.URI != tt.wantURI {
				t.Errorf("request = %s %s, want %s %s", got.Method, got.URI, tt.wantMethod, tt.wantURI)
			}
			if auth := got.Header.Get("Authorization"); auth != "Bearer igk_secret" {
				t.Errorf("Authorization = %q, want %q", auth, "Bearer igk_secret")
			}
			if tt.wantBody != "" {
				if ct := got.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type = %q, want application/json", ct)
				}
				if !sameJSON(t, got.Body, []byte(tt.wantBody)) {
					t.Errorf("body = %s, want %s", got.Body, tt.wantBody)
				}
			}
		})
	}
}

func sameJSON(tb testing.TB, a, b []byte) bool {
	tb.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		tb.Fatalf("decode %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		tb.Fatalf("decode %s: %v", b, err)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

func TestClient_TopUp(t *testing.T) {
	rec := &recorder{body: `{"account_id":"acct_1","available_micros":2500000}`}
	srv := mustServe(t, rec)
	b, err := client.New(srv.URL, "k").TopUp(context.Background(), "acct_1", 2_500_000, "pay-42")
	if err != nil {
		t.Fatal(err)
	}
	if b.Available != 2_500_000 {
		t.Errorf("available = %d, want 2500000", b.Available)
	}
	got := rec.last(t)
	if h := got.Header.Get("Idempotency-Key"); h != "pay-42" {
		t.Errorf("Idempotency-Key = %q, want pay-42", h)
	}
	if got.URI != "/v1/accounts/acct_1/topup" || !sameJSON(t, got.Body, []byte(`{"amount_micros":2500000}`)) {
		t.Errorf("request = %s %s, want /v1/accounts/acct_1/topup {\"amount_micros\":2500000}", got.URI, got.Body)
	}
}

func TestClient_errors(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		wantCode  string
		wantField string
		wantText  string // err.Error()
	}{
		{
			name:     "field error",
			status:   http.StatusBadRequest,
			body:     `{"error":{"code":"invalid","field":"job.gpus","message":"job.gpus: must be between 1 and 16"}}`,
			wantCode: idlegrid.EINVALID, wantField: "job.gpus",
			wantText: "job.gpus: must be between 1 and 16",
		},
		{
			name:     "the gateway's error, in OpenAI's format, names its field as param",
			status:   http.StatusBadRequest,
			body:     `{"error":{"message":"before: no request \"nope\" of yours","type":"invalid_request_error","param":"before","code":"invalid"}}`,
			wantCode: idlegrid.EINVALID, wantField: "before",
			wantText: `before: no request "nope" of yours`,
		},
		{
			name:     "the gateway's error without a param",
			status:   http.StatusUnauthorized,
			body:     `{"error":{"message":"invalid API key","type":"authentication_error","param":null,"code":"unauthorized"}}`,
			wantCode: idlegrid.EUNAUTHORIZED,
			wantText: "invalid API key",
		},
		{
			name:     "error without field",
			status:   http.StatusNotFound,
			body:     `{"error":{"code":"not_found","message":"job \"job_x\" not found"}}`,
			wantCode: idlegrid.ENOTFOUND,
			wantText: `job "job_x" not found`,
		},
		{
			name:     "payment",
			status:   http.StatusPaymentRequired,
			body:     `{"error":{"code":"payment","message":"balance too low"}}`,
			wantCode: idlegrid.EPAYMENT, wantText: "balance too low",
		},
		{
			name:     "a proxy's page",
			status:   http.StatusBadGateway,
			body:     `<html>bad gateway</html>`,
			wantCode: idlegrid.EUNAVAILABLE,
		},
		{
			name:     "another program on the port",
			status:   http.StatusNotFound,
			body:     `404 page not found`,
			wantCode: idlegrid.EINTERNAL,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := mustServe(t, &recorder{status: tt.status, body: tt.body})
			_, err := client.New(srv.URL, "k").FindJob(context.Background(), "job_x")
			var e *idlegrid.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %T %v, want *idlegrid.Error", err, err)
			}
			if e.Code != tt.wantCode || e.Field != tt.wantField {
				t.Errorf("code, field = %q, %q; want %q, %q", e.Code, e.Field, tt.wantCode, tt.wantField)
			}
			if tt.wantText != "" && err.Error() != tt.wantText {
				t.Errorf("err = %q, want %q", err.Error(), tt.wantText)
			}
		})
	}
}

func TestClient_unreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close() // nothing listens there now

	_, err := client.New(addr, "k").Me(context.Background())
	if err == nil {
		t.Fatal("err = nil, want a connection error")
	}
	for _, want := range []string{"is the server running at http://" + addr, "IDLEGRID_ADDR"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to contain %q", err, want)
		}
	}
}

func TestClient_cancelled(t *testing.T) {
	srv := mustServe(t, &recorder{body: `{}`})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := client.New(srv.URL, "k").Me(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if err != nil && strings.Contains(err.Error(), "is the server running") {
		t.Errorf("err = %q: a cancelled call is not a connection problem", err)
	}
}

func TestClient_missingID(t *testing.T) {
	rec := &recorder{body: `{}`}
	srv := mustServe(t, rec)
	_, err := client.New(srv.URL, "k").FindJob(context.Background(), "")
	if got := idlegrid.ErrorCode(err); got != idlegrid.EINVALID {
		t.Errorf("code = %q, want %q", got, idlegrid.EINVALID)
	}
	if len(rec.reqs) != 0 {
		t.Errorf("%d requests sent, want none", len(rec.reqs))
	}
}

func TestNew_addr(t *testing.T) {
	rec := &recorder{body: `{"id":"acct_1"}`}
	srv := mustServe(t, rec)
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	for _, addr := range []string{srv.URL, srv.URL + "/", hostPort, " " + hostPort + " "} {
		t.Run(addr, func(t *testing.T) {
			if _, err := client.New(addr, "k").Me(context.Background()); err != nil {
				t.Errorf("Me: %v", err)
			}
			if got := rec.last(t).URI; got != "/v1/me" {
				t.Errorf("URI = %q, want /v1/me", got)
			}
		})
	}
}

// A request refused as over the account's rate limit is sent again after
// the Retry-After the server said, body and all, a few times at most; a
// long wait is the caller's to decide.
func TestClient_rateLimited(t *testing.T) {
	serve := func(refusals int, retryAfter string) (*httptest.Server, *atomic.Int64) {
		var n atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if string(body) != `{"name":"ci"}` {
				t.Errorf("attempt %d sent %q", n.Load()+1, body)
			}
			if int(n.Add(1)) <= refusals {
				w.Header().Set("Retry-After", retryAfter)
				w.WriteHeader(http.StatusTooManyRequests)
				io.WriteString(w, `{"error":{"code":"too_many","message":"account acct_1 is over the API's limit"}}`)
				return
			}
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"key":{"id":"key_1","name":"ci"},"secret":"igk_x"}`)
		}))
		t.Cleanup(srv.Close)
		return srv, &n
	}
	for _, c := range []struct {
		name       string
		refusals   int
		retryAfter string
		wantSent   int64
		wantCode   string
	}{
		{"twice, then served", 2, "0", 3, ""},
		{"every time", 100, "0", 4, idlegrid.ETOOMANY},
		{"a wait too long to take", 1, "60", 1, idlegrid.ETOOMANY},
		{"no Retry-After", 1, "", 1, idlegrid.ETOOMANY},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, sent := serve(c.refusals, c.retryAfter)
			_, _, err := client.New(srv.URL, "k").CreateAPIKey(context.Background(), "ci")
			if got := idlegrid.ErrorCode(err); err != nil && got != c.wantCode || err == nil && c.wantCode != "" {
				t.Errorf("err = %v, want code %q", err, c.wantCode)
			}
			if got := sent.Load(); got != c.wantSent {
				t.Errorf("sent %d times, want %d", got, c.wantSent)
			}
		})
	}
}
