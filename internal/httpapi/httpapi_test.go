package httpapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/server"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
	"github.com/idlegrid/idlegrid/internal/sqlstore/sqlstoretest"
)

// fakeClock is the coordinator's clock in these tests. It starts at the
// wall clock, because agents sign with the wall clock and the server allows
// only nodekey.MaxSkew between the two, and moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fixture is a real coordinator on a real SQLite file behind a real HTTP
// listener, with an admin account.
type fixture struct {
	URL         string
	Server      *server.Server
	Store       *sqlstore.DB
	Clock       *fakeClock
	AdminSecret string
	Admin       *client.Client
}

// tbWriter sends the API's log to the test's log.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func mustOpen(tb testing.TB, opts httpapi.Options) *fixture {
	tb.Helper()
	return mustOpenOn(tb, sqlstoretest.Path(tb), opts)
}

// mustOpenOn is mustOpen on the store dsn names: a SQLite file or a
// PostgreSQL database.
func mustOpenOn(tb testing.TB, dsn string, opts httpapi.Options) *fixture {
	tb.Helper()
	ctx := context.Background()
	store, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { store.Close() })
	clock := &fakeClock{now: idlegrid.SystemClock{}.Now()}
	if opts.Metrics == nil {
		opts.Metrics = prometheus.NewRegistry() // the coordinator's and the API's, as idlegrid server wires them
	}
	srv, err := server.Open(server.Config{
		Store: store, Clock: clock, Metrics: opts.Metrics,
		// Nothing here should be reaped while the fake clock moves.
		HeartbeatInterval: time.Hour, StartTimeout: time.Hour,
	})
	if err != nil {
		tb.Fatalf("open server: %v", err)
	}
	tb.Cleanup(func() { srv.Close() })
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(tbWriter{tb}, nil))
	}
	ts := httptest.NewServer(httpapi.New(srv, opts))
	tb.Cleanup(ts.Close)

	_, _, secret, err := srv.Bootstrap(ctx, "root", idlegrid.RoleAdmin)
	if err != nil {
		tb.Fatalf("bootstrap admin: %v", err)
	}
	return &fixture{URL: ts.URL, Server: srv, Store: store, Clock: clock, AdminSecret: secret, Admin: client.New(ts.URL, secret)}
}

// mustAccount creates an account through the API and returns a client that
// speaks for it, and the key's secret.
func (f *fixture) mustAccount(tb testing.TB, name string, role idlegrid.Role) (*client.Client, *idlegrid.Account, string) {
	tb.Helper()
	acct, _, secret, err := f.Admin.CreateAccount(context.Background(), name, role)
	if err != nil {
		tb.Fatalf("create %s account %s: %v", role, name, err)
	}
	return client.New(f.URL, secret), acct, secret
}

func mustKey(tb testing.TB) ed25519.PrivateKey {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return priv
}

func testOffer(name string) idlegrid.Offer {
	return idlegrid.Offer{
		Name:     name,
		GPUs:     []idlegrid.GPU{{UUID: "GPU-" + name + "-0", Model: "RTX4090", VRAMMB: 24576}},
		CPUCores: 16, RAMMB: 65536, DiskGB: 500,
		Region: "eu-west", Residency: "EU",
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways},
		Ask: idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{
			idlegrid.TierGold: 3 * idlegrid.MicrosPerUnit, idlegrid.TierSilver: 2 * idlegrid.MicrosPerUnit, idlegrid.TierBronze: idlegrid.MicrosPerUnit,
		}},
	}
}

func testSpec() idlegrid.JobSpec {
	return idlegrid.JobSpec{
		Name: "train", Kind: idlegrid.KindTraining, Image: "ghcr.io/acme/trainer:1.2",
		GPUs: 1, Tier: idlegrid.TierSilver, MaxPriceMicrosPerGPUHour: 5 * idlegrid.MicrosPerUnit,
		DurationSeconds: 3600,
	}
}

// mustNode joins a node to provider's fleet and publishes its offer. It
// returns the agent client and the node's key.
func (f *fixture) mustNode(tb testing.TB, provider *client.Client, name string) (*client.AgentClient, ed25519.PrivateKey, string) {
	tb.Helper()
	ctx := context.Background()
	_, token, err := provider.CreateJoinToken(ctx, "token-"+name, 1, time.Hour)
	if err != nil {
		tb.Fatalf("create join token: %v", err)
	}
	key := mustKey(tb)
	agent := client.NewAgent(f.URL, key)
	resp, err := agent.Join(ctx, idlegrid.JoinRequest{Token: token, Offer: testOffer(name), AgentVersion: "test"})
	if err != nil {
		tb.Fatalf("join: %v", err)
	}
	if err := agent.UpdateOffer(ctx, idlegrid.OfferRequest{Offer: testOffer(name), AgentVersion: "test"}); err != nil {
		tb.Fatalf("update offer: %v", err)
	}
	return agent, key, resp.NodeID
}

// answer is a raw HTTP answer.
type answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Err decodes the answer's error body.
func (a answer) Err(tb testing.TB) wire.ErrorDetail {
	tb.Helper()
	var body wire.ErrorBody
	if err := json.Unmarshal(a.Body, &body); err != nil {
		tb.Fatalf("error answer %s is not the API's error body: %v", a.Body, err)
	}
	return body.Error
}

// mustDo sends a raw request, for what the client would never send.
func mustDo(tb testing.TB, req *http.Request) answer {
	tb.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// request builds a request with an optional bearer secret and JSON body.
func request(tb testing.TB, method, url, secret, body string) *http.Request {
	tb.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		tb.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

func TestAPI_healthz(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	got := mustDo(t, request(t, "GET", f.URL+"/v1/healthz", "", ""))
	if got.Status != http.StatusOK {
		t.Fatalf("status = %d, want 200", got.Status)
	}
	var h wire.Health
	if err := json.Unmarshal(got.Body, &h); err != nil {
		t.Fatal(err)
	}
	if want := (wire.Health{OK: true, Protocol: idlegrid.ProtocolVersion}); h != want {
		t.Errorf("health = %+v, want %+v", h, want)
	}
}

// TestAPI_readyz: once the engine is built GET /v1/readyz answers 200,
// and 503 in the API's error format once the database is gone.
func TestAPI_readyz(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	deadline := time.Now().Add(10 * time.Second)
	got := mustDo(t, request(t, "GET", f.URL+"/v1/readyz", "", ""))
	for got.Status != http.StatusOK && time.Now().Before(deadline) { // the engine's first build
		time.Sleep(10 * time.Millisecond)
		got = mustDo(t, request(t, "GET", f.URL+"/v1/readyz", "", ""))
	}
	if got.Status != http.StatusOK || !strings.Contains(string(got.Body), `"ok":true`) {
		t.Fatalf("readyz: %d %s, want 200 once the engine is built", got.Status, got.Body)
	}
	f.Store.Close()
	got = mustDo(t, request(t, "GET", f.URL+"/v1/readyz", "", ""))
	if got.Status != http.StatusServiceUnavailable || !strings.Contains(string(got.Body), "database unavailable") {
		t.Errorf("readyz with the database closed: %d %s, want 503 naming the database", got.Status, got.Body)
	}
}

// TestAPI_submitJobIdempotencyKey: POST /v1/jobs sent again with its
// Idempotency-Key answers 200 with the first job, marked replayed; the
// key with another spec is 409, a bad key 400, each naming the header.
func TestAPI_submitJobIdempotencyKey(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	_, _, secret := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	spec := `{"kind":"training","image":"x/y:1","gpus":1,"tier":"silver","max_price_micros_per_gpu_hour":1000000,"duration_seconds":600}`
	submit := func(key, body string) answer {
		req := request(t, "POST", f.URL+"/v1/jobs", secret, body)
		req.Header.Set(wire.HeaderIdempotencyKey, key)
		return mustDo(t, req)
	}
	first := submit("k-1", spec)
	if first.Status != http.StatusCreated || first.Header.Get(wire.HeaderIdempotentReplayed) != "" {
		t.Fatalf("the first submission: %d %s, want 201, not replayed", first.Status, first.Body)
	}
	again := submit("k-1", spec)
	if again.Status != http.StatusOK || again.Header.Get(wire.HeaderIdempotentReplayed) != "true" || !bytes.Equal(jobID(t, again.Body), jobID(t, first.Body)) {
		t.Errorf("sent again: %d %v %s, want 200, replayed, the first job", again.Status, again.Header, again.Body)
	}
	if a := submit("k-1", strings.Replace(spec, `"gpus":1`, `"gpus":2`, 1)); a.Status != http.StatusConflict || !strings.Contains(string(a.Body), "whose spec differs") {
		t.Errorf("the key with another spec: %d %s, want 409 saying the spec differs", a.Status, a.Body)
	}
	if a := submit(strings.Repeat("k", 300), spec); a.Status != http.StatusBadRequest || a.Err(t).Field != wire.HeaderIdempotencyKey {
		t.Errorf("a key of 300 characters: %d %s, want 400 naming %s", a.Status, a.Body, wire.HeaderIdempotencyKey)
	}
}

// jobID is the id in a job's JSON.
func jobID(t *testing.T, body []byte) []byte {
	t.Helper()
	var j struct{ ID string }
	if err := json.Unmarshal(body, &j); err != nil || j.ID == "" {
		t.Fatalf("not a job: %s", body)
	}
	return []byte(j.ID)
}

// TestAPI_adminRevokesKey: an admin may list and revoke another account's
// keys (a key leaked); no one else may, and the key fails at once.
func TestAPI_adminRevokesKey(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, renterAcct, _ := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	other, _, _ := f.mustAccount(t, "other", idlegrid.RoleRenter)
	leaked, secret, err := renter.CreateAPIKey(ctx, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ListAPIKeys(ctx, renterAcct.ID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Errorf("another renter lists the renter's keys: %v, want ENOTFOUND", err)
	}
	if err := other.RevokeAPIKey(ctx, renterAcct.ID, leaked.ID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Errorf("another renter revokes the renter's key: %v, want ENOTFOUND", err)
	}
	if err := other.RevokeAPIKey(ctx, "", leaked.ID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Errorf("another renter revokes the renter's key as its own: %v, want ENOTFOUND", err)
	}
	keys, err := f.Admin.ListAPIKeys(ctx, renterAcct.ID)
	if err != nil || !slices.ContainsFunc(keys, func(k *idlegrid.APIKey) bool { return k.ID == leaked.ID }) {
		t.Fatalf("the admin lists the renter's keys: %v (%v), want the leaked one among them", keys, err)
	}
	if err := f.Admin.RevokeAPIKey(ctx, renterAcct.ID, leaked.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(f.URL, secret).Me(ctx); idlegrid.ErrorCode(err) != idlegrid.EUNAUTHORIZED {
		t.Errorf("the revoked key: %v, want EUNAUTHORIZED", err)
	}
	if _, err := f.Admin.ListAPIKeys(ctx, "acct_nosuch"); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Errorf("the keys of no account: %v, want ENOTFOUND", err)
	}
}

func TestAPI_authentication(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, _, renterSecret := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	key, revokedSecret, err := renter.CreateAPIKey(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if err := renter.RevokeAPIKey(ctx, "", key.ID); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		header     string
		wantStatus int
		wantText   string
	}{
		{"missing key", "", 401, "missing API key"},
		{"wrong key", "Bearer igk_nosuchkey", 401, "invalid or revoked API key"},
		{"revoked key reads like a wrong one", "Bearer " + revokedSecret, 401, "invalid or revoked API key"},
		{"not bearer", "Basic " + renterSecret, 401, "Bearer"},
		{"good key", "Bearer " + renterSecret, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request(t, "GET", f.URL+"/v1/me", "", "")
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			got := mustDo(t, req)
			if got.Status != tt.wantStatus {
				t.Fatalf("status = %d (%s), want %d", got.Status, got.Body, tt.wantStatus)
			}
			if tt.wantStatus == 200 {
				return
			}
			e := got.Err(t)
			if e.Code != idlegrid.EUNAUTHORIZED || !strings.Contains(e.Message, tt.wantText) {
				t.Errorf("error = %+v, want code %q and a message with %q", e, idlegrid.EUNAUTHORIZED, tt.wantText)
			}
			if got.Header.Get("WWW-Authenticate") == "" {
				t.Error("a 401 must say how to authenticate in WWW-Authenticate")
			}
		})
	}
}

// TestAPI_authorisation checks every role against objects it owns and
// objects it does not: other people's objects are 404, not 403, so that
// nobody learns what exists.
func TestAPI_authorisation(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter1, renter1Acct, renter1Secret := f.mustAccount(t, "ren1", idlegrid.RoleRenter)
	_, _, renter2Secret := f.mustAccount(t, "ren2", idlegrid.RoleRenter)
	provider1, _, provider1Secret := f.mustAccount(t, "prov1", idlegrid.RoleProvider)
	_, _, provider2Secret := f.mustAccount(t, "prov2", idlegrid.RoleProvider)
	_, _, nodeID := f.mustNode(t, provider1, "rig1")
	job, err := renter1.SubmitJob(ctx, testSpec())
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name         string
		secret       string
		method, path string
		body         string
		wantStatus   int
	}{
		{"renter sees own job", renter1Secret, "GET", "/v1/jobs/" + job.ID, "", 200},
		{"renter cannot see another renter's job", renter2Secret, "GET", "/v1/jobs/" + job.ID, "", 404},
		{"renter cannot cancel another renter's job", renter2Secret, "POST", "/v1/jobs/" + job.ID + "/cancel", "", 404},
		{"admin sees any job", f.AdminSecret, "GET", "/v1/jobs/" + job.ID, "", 200},
		{"provider may not read jobs", provider1Secret, "GET", "/v1/jobs/" + job.ID, "", 403},
		{"provider may not submit jobs", provider1Secret, "POST", "/v1/jobs", `{"image":"x","gpus":1}`, 403},

		{"provider sees own node", provider1Secret, "GET", "/v1/nodes/" + nodeID, "", 200},
		{"provider sees what the market shows of another provider's node", provider2Secret, "GET", "/v1/nodes/" + nodeID, "", 200},
		{"renter sees what the market shows of a node", renter1Secret, "GET", "/v1/nodes/" + nodeID, "", 200},
		{"no such node", renter1Secret, "GET", "/v1/nodes/node_nope", "", 404},
		{"admin sees any node", f.AdminSecret, "GET", "/v1/nodes/" + nodeID, "", 200},
		{"renter lists the market's nodes", renter1Secret, "GET", "/v1/nodes", "", 200},
		{"renter lists the market's first node", renter1Secret, "GET", "/v1/nodes?limit=1", "", 200},
		{"renter cannot make join tokens", renter1Secret, "POST", "/v1/join-tokens", `{"name":"t"}`, 403},

		{"renter cannot top up", renter1Secret, "POST", "/v1/accounts/" + renter1Acct.ID + "/topup", `{"amount_micros":1}`, 403},
		{"provider cannot top up", provider1Secret, "POST", "/v1/accounts/" + renter1Acct.ID + "/topup", `{"amount_micros":1}`, 403},
		{"renter sees own balance", renter1Secret, "GET", "/v1/accounts/" + renter1Acct.ID + "/balance", "", 200},
		{"renter cannot see another's balance", renter2Secret, "GET", "/v1/accounts/" + renter1Acct.ID + "/balance", "", 404},
		{"renter cannot list another's transfers", renter2Secret, "GET", "/v1/transfers?account_id=" + renter1Acct.ID, "", 404},
		{"admin sees any balance", f.AdminSecret, "GET", "/v1/accounts/" + renter1Acct.ID + "/balance", "", 200},

		{"renter cannot create accounts", renter1Secret, "POST", "/v1/accounts", `{"name":"x","role":"admin"}`, 403},
		{"provider cannot list accounts", provider1Secret, "GET", "/v1/accounts", "", 403},
		{"admin lists providers a page at a time", f.AdminSecret, "GET", "/v1/accounts?role=provider&limit=1&after=" + renter1Acct.ID, "", 200},
		{"renter sees own account", renter1Secret, "GET", "/v1/accounts/" + renter1Acct.ID, "", 200},
		{"renter cannot see another's account", renter2Secret, "GET", "/v1/accounts/" + renter1Acct.ID, "", 404},
		{"admin sees any account", f.AdminSecret, "GET", "/v1/accounts/" + renter1Acct.ID, "", 200},
		{"renter cannot read the summary", renter1Secret, "GET", "/v1/summary", "", 403},
		{"admin reads the summary", f.AdminSecret, "GET", "/v1/summary", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request(t, tt.method, f.URL+tt.path, tt.secret, tt.body)
			req.Header.Set("Idempotency-Key", "k1")
			got := mustDo(t, req)
			if got.Status != tt.wantStatus {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, got.Status, got.Body, tt.wantStatus)
			}
			if tt.wantStatus >= 400 {
				want := map[int]string{403: idlegrid.EFORBIDDEN, 404: idlegrid.ENOTFOUND}[tt.wantStatus]
				if e := got.Err(t); e.Code != want {
					t.Errorf("code = %q, want %q", e.Code, want)
				}
			}
		})
	}
}

// TestAPI_badRequests checks that every mistake a caller can make is a 4xx
// that names what is wrong.
func TestAPI_badRequests(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	_, renterAcct, renterSecret := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	huge := `{"name":"` + strings.Repeat("x", httpapi.DefaultMaxBodyBytes) + `"}`

	tests := []struct {
		name         string
		secret       string
		method, path string
		body         string
		contentType  string
		wantStatus   int
		wantCode     string
		wantField    string
		wantText     string
	}{
		{name: "unknown field", secret: renterSecret, method: "POST", path: "/v1/jobs",
			body: `{"image":"ghcr.io/a/b:1","gpus":1,"gpuz":2}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "gpuz", wantText: "unknown field"},
		{name: "bad spec names the field", secret: renterSecret, method: "POST", path: "/v1/jobs",
			body:       `{"image":"ghcr.io/a/b:1","gpus":0,"max_price_micros_per_gpu_hour":1000000,"duration_seconds":60}`,
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "job.gpus", wantText: "between 1 and 16"},
		{name: "wrong type", secret: renterSecret, method: "POST", path: "/v1/jobs",
			body: `{"gpus":"two"}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "gpus", wantText: "integer"},
		{name: "malformed JSON", secret: renterSecret, method: "POST", path: "/v1/jobs",
			body: `{"gpus":1,}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantText: "malformed JSON"},
		{name: "cut short", secret: renterSecret, method: "POST", path: "/v1/jobs",
			body: `{"gpus":1`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantText: "malformed"},
		{name: "trailing data", secret: renterSecret, method: "POST", path: "/v1/keys",
			body: `{"name":"a"}{"name":"b"}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantText: "after the JSON value"},
		{name: "not an object", secret: renterSecret, method: "POST", path: "/v1/keys",
			body: `["a"]`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantText: "JSON object"},
		{name: "empty body", secret: renterSecret, method: "POST", path: "/v1/keys",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantText: "empty"},
		{name: "bad time", secret: renterSecret, method: "POST", path: "/v1/jobs",
			body: `{"deadline":"tomorrow"}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "deadline", wantText: "RFC 3339"},
		{name: "a time that is not a string", secret: renterSecret, method: "POST", path: "/v1/jobs",
			body: `{"deadline":12345}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "deadline", wantText: "RFC 3339 time string"},
		{name: "a time in a list that is not a string", secret: renterSecret, method: "PUT", path: "/v1/nodes/node_x/schedule",
			body:       `{"schedule":{"mode":"windows","one_off":[{"start":"2026-01-02T15:04:05Z","end":"2026-01-02T16:04:05Z"},{"start":1}]}}`,
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "schedule.one_off[1].start", wantText: "got 1"},
		{name: "a key's routing price that is not an object", secret: renterSecret, method: "PUT", path: "/v1/keys/key_x/routing",
			body: `{"max_price":"x"}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "routing.max_price", wantText: "must be an object"},
		{name: "an image by a digest that is not one", secret: renterSecret, method: "POST", path: "/v1/jobs",
			body:       `{"kind":"training","image":"x@sha256:zz","gpus":1,"tier":"silver","max_price_micros_per_gpu_hour":1000000,"duration_seconds":600}`,
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "job.image", wantText: "not an image reference"},
		{name: "a spend limit left out", secret: f.AdminSecret, method: "PUT", path: "/v1/accounts/" + renterAcct.ID + "/spend-limit",
			body: `{}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "limit_micros", wantText: "required"},
		{name: "a spend limit of null", secret: f.AdminSecret, method: "PUT", path: "/v1/accounts/" + renterAcct.ID + "/spend-limit",
			body: `null`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "limit_micros", wantText: "required"},
		{name: "a key's spend limit left out", secret: renterSecret, method: "PUT", path: "/v1/keys/key_x/spend-limit",
			body: `{"limit_micros":null}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "limit_micros", wantText: "required"},
		{name: "a query parameter without a name", secret: renterSecret, method: "GET", path: "/v1/jobs?=5",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "query", wantText: "no name"},
		{name: "log tail after a line", secret: renterSecret, method: "GET", path: "/v1/leases/lease_x/logs?after=5&tail=3",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "tail", wantText: "tail (the last N lines) or after"},
		{name: "a registry port past 65535", secret: renterSecret, method: "PUT", path: "/v1/registry-logins/1.2.3.4:99999",
			body: `{"username":"u","password":"p"}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "registry", wantText: "between 1 and 65535"},
		{name: "a registry username across lines", secret: renterSecret, method: "PUT", path: "/v1/registry-logins/ghcr.io",
			body: `{"username":"acme\nbot","password":"p"}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "username", wantText: "printable"},
		{name: "dispute evidence over the limit", secret: f.AdminSecret, method: "POST", path: "/v1/disputes",
			body:       `{"offence":"fake_hardware","provider_id":"acct_x","harm_micros":0,"evidence":"` + strings.Repeat("x", 65200) + `"}`,
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "dispute.evidence", wantText: "at most 8192 bytes"},
		{name: "a dispute's resolution over the limit", secret: f.AdminSecret, method: "POST", path: "/v1/disputes/dispute_x/dismiss",
			body:       `{"resolution":"` + strings.Repeat("x", 1001) + `"}`,
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "resolution", wantText: "at most 1000 bytes"},
		{name: "not JSON", secret: renterSecret, method: "POST", path: "/v1/keys",
			body: `name=a`, contentType: "application/x-www-form-urlencoded",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "Content-Type"},
		{name: "oversized body", secret: renterSecret, method: "POST", path: "/v1/keys",
			body: huge, wantStatus: 413, wantCode: idlegrid.ETOOLARGE},
		{name: "unknown state", secret: renterSecret, method: "GET", path: "/v1/jobs?state=queued,bogus",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "state", wantText: "bogus"},
		{name: "bad limit", secret: renterSecret, method: "GET", path: "/v1/jobs?limit=ten",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "limit"},
		{name: "negative limit", secret: renterSecret, method: "GET", path: "/v1/leases?limit=-1",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "limit"},
		{name: "unknown parameter", secret: renterSecret, method: "GET", path: "/v1/jobs?colour=red",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "colour"},
		{name: "repeated parameter", secret: renterSecret, method: "GET", path: "/v1/jobs?limit=1&limit=2",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "limit"},
		{name: "not a region", secret: renterSecret, method: "GET", path: "/v1/nodes?gpu_model=L40S&region=eu-west,EU-North",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "region", wantText: `"EU-North" is not a region`},
		{name: "not a node state", secret: renterSecret, method: "GET", path: "/v1/nodes?state=online,gone",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "state", wantText: `unknown value "gone"; use a comma-separated list of online, offline, lost, retired`},
		{name: "not a node's name", secret: renterSecret, method: "GET", path: "/v1/nodes?name=barn%201",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "name", wantText: `"barn 1" is not a node's name`},
		{name: "too many models", secret: renterSecret, method: "GET", path: "/v1/nodes?gpu_model=" + strings.Repeat("A,", 33),
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "gpu_model", wantText: "at most 32 models"},
		{name: "no nodes is not a list", secret: renterSecret, method: "GET", path: "/v1/nodes?limit=0",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "limit"},
		{name: "not a tier", secret: renterSecret, method: "GET", path: "/v1/nodes?tier=platinum&sort=price",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "tier", wantText: `got "platinum"`},
		{name: "not an order", secret: renterSecret, method: "GET", path: "/v1/nodes?sort=cheapest",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "sort", wantText: "must be oldest, price or reliability"},
		{name: "a name longer than any", secret: renterSecret, method: "GET", path: "/v1/jobs?name=" + strings.Repeat("x", 101),
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "name", wantText: "at most 100 characters"},
		{name: "a page after no node", secret: renterSecret, method: "GET", path: "/v1/nodes?after=node_missing&sort=price",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "after", wantText: "the last node of the page before"},
		{name: "no GPUs", secret: renterSecret, method: "GET", path: "/v1/nodes?min_gpus=0",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "min_gpus", wantText: "between 1 and 64"},
		{name: "a watch's wait not a number", secret: renterSecret, method: "GET", path: "/v1/jobs/job_x/watch?wait=soon",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "wait"},
		{name: "more free GPUs than a node has", secret: renterSecret, method: "GET", path: "/v1/nodes?min_free_gpus=65",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "min_free_gpus", wantText: "between 1 and 64"},
		{name: "a price above any cap", secret: renterSecret, method: "GET", path: "/v1/nodes?max_price_micros_per_gpu_hour=1000000001",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "max_price_micros_per_gpu_hour"},
		{name: "a NUL in the path", secret: renterSecret, method: "GET", path: "/v1/jobs/job_%00",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "path", wantText: "UTF-8 text without the NUL character"},
		{name: "not UTF-8 in the path", secret: renterSecret, method: "GET", path: "/v1/leases/%FF%FE/logs",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "path"},
		{name: "not UTF-8 in the query", secret: renterSecret, method: "GET", path: "/v1/nodes?gpu_model=%FF",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "gpu_model"},
		{name: "a NUL in a name", secret: renterSecret, method: "POST", path: "/v1/keys",
			body: `{"name":"lap\u0000top"}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "name"},
		{name: "a NUL deep in a spec", secret: renterSecret, method: "POST", path: "/v1/jobs",
			body: `{"image":"ghcr.io/a/b:1","command":["run"],"env":{"HOME":"/\u0000"},"gpus":1}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "env.HOME"},
		{name: "bad log cursor", secret: renterSecret, method: "GET", path: "/v1/leases/lease_x/logs?after=-5",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "after"},
		{name: "log tail and limit", secret: renterSecret, method: "GET", path: "/v1/leases/lease_x/logs?tail=5&limit=5",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "tail"},
		{name: "top-up without idempotency key", secret: f.AdminSecret, method: "POST", path: "/v1/accounts/" + renterAcct.ID + "/topup",
			body: `{"amount_micros":1000}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "Idempotency-Key"},
		{name: "bad role", secret: f.AdminSecret, method: "POST", path: "/v1/accounts",
			body: `{"name":"x","role":"king"}`, wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "account.role"},
		{name: "bad role to list", secret: f.AdminSecret, method: "GET", path: "/v1/accounts?role=king",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "role"},
		{name: "accounts after no account", secret: f.AdminSecret, method: "GET", path: "/v1/accounts?after=acct_nosuch",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "after"},
		{name: "unknown endpoint", secret: renterSecret, method: "GET", path: "/v1/nope",
			wantStatus: 404, wantCode: idlegrid.ENOTFOUND, wantText: "no such endpoint"},
		{name: "wrong method", secret: renterSecret, method: "DELETE", path: "/v1/jobs",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantText: "use GET, POST"},
		{name: "missing job", secret: renterSecret, method: "GET", path: "/v1/jobs/job_nosuch",
			wantStatus: 404, wantCode: idlegrid.ENOTFOUND},
		{name: "a query parameter a route does not take", secret: renterSecret, method: "GET", path: "/v1/jobs/job_nosuch?verbose=1",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "verbose"},
		{name: "a query parameter on a cancel", secret: renterSecret, method: "POST", path: "/v1/jobs/job_nosuch/cancel?force=1",
			wantStatus: 400, wantCode: idlegrid.EINVALID, wantField: "force"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request(t, tt.method, f.URL+tt.path, tt.secret, tt.body)
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			got := mustDo(t, req)
			if got.Status != tt.wantStatus {
				t.Fatalf("status = %d %s, want %d", got.Status, got.Body, tt.wantStatus)
			}
			e := got.Err(t)
			if e.Code != tt.wantCode || e.Field != tt.wantField {
				t.Errorf("code, field = %q, %q; want %q, %q (%s)", e.Code, e.Field, tt.wantCode, tt.wantField, e.Message)
			}
			if !strings.Contains(e.Message, tt.wantText) {
				t.Errorf("message = %q, want it to contain %q", e.Message, tt.wantText)
			}
			if e.Field != "" && !strings.HasPrefix(e.Message, e.Field+": ") {
				t.Errorf("message = %q, want it to start with the field %q", e.Message, e.Field)
			}
		})
	}
}

func TestAPI_emptyListsAreArrays(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	_, _, secret := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	got := mustDo(t, request(t, "GET", f.URL+"/v1/jobs", secret, ""))
	if got.Status != 200 || strings.TrimSpace(string(got.Body)) != `{"jobs":[]}` {
		t.Errorf("answer = %d %s, want 200 {\"jobs\":[]}", got.Status, got.Body)
	}
}

// TestAPI_everyProblem: a spec wrong in several fields is refused with
// each named in problems, and the client gives them back as one error.
func TestAPI_everyProblem(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	renter, _, secret := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	body := `{"image":"ghcr.io/a/b:1","gpus":0,"tier":"platinum","max_price_micros_per_gpu_hour":1000000,"duration_seconds":0}`
	got := mustDo(t, request(t, "POST", f.URL+"/v1/jobs", secret, body))
	e := got.Err(t)
	want := []wire.ErrorProblem{
		{Field: "job.gpus", Message: "job.gpus: must be between 1 and 16"},
		{Field: "job.tier", Message: `job.tier: must be gold, silver or bronze, got "platinum"`},
		{Field: "job.duration_seconds", Message: "job.duration_seconds: must be between 1 and 2592000 (30 days)"},
	}
	if got.Status != http.StatusBadRequest || e.Code != idlegrid.EINVALID || e.Field != "job.gpus" || !reflect.DeepEqual(e.Problems, want) {
		t.Fatalf("answer = %d %s; want 400, field job.gpus, problems %+v", got.Status, got.Body, want)
	}
	if !strings.HasPrefix(e.Message, want[0].Message+"; ") || !strings.HasSuffix(e.Message, "; "+want[2].Message) {
		t.Errorf("message %q: want every problem's, in order", e.Message)
	}
	_, err := renter.SubmitJob(t.Context(), idlegrid.JobSpec{Image: "ghcr.io/a/b:1", GPUs: 0, Tier: "platinum", MaxPriceMicrosPerGPUHour: 1_000_000})
	var ce *idlegrid.Error
	if !errors.As(err, &ce) || len(ce.More) != 2 {
		t.Fatalf("client error = %#v, want the first problem with two more", err)
	}
	for i, p := range ce.All() {
		if p.Code != idlegrid.EINVALID || p.Field != want[i].Field || p.Error() != want[i].Message {
			t.Errorf("client problem %d = %+v (%q), want %+v", i, p, p.Error(), want[i])
		}
	}
	// A node search names each parameter at fault.
	got = mustDo(t, request(t, "GET", f.URL+"/v1/nodes?min_vram_mb=-1&region=EU&tier=x&sort=y&limit=0&min_free_gpus=x&min_level=17", secret, ""))
	var fields []string
	for _, p := range got.Err(t).Problems {
		fields = append(fields, p.Field)
	}
	if want := []string{"limit", "min_free_gpus", "min_vram_mb", "min_level", "region", "tier", "sort"}; !slices.Equal(fields, want) {
		t.Errorf("node search problems: %s; want fields %v", got.Body, want)
	}
	// A single problem has no list.
	got = mustDo(t, request(t, "POST", f.URL+"/v1/jobs", secret, `{"image":"ghcr.io/a/b:1","gpus":0,"max_price_micros_per_gpu_hour":1000000,"duration_seconds":60}`))
	if e := got.Err(t); e.Field != "job.gpus" || e.Problems != nil {
		t.Errorf("one problem: %s; want field job.gpus and no problems list", got.Body)
	}
}

// TestAPI_internalError breaks the database under the server: the caller
// gets a 500 that says nothing of the cause.
func TestAPI_internalError(t *testing.T) {
	f := mustOpen(t, httpapi.Options{Logger: slog.New(slog.DiscardHandler)})
	f.Store.Close()
	got := mustDo(t, request(t, "GET", f.URL+"/v1/me", f.AdminSecret, ""))
	if got.Status != http.StatusInternalServerError {
		t.Fatalf("status = %d %s, want 500", got.Status, got.Body)
	}
	if e := got.Err(t); !reflect.DeepEqual(e, wire.ErrorDetail{Code: idlegrid.EINTERNAL, Message: "internal error"}) {
		t.Errorf("error = %+v, want only code internal and message \"internal error\"", e)
	}
}

// signed builds an agent request signed by key at the given time.
type signed struct {
	method, path string
	body         string
	key          ed25519.PrivateKey
	nodeID       string // empty: a join, carrying the public key
	at           time.Time
	protocol     string
	signPath     string // what was signed, when it differs from path
	signBody     string // what was signed, when it differs from body
}

func (s signed) request(tb testing.TB, base string) *http.Request {
	tb.Helper()
	req := request(tb, s.method, base+s.path, "", s.body)
	if s.nodeID != "" {
		req.Header.Set(nodekey.HeaderNode, s.nodeID)
	} else {
		req.Header.Set(nodekey.HeaderPublicKey, nodekey.PublicString(s.key.Public().(ed25519.PublicKey)))
	}
	req.Header.Set(nodekey.HeaderProtocol, s.protocol)
	ms := s.at.UnixMilli()
	signPath, signBody := s.path, s.body
	if s.signPath != "" {
		signPath = s.signPath
	}
	if s.signBody != "" {
		signBody = s.signBody
	}
	req.Header.Set(nodekey.HeaderTime, strconv.FormatInt(ms, 10))
	req.Header.Set(nodekey.HeaderSignature, nodekey.Sign(s.key, s.method, signPath, ms, []byte(signBody)))
	return req
}

func TestAPI_agentSignatures(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	provider, _, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	_, key, nodeID := f.mustNode(t, provider, "rig1")
	_, token, err := provider.CreateJoinToken(ctx, "spare", 5, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Not the body the node's client sent its offer with: signed in the
	// same millisecond, that request's signature would be this one's, and
	// good would be refused as its replay.
	offer, _ := json.Marshal(idlegrid.OfferRequest{Offer: testOffer("rig1"), AgentVersion: "test-signatures"})
	newKey := mustKey(t)
	joinBody := func(pub ed25519.PublicKey) string {
		b, _ := json.Marshal(idlegrid.JoinRequest{Token: token, PublicKey: nodekey.PublicString(pub), Offer: testOffer("rig2"), AgentVersion: "test"})
		return string(b)
	}
	now := time.Now()
	good := signed{method: "PUT", path: "/v1/agent/offer", body: string(offer), key: key, nodeID: nodeID, at: now, protocol: "1"}
	with := func(change func(*signed)) signed {
		s := good
		change(&s)
		return s
	}

	tests := []struct {
		name       string
		req        signed
		wantStatus int
		wantCode   string
		wantText   string
	}{
		{"good signature", good, 204, "", ""},
		{"the same request again", good, 401, idlegrid.EUNAUTHORIZED, "taken before"}, // a replay
		{"a field this server does not know", with(func(s *signed) {
			s.body = strings.Replace(s.body, "{", `{"from_a_newer_agent":true,`, 1)
		}), 204, "", ""},
		{"signed by another key", with(func(s *signed) { s.key = mustKey(t) }), 401, idlegrid.EUNAUTHORIZED, "bad node signature"},
		{"stale time", with(func(s *signed) { s.at = now.Add(-10 * time.Minute) }), 401, idlegrid.EUNAUTHORIZED, "clock"},
		{"time from the future", with(func(s *signed) { s.at = now.Add(10 * time.Minute) }), 401, idlegrid.EUNAUTHORIZED, "clock"},
		{"body changed after signing", with(func(s *signed) { s.signBody = `{}` }), 401, idlegrid.EUNAUTHORIZED, "bad node signature"},
		{"query changed after signing", signed{method: "GET", path: "/v1/agent/commands?wait=0", signPath: "/v1/agent/commands?wait=1",
			key: key, nodeID: nodeID, at: now, protocol: "1"}, 401, idlegrid.EUNAUTHORIZED, "bad node signature"},
		{"unknown node", with(func(s *signed) { s.nodeID = "node_nosuch" }), 401, idlegrid.EUNAUTHORIZED, "join again"},
		{"newer protocol", with(func(s *signed) { s.protocol = "2" }), 400, idlegrid.EINVALID, "upgrade"},
		{"no protocol", with(func(s *signed) { s.protocol = "" }), 400, idlegrid.EINVALID, "upgrade"},
		{"join with a body key that did not sign", signed{method: "POST", path: "/v1/agent/join", body: joinBody(mustKey(t).Public().(ed25519.PublicKey)),
			key: newKey, at: now, protocol: "1"}, 400, idlegrid.EINVALID, "public_key"},
		{"join signed by another key", signed{method: "POST", path: "/v1/agent/join", body: joinBody(newKey.Public().(ed25519.PublicKey)),
			key: newKey, at: now, protocol: "1", signBody: `{"token":"forged"}`}, 401, idlegrid.EUNAUTHORIZED, "bad node signature"},
		{"good join", signed{method: "POST", path: "/v1/agent/join", body: joinBody(newKey.Public().(ed25519.PublicKey)),
			key: newKey, at: now, protocol: "1"}, 201, "", ""},
		{"signed for another endpoint", signed{method: "POST", path: "/v1/agent/heartbeat", body: `{}`, key: key, nodeID: nodeID, at: now, protocol: "1", signPath: "/v1/agent/offer"},
			401, idlegrid.EUNAUTHORIZED, "bad node signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustDo(t, tt.req.request(t, f.URL))
			if got.Status != tt.wantStatus {
				t.Fatalf("status = %d %s, want %d", got.Status, got.Body, tt.wantStatus)
			}
			if tt.wantCode == "" {
				return
			}
			if e := got.Err(t); e.Code != tt.wantCode || !strings.Contains(e.Message, tt.wantText) {
				t.Errorf("error = %+v, want code %q and a message with %q", e, tt.wantCode, tt.wantText)
			}
		})
	}
}

// TestAPI_longPollCap checks that a long poll never waits past MaxWait,
// whatever the agent asks for.
func TestAPI_longPollCap(t *testing.T) {
	f := mustOpen(t, httpapi.Options{MaxWait: time.Millisecond})
	provider, _, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	agent, _, _ := f.mustNode(t, provider, "rig1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmds, err := agent.Commands(ctx, time.Hour)
	if err != nil {
		t.Fatalf("Commands: %v (the server should answer after MaxWait, not an hour)", err)
	}
	if len(cmds) != 0 {
		t.Errorf("commands = %+v, want none", cmds)
	}
}

// TestAPI_happyPath runs a job end to end through the public client: an
// admin makes a renter and a provider, the provider's agent joins and
// offers a GPU, the renter's job is placed, run, and paid for.
func TestAPI_happyPath(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, renterAcct, _ := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	provider, providerAcct, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	other, _, _ := f.mustAccount(t, "nosy", idlegrid.RoleRenter)

	const funds = 100 * idlegrid.MicrosPerUnit
	if _, err := f.Admin.TopUp(ctx, renterAcct.ID, funds, "first"); err != nil {
		t.Fatalf("top up: %v", err)
	}
	if b, err := f.Admin.TopUp(ctx, renterAcct.ID, funds, "first"); err != nil || b.Available != funds {
		t.Fatalf("repeated top up = %+v, %v; want available %s once", b, err, funds)
	}

	agent, nodeKey, nodeID := f.mustNode(t, provider, "rig1")
	if me, err := provider.Me(ctx); err != nil || me.ID != providerAcct.ID {
		t.Fatalf("provider Me = %+v, %v", me, err)
	}
	if n, err := provider.FindNode(ctx, nodeID); err != nil || n.State != idlegrid.NodeOnline {
		t.Fatalf("node = %+v, %v; want online", n, err)
	}

	job, err := renter.SubmitJob(ctx, testSpec())
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	start := mustStartCommand(t, agent, job.ID)
	lease := start.Lease
	if start.Job == nil || start.Job.Image != testSpec().Image {
		t.Errorf("start command job = %+v, want the job's spec", start.Job)
	}

	if err := agent.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
		t.Fatalf("report running: %v", err)
	}
	if _, err := agent.Heartbeat(ctx, idlegrid.HeartbeatRequest{Leases: []idlegrid.LeaseProgress{{LeaseID: lease.ID, Progress: 0.5}}}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	logs := idlegrid.LogBatch{Lines: []idlegrid.LogLine{
		{Seq: 1, At: f.Clock.Now(), Stream: "stdout", Text: "epoch 1"},
		{Seq: 2, At: f.Clock.Now(), Stream: "stderr", Text: "warning"},
	}}
	if err := agent.AppendLogs(ctx, lease.ID, logs); err != nil {
		t.Fatalf("append logs: %v", err)
	}
	// A watch of the job answers its view and version; asked with that
	// version, 304 (nil) while nothing changes, and the next change when
	// it comes.
	v, halfway, err := renter.WatchJob(ctx, job.ID, "", 0)
	if err != nil || halfway == "" || v.Job.ID != job.ID || len(v.Leases) != 1 || v.Leases[0].Progress != 0.5 {
		t.Fatalf("watch = %+v, %q, %v; want the job with its lease half done", v, halfway, err)
	}
	if v, again, err := renter.WatchJob(ctx, job.ID, halfway, 0); err != nil || v != nil || again != halfway {
		t.Errorf("watch with the version seen = %+v, %q, %v; want nothing new, the same version", v, again, err)
	}
	if _, _, err := other.WatchJob(ctx, job.ID, "", 0); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Errorf("another renter's watch err = %v, want not_found", err)
	}
	ended := make(chan *idlegrid.JobView, 1)
	go func() {
		v, _, err := renter.WatchJob(ctx, job.ID, halfway, time.Minute)
		if err != nil {
			t.Errorf("watch across the end: %v", err)
		}
		ended <- v
	}()
	f.Clock.Advance(90 * time.Second) // the lease runs 90 GPU-seconds
	// The node signs receipts for them.
	f.mustSendReceipts(t, agent, nodeKey, lease.ID, 60, 30)
	exit := 0
	if err := agent.ReportLease(ctx, lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &exit, Progress: 1}); err != nil {
		t.Fatalf("report succeeded: %v", err)
	}
	if v = <-ended; v == nil || v.Job.State != idlegrid.JobSucceeded { // the receipts may have woken it first
		v, _, err = renter.WatchJob(ctx, job.ID, "", 0)
	}
	if err != nil || v.Job.State != idlegrid.JobSucceeded {
		t.Errorf("watch after the end = %+v, %v; want the job succeeded", v, err)
	}

	got, err := renter.FindJob(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantCharge := idlegrid.CostOf(lease.PriceMicrosPerGPUHour, 90)
	if got.State != idlegrid.JobSucceeded || got.ChargedMicros != wantCharge || wantCharge <= 0 {
		t.Errorf("job = %s charged %s, want succeeded charged %s", got.State, got.ChargedMicros, wantCharge)
	}
	bal, err := renter.Balance(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := (idlegrid.Balance{AccountID: renterAcct.ID, Available: funds - wantCharge, Spent: wantCharge}); *bal != want {
		t.Errorf("renter balance = %+v, want %+v", *bal, want)
	}
	if pb, err := provider.Balance(ctx, ""); err != nil || pb.Pending <= 0 || pb.Pending > wantCharge {
		t.Errorf("provider balance = %+v, %v; want pending earnings in (0, %s]", pb, err, wantCharge)
	}

	lines, err := renter.LeaseLogs(ctx, lease.ID, 0, 0)
	if err != nil || len(lines) != 2 || lines[0].Text != "epoch 1" || lines[1].Stream != "stderr" {
		t.Errorf("logs = %+v, %v; want the two lines the agent sent", lines, err)
	}
	if tail, err := renter.LeaseLogTail(ctx, lease.ID, 1); err != nil || len(tail) != 1 || tail[0].Seq != lines[1].Seq {
		t.Errorf("the last line = %+v, %v; want line %d", tail, err, lines[1].Seq)
	}
	l, events, err := renter.FindLease(ctx, lease.ID)
	if err != nil || l.State != idlegrid.LeaseSucceeded || len(events) < 2 {
		t.Errorf("lease = %+v with %d events, %v; want succeeded with its history", l, len(events), err)
	}
	if leases, err := provider.ListLeases(ctx, idlegrid.LeaseFilter{NodeID: nodeID}); err != nil || len(leases) != 1 {
		t.Errorf("provider's leases = %d, %v; want 1", len(leases), err)
	}
	if _, _, err := other.FindLease(ctx, lease.ID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Errorf("another renter's FindLease err = %v, want not_found", err)
	}
	if ts, err := renter.ListTransfers(ctx, idlegrid.TransferFilter{}); err != nil || len(ts) < 3 {
		t.Errorf("renter transfers = %d, %v; want the top-up, the hold and the settlement", len(ts), err)
	}
	sum, err := f.Admin.Summary(ctx)
	if err != nil || sum.JobsByState[idlegrid.JobSucceeded] != 1 || sum.SpentMicros != wantCharge {
		t.Errorf("summary = %+v, %v; want one succeeded job and %s spent", sum, err, wantCharge)
	}
	if _, err := renter.CancelJob(ctx, job.ID); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
		t.Errorf("cancelling a finished job err = %v, want conflict", err)
	}
}

// mustStartCommand long-polls until the agent is told to start a lease of
// jobID. The server wakes the poll when it places the job; no test sleeps.
func mustStartCommand(tb testing.TB, agent *client.AgentClient, jobID string) idlegrid.Command {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		cmds, err := agent.Commands(ctx, 10*time.Second)
		if err != nil {
			tb.Fatalf("commands: %v", err)
		}
		for _, c := range cmds {
			if c.Kind == idlegrid.CommandStart && c.Lease != nil && c.Lease.JobID == jobID {
				return c
			}
		}
	}
	tb.Fatalf("no start command for %s in time", jobID)
	return idlegrid.Command{}
}
