package httpapi_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"flag"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/pgtest"
)

// fuzzRoute is one of the API's routes as FuzzAPI calls it: its method,
// its path with {id} where an ID goes, and a body it would take, the seed
// the fuzzer mutates.
type fuzzRoute struct {
	method, path, body string
	id                 int  // which of the market's IDs the seeds put for {id}
	agent              bool // signed by the node's key rather than an API key
	join               bool // signed by a key that has not joined yet, naming it
}

// The market's IDs, by their index in fuzzMarket.ids.
const (
	idProvider = iota
	idRenter
	idNode
	idJob
	idLease
	idKey
)

// fuzzRoutes are the routes FuzzAPI calls, every one the API serves with a
// body or an ID or a query, the gateway's aside (its own fuzz test reads
// its requests).
var fuzzRoutes = []fuzzRoute{
	{method: "POST", path: "/v1/accounts", body: `{"name":"carol","role":"renter"}`},
	{method: "GET", path: "/v1/accounts"},
	{method: "GET", path: "/v1/accounts?role=renter&after={id}&limit=1", id: idProvider},
	{method: "GET", path: "/v1/accounts/{id}", id: idRenter},
	{method: "GET", path: "/v1/me"},
	{method: "GET", path: "/v1/readyz"},
	{method: "GET", path: "/metrics"},
	{method: "GET", path: "/v1/keys"},
	{method: "GET", path: "/v1/join-tokens"},
	{method: "GET", path: "/v1/balance"},
	{method: "GET", path: "/v1/summary"},
	{method: "GET", path: "/v1/spend-limits"},
	{method: "GET", path: "/v1/quarantine"},
	{method: "GET", path: "/v1/trust-policy"},
	{method: "GET", path: "/v1/disputes?provider_id={id}&state=open", id: idProvider},
	{method: "GET", path: "/v1/disputes?before={id}&limit=2", id: idLease},
	{method: "GET", path: "/v1/keys/{id}/routing", id: idKey},
	{method: "DELETE", path: "/v1/keys/{id}/routing", id: idKey},
	{method: "DELETE", path: "/v1/keys/{id}/spend-limit", id: idKey},
	{method: "POST", path: "/v1/disputes/{id}/dismiss", body: `{"resolution":"no case"}`},
	{method: "POST", path: "/v1/keys", body: `{"name":"laptop"}`},
	{method: "DELETE", path: "/v1/keys/{id}", id: idKey},
	{method: "POST", path: "/v1/join-tokens", body: `{"name":"rack-3","max_uses":5,"ttl_seconds":86400}`},
	{method: "DELETE", path: "/v1/join-tokens/{id}"},
	{method: "GET", path: "/v1/nodes?gpu_model=RTX4090,L40S&region=eu-west&min_gpus=1&min_vram_mb=24576&tier=silver&max_price_micros_per_gpu_hour=2500000&sort=price&limit=10"},
	{method: "GET", path: "/v1/nodes?min_free_gpus=1&gpu_model=RTX4090&sort=reliability"},
	{method: "GET", path: "/v1/nodes?name=barn-1"},
	{method: "GET", path: "/v1/nodes?state=offline,lost&limit=5"},
	{method: "GET", path: "/v1/nodes?after={id}&limit=5&tier=bronze&sort=price", id: idNode},
	{method: "GET", path: "/v1/nodes/{id}", id: idNode},
	{method: "GET", path: "/v1/nodes/{id}/schedule", id: idNode},
	{method: "PUT", path: "/v1/nodes/{id}/schedule", id: idNode, body: `{"schedule":{"mode":"windows","time_zone":"Europe/Paris","weekly":[{"days":["sat","sun"],"start":"00:00","end":"24:00"}]}}`},
	{method: "DELETE", path: "/v1/nodes/{id}/schedule", id: idNode},
	{method: "PUT", path: "/v1/nodes/{id}/drain", id: idNode},
	{method: "DELETE", path: "/v1/nodes/{id}/drain", id: idNode},
	{method: "POST", path: "/v1/jobs", body: `{"name":"train","kind":"training","image":"ghcr.io/acme/trainer:1.2","gpus":1,"tier":"silver","max_price_micros_per_gpu_hour":5000000,"duration_seconds":3600,"datasets":[{"name":"c4","size_gb":20}],"deadline":"2030-01-01T00:00:00Z"}`},
	{method: "GET", path: "/v1/jobs?state=queued,running&limit=5"},
	{method: "GET", path: "/v1/jobs?name=train-&limit=5&before={id}", id: idJob},
	{method: "GET", path: "/v1/jobs/{id}", id: idJob},
	{method: "POST", path: "/v1/jobs/{id}/cancel", id: idJob},
	{method: "GET", path: "/v1/jobs/{id}/explain", id: idJob},
	{method: "GET", path: "/v1/jobs/{id}/watch?wait=0", id: idJob},
	{method: "GET", path: "/v1/market?gpu_model=RTX4090&region=eu-west&window=24h"},
	{method: "GET", path: "/v1/leases?state=running&job_id={id}", id: idJob},
	{method: "GET", path: "/v1/leases/{id}", id: idLease},
	{method: "GET", path: "/v1/leases/{id}/logs?after=0&limit=100", id: idLease},
	{method: "GET", path: "/v1/leases/{id}/logs?tail=60", id: idLease},
	{method: "GET", path: "/v1/leases/{id}/receipts", id: idLease},
	{method: "GET", path: "/v1/audit/head"},
	{method: "GET", path: "/v1/audit/consistency?from=1&to=2"},
	{method: "GET", path: "/v1/audit/entries?from=0&limit=3&tree_size=2&account_id={id}", id: idRenter},
	{method: "GET", path: "/v1/nodes/{id}/reputation", id: idNode},
	{method: "GET", path: "/v1/providers/{id}/reputation", id: idProvider},
	{method: "GET", path: "/v1/providers/{id}/fill?days=7", id: idProvider},
	{method: "POST", path: "/v1/accounts/{id}/topup", id: idRenter, body: `{"amount_micros":25000000}`},
	{method: "GET", path: "/v1/accounts/{id}/balance", id: idRenter},
	{method: "GET", path: "/v1/transfers?account_id={id}&limit=1", id: idRenter},
	{method: "POST", path: "/v1/payouts", body: `{"amount_micros":1000000}`},
	{method: "GET", path: "/v1/payouts?state=requested"},
	{method: "GET", path: "/v1/payouts?before={id}&limit=1", id: idJob},
	{method: "POST", path: "/v1/payouts/{id}/settle", body: `{"reason":"wire-42"}`},
	{method: "POST", path: "/v1/payouts/{id}/reject", body: `{"reason":"bank details wrong"}`},
	{method: "GET", path: "/v1/statements?account_id={id}&month=2026-11&format=csv", id: idProvider},
	{method: "GET", path: "/v1/notices?limit=5"},
	{method: "GET", path: "/v1/notices?before={id}", id: idLease},
	{method: "PUT", path: "/v1/accounts/{id}/spend-limit", id: idRenter, body: `{"limit_micros":5000000}`},
	{method: "DELETE", path: "/v1/accounts/{id}/spend-limit", id: idRenter},
	{method: "PUT", path: "/v1/keys/{id}/spend-limit", id: idKey, body: `{"limit_micros":5000000}`},
	{method: "PUT", path: "/v1/keys/{id}/routing", id: idKey, body: `{"sort":"price","region":["eu-west"],"max_price":{"prompt":1,"completion":2},"order":["{id}"]}`},
	{method: "GET", path: "/v1/registry-logins?account_id={id}", id: idRenter},
	{method: "PUT", path: "/v1/registry-logins/ghcr.io", body: `{"username":"acme-bot","password":"ghp_x"}`},
	{method: "DELETE", path: "/v1/registry-logins/ghcr.io"},
	{method: "DELETE", path: "/v1/registry-logins/ghcr.io?account_id={id}", id: idRenter},
	{method: "POST", path: "/v1/bonds", body: `{"provider_id":"{id}","amount_micros":1000000}`, id: idProvider},
	{method: "POST", path: "/v1/bonds/release", body: `{"amount_micros":1000000}`},
	{method: "POST", path: "/v1/disputes", id: idLease, body: `{"offence":"mismatched_result","lease_id":"{id}","evidence":"the output differs"}`},
	{method: "GET", path: "/v1/disputes/{id}"},
	{method: "POST", path: "/v1/disputes/{id}/uphold", body: `{"resolution":"checked"}`},
	{method: "GET", path: "/v1/verifications?provider_id={id}&limit=5", id: idProvider},
	{method: "GET", path: "/v1/nodes/{id}/attestation", id: idNode},
	{method: "POST", path: "/v1/nodes/{id}/challenge", id: idNode, body: `{"gpu_uuid":"GPU-rig-0"}`},
	{method: "POST", path: "/v1/nodes/{id}/quarantine", id: idNode, body: `{"reason":"failed a spot check"}`},
	{method: "POST", path: "/v1/nodes/{id}/quarantine/lift", id: idNode, body: `{"note":"fixed"}`},
	{method: "GET", path: "/v1/nodes/{id}/challenges?state=issued,failed&limit=2", id: idNode},
	{method: "GET", path: "/v1/quarantine?state=all&before={id}&limit=1", id: idNode},
	{method: "GET", path: "/v1/verifications?before={id}&limit=1", id: idLease},

	{agent: true, join: true, method: "POST", path: "/v1/agent/join", body: `{"token":"igj_rj7dekvi7oyxwd7ah4vlnuxae4m4osjoeilnibxat35ivn4mx5oa","public_key":"{pub}","offer":{"name":"rig2","gpus":[{"uuid":"GPU-rig2-0","model":"L40S","vram_mb":49152}],"region":"eu-west","residency":"EU","schedule":{"mode":"always"},"ask":{"floor_micros_per_gpu_hour":{"silver":2000000}}},"agent_version":"0.1.0"}`},
	{agent: true, method: "PUT", path: "/v1/agent/offer", body: `{"offer":{"name":"rig","gpus":[{"uuid":"GPU-rig-0","model":"RTX4090","vram_mb":24576}],"cpu_cores":16,"ram_mb":65536,"disk_gb":500,"region":"eu-west","residency":"EU","schedule":{"mode":"always"},"ask":{"floor_micros_per_gpu_hour":{"silver":2000000}}},"agent_version":"0.1.0"}`},
	{agent: true, method: "POST", path: "/v1/agent/heartbeat", id: idLease, body: `{"leases":[{"lease_id":"{id}","progress":0.5,"checkpoint_at":"2026-12-01T11:58:00Z","checkpoint_age_seconds":42.5}],"model_queues":[{"model":"llama-3.1-8b","queued":3}]}`},
	{agent: true, method: "GET", path: "/v1/agent/commands?wait=1"},
	{agent: true, method: "POST", path: "/v1/agent/goodbye"},
	{agent: true, method: "POST", path: "/v1/agent/leases/{id}/report", id: idLease, body: `{"state":"failed","exit_code":137,"fault":"provider","message":"out of memory","progress":0.4}`},
	{agent: true, method: "POST", path: "/v1/agent/leases/{id}/logs", id: idLease, body: `{"lines":[{"seq":1,"at":"2026-11-30T09:07:40Z","stream":"stdout","text":"epoch 1"}]}`},
	{agent: true, method: "POST", path: "/v1/agent/leases/{id}/receipts", id: idLease, body: `{"receipts":[{"lease_id":"{id}","seq":1,"start":"2026-11-30T09:08:40Z","end":"2026-11-30T09:09:40Z","gpu_seconds":60,"avg_util_pct":87,"energy_wh":11,"prev_hash":"","signature":"AAAA"}]}`},
	{agent: true, method: "GET", path: "/v1/agent/leases/{id}/receipts/last", id: idLease},
	{agent: true, method: "GET", path: "/v1/agent/node"},
	{method: "POST", path: "/v1/agent/join-tokens/check", body: `{"token":"igj_rj7dekvi7oyxwd7ah4vlnuxae4m4osjoeilnibxat35ivn4mx5oa"}`},
	{agent: true, method: "POST", path: "/v1/agent/attestation", id: idNode, body: `{"attestation":{"node_id":"{id}","signed_at":"2026-11-30T09:07:41.2Z","signature":"AAAA","fingerprint":{"gpus":[{"uuid":"GPU-rig-0","model":"RTX4090","vram_mb":24576,"pci_bus_id":"00000000:18:00.0"}]}},"challenge_runner":"simulated"}`},
	{agent: true, method: "GET", path: "/v1/agent/challenges"},
	{agent: true, method: "POST", path: "/v1/agent/challenges/{id}/answer", body: `{"row_hashes":"AAAA","digest":"c00fcd84","elapsed_nanos":4011,"vram_mb":79462}`},
}

// fuzzMarket is the market FuzzAPI's requests land in: a real
// coordinator on SQLite or PostgreSQL behind the real API, with an
// account of each role, a node that runs a job's lease, and the IDs a
// request may name.
type fuzzMarket struct {
	*fixture
	secrets [3]string // admin, provider, renter
	nodeID  string
	nodeKey ed25519.PrivateKey
	ids     []string // a provider, renter, node, job, lease and the renter's spare key
}

func newFuzzMarket(tb testing.TB, dsn string) *fuzzMarket {
	f := mustOpenOn(tb, dsn, httpapi.Options{Logger: slog.New(slog.DiscardHandler), MaxWait: time.Millisecond})
	ctx := context.Background()
	provider, provAcct, provSecret := f.mustAccount(tb, "prov", idlegrid.RoleProvider)
	renter, renterAcct, renterSecret := f.mustAccount(tb, "ren", idlegrid.RoleRenter)
	if _, err := f.Admin.TopUp(ctx, renterAcct.ID, 100*idlegrid.MicrosPerUnit, "fuzz"); err != nil {
		tb.Fatal(err)
	}
	agent, key, nodeID := f.mustNode(tb, provider, "rig")
	job, err := renter.SubmitJob(ctx, testSpec())
	if err != nil {
		tb.Fatal(err)
	}
	lease := mustStartCommand(tb, agent, job.ID).Lease
	spare, _, err := renter.CreateAPIKey(ctx, "spare") // one a request may revoke
	if err != nil {
		tb.Fatal(err)
	}
	return &fuzzMarket{fixture: f, secrets: [3]string{f.AdminSecret, provSecret, renterSecret},
		nodeID: nodeID, nodeKey: key,
		ids: []string{provAcct.ID, renterAcct.ID, nodeID, job.ID, lease.ID, spare.ID}}
}

// request builds route's request as caller, with id in place of {id}
// (when empty, the market's ID the caller names), the query and the body.
// A caller is a role (caller%3: admin, provider, renter; the node for
// agent routes) and one of the market's IDs (caller/3).
func (m *fuzzMarket) request(tb testing.TB, r fuzzRoute, caller uint8, id, query string, body []byte) *http.Request {
	if id == "" {
		id = m.idOf(caller)
	}
	path := strings.ReplaceAll(r.path, "{id}", url.PathEscape(id))
	u, err := url.Parse(m.URL + path)
	if err != nil {
		tb.Fatalf("route %s: %v", path, err)
	}
	if query != "" {
		u.RawQuery = printable(query)
	}
	req, err := http.NewRequest(r.method, u.String(), strings.NewReader(string(body)))
	if err != nil {
		tb.Fatalf("%s %s: %v", r.method, u, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if !r.agent {
		req.Header.Set("Authorization", "Bearer "+m.secrets[caller%3])
		req.Header.Set("Idempotency-Key", "fuzz-"+strconv.Itoa(int(caller)))
		return req
	}
	m.Clock.Advance(time.Millisecond) // a fresh signing time, so no request is a replay
	ms := m.Clock.Now().UnixMilli()
	if r.join {
		req.Header.Set(nodekey.HeaderPublicKey, m.publicKey())
	} else {
		req.Header.Set(nodekey.HeaderNode, m.nodeID)
	}
	req.Header.Set(nodekey.HeaderProtocol, strconv.Itoa(idlegrid.ProtocolVersion))
	req.Header.Set(nodekey.HeaderTime, strconv.FormatInt(ms, 10))
	req.Header.Set(nodekey.HeaderSignature, nodekey.Sign(m.nodeKey, r.method, u.RequestURI(), ms, body))
	return req
}

// publicKey is the node's public key, as a join names it.
func (m *fuzzMarket) publicKey() string {
	return nodekey.PublicString(m.nodeKey.Public().(ed25519.PublicKey))
}

// idOf is the market's ID that caller names.
func (m *fuzzMarket) idOf(caller uint8) string { return m.ids[int(caller/3)%len(m.ids)] }

// printable keeps the bytes of q that may stand in a request line as
// they are, so that what reaches the API is the fuzzer's query and not
// an error of the HTTP client's.
func printable(q string) string {
	var b strings.Builder
	for _, c := range []byte(q) {
		if c > ' ' && c < 0x7f && c != '#' {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// fuzzInput is one of FuzzAPI's requests: a route (an index into
// fuzzRoutes), a caller (see request), an ID for the path ("": the
// caller's), a query and a body.
type fuzzInput struct {
	route     uint16
	caller    uint8
	id, query string
	body      []byte
}

// fuzzSeeds are the requests FuzzAPI starts from: each route as each role
// sends it, then malformed, then with text no store can keep (a NUL
// character, bytes that are not UTF-8) in its path, query and body.
func fuzzSeeds() []fuzzInput {
	var seeds []fuzzInput
	for i, r := range fuzzRoutes {
		for role := range 3 {
			seeds = append(seeds, fuzzInput{uint16(i), uint8(role + 3*r.id), "", "", []byte(r.body)})
		}
		seeds = append(seeds,
			fuzzInput{uint16(i), uint8(3 * r.id), "no_such_id", "limit=-1&after=x&from=2&to=1&wait=99999", []byte(`{"name":`)},
			fuzzInput{uint16(i), uint8(1 + 3*r.id), "\x00", "gpu_model=%FF&state=%00", []byte(strings.Replace(r.body, `":"`, `":"\u0000`, 1))},
			fuzzInput{uint16(i), uint8(2 + 3*r.id), "\xff\xfe", "", []byte(strings.Replace(r.body, `":"`, "\":\"\xff", 1))})
	}
	return seeds
}

// try sends in and holds the API to its promise (see FuzzAPI).
func (m *fuzzMarket) try(t *testing.T, in fuzzInput) {
	r := fuzzRoutes[int(in.route)%len(fuzzRoutes)]
	body := []byte(strings.NewReplacer("{id}", m.idOf(in.caller), "{pub}", m.publicKey()).Replace(string(in.body))) // as the seeds name them
	got := mustDo(t, m.request(t, r, in.caller, in.id, in.query, body))
	if got.Status >= 500 {
		t.Fatalf("%s %s as caller %d, id %q, query %q, body %q: status %d %s", r.method, r.path, in.caller, in.id, in.query, body, got.Status, got.Body)
	}
	if got.Status < 400 {
		return
	}
	var e wire.ErrorBody
	if err := json.Unmarshal(got.Body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("%s %s: status %d with body %q, want the API's error body (%v)", r.method, r.path, got.Status, got.Body, err)
	}
}

// fuzzOnPostgres puts FuzzAPI's market on PostgreSQL, to search there:
//
//	IDLEGRID_TEST_POSTGRES=postgres://… go test -fuzz FuzzAPI ./internal/httpapi -args -fuzz.postgres
var fuzzOnPostgres = flag.Bool("fuzz.postgres", false, "run FuzzAPI's market on the PostgreSQL server "+pgtest.EnvVar+" names")

// FuzzAPI sends every route malformed and unexpected requests, from every
// role, and holds the API to its promise: a client's mistake is never a
// 500, and every refusal is the API's error body with a code and a
// message. The seeds run with the tests, on SQLite here and on PostgreSQL
// in TestAPI_fuzzSeedsOnPostgres; `go test -fuzz FuzzAPI
// ./internal/httpapi` searches further (on PostgreSQL with
// -fuzz.postgres).
func FuzzAPI(f *testing.F) {
	for _, in := range fuzzSeeds() {
		f.Add(in.route, in.caller, in.id, in.query, in.body)
	}
	dsn := filepath.Join(f.TempDir(), "db")
	if *fuzzOnPostgres {
		dsn = pgtest.NewDSN(f)
	}
	m := newFuzzMarket(f, dsn)
	f.Fuzz(func(t *testing.T, route uint16, caller uint8, id, query string, body []byte) {
		m.try(t, fuzzInput{route, caller, id, query, body})
	})
}

// TestAPI_fuzzSeedsOnPostgres sends FuzzAPI's seeds to a market on
// PostgreSQL, which refuses text SQLite keeps (a NUL character, bytes
// that are not UTF-8): the API must refuse it first, naming the field.
func TestAPI_fuzzSeedsOnPostgres(t *testing.T) {
	m := newFuzzMarket(t, pgtest.NewDSN(t))
	for _, in := range fuzzSeeds() {
		m.try(t, in)
	}
}
