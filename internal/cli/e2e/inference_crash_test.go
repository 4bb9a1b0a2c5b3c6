package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/infersim"
	"github.com/idlegrid/idlegrid/internal/pgtest"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// inferenceCrashKills is how many times the inference crash test kills
// the server.
const inferenceCrashKills = 4

// inferenceCrashModel is what the test's agent serves.
const inferenceCrashModel = "sim-crash-8b"

func TestInferenceCrash_SQLite(t *testing.T) {
	t.Parallel()
	testInferenceCrash(t, filepath.Join(t.TempDir(), "idlegrid.db"))
}

func TestInferenceCrash_Postgres(t *testing.T) {
	t.Parallel()
	testInferenceCrash(t, pgtest.NewDSN(t))
}

// testInferenceCrash runs the real server and a real agent that serves a
// simulated model server, while renters stream chat completions through
// the gateway, and kills the server with SIGKILL at random moments,
// restarting it each time on the same database and meter journal. At the
// end it checks that every request a renter saw through to its end was
// charged, once: its usage row is stored and the renter's spend is the
// sum of the rows. Without the meter's journal the charges a kill caught
// between a request's end and the meter's next write (up to 10 ms of
// them) would be lost.
//
// A stream counts as seen to its end when its body was read to EOF: the
// chunked encoding's end follows the handler's return, which follows the
// charge's line in the journal.
func testInferenceCrash(t *testing.T, dsn string) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	models, err := infersim.StartModelServer("H100-80GB", []string{inferenceCrashModel}, idlegrid.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	defer models.Close()
	rig := newCrashRig(t, dsn)
	rig.start()
	renterID, renterKey := rig.inferenceSetup(models.URL())

	url := rig.url // the same across restarts: the rig listens on one address
	ctx, cancel := context.WithCancel(context.Background())
	seen := &seenRequests{ids: map[string]bool{}}
	var wg sync.WaitGroup
	stop := func() { cancel(); wg.Wait() }
	defer stop() // a failed wait must not leave the renters running
	for i := range 12 {
		r := mrand.New(mrand.NewPCG(seed, uint64(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if id := streamChat(ctx, url, renterKey, r); id != "" {
					seen.add(id)
				}
				time.Sleep(time.Duration(r.IntN(5)) * time.Millisecond)
			}
		}()
	}
	r := mrand.New(mrand.NewPCG(seed, 1))
	for i := range inferenceCrashKills + 1 {
		// Each kill comes while requests flow: once the agent is back and
		// more have gone through, a random while later.
		before := seen.len()
		eventually(t, "requests go through", func() error {
			if n := seen.len() - before; n < 50 {
				return fmt.Errorf("%d requests since the start", n)
			}
			return nil
		})
		time.Sleep(time.Duration(r.IntN(500)) * time.Millisecond)
		if i == inferenceCrashKills {
			break // a last stretch without a kill
		}
		rig.kill()
		t.Logf("kill %d: SIGKILL with %d requests seen, %d journal lines left", i+1, seen.len(), journalLines(t, rig.journal))
		rig.start()
	}
	stop()
	rig.kill()
	t.Logf("the last kill: %d journal lines left", journalLines(t, rig.journal))
	rig.start() // writes what the last kill left
	if err := rig.srv.stop(t); err != nil {
		t.Fatalf("the server's graceful stop: %v", err)
	}
	checkInferenceCharged(t, dsn, renterID, seen)
	if n := journalLines(t, rig.journal); n != 0 {
		t.Errorf("%d journal lines left after a graceful stop, want none", n)
	}
}

// inferenceSetup makes a provider whose agent (a real process) serves the
// simulated model server at upstream, and a renter with money; it returns
// the renter's account and API key once the model is served.
func (c *crashRig) inferenceSetup(upstream string) (renterID, renterKey string) {
	t, ctx := c.t, context.Background()
	c.connectAdmin()
	_, _, pkey, err := c.admin.CreateAccount(ctx, "crash-inference", idlegrid.RoleProvider)
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := client.New(c.url, pkey).CreateJoinToken(ctx, "crash", 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "agent.yaml")
	mustWrite(t, cfg, fmt.Sprintf(`
name: served
region: eu-west
residency: EU
ask:
  floor: {silver: "0.40"}
models:
  - name: %s
    upstream: %s
    input_price: "10"
    output_price: "20"
    max_concurrency: 64
model_health_interval: 1s
`, inferenceCrashModel, upstream))
	startProc(t, "agent", nil, "agent", "--config", cfg, "--server", c.url, "--join-token", token,
		"--data", filepath.Join(dir, "data"), "--fake-gpus", "1xRTX4090")
	a, _, key, err := c.admin.CreateAccount(ctx, "crash-caller", idlegrid.RoleRenter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.TopUp(ctx, a.ID, crashFunds, "funds"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent's model is served", func() error {
		if id := streamChat(ctx, c.url, key, mrand.New(mrand.NewPCG(1, 1))); id == "" {
			return fmt.Errorf("a streamed chat completion of %s did not go through", inferenceCrashModel)
		}
		return nil
	})
	return a.ID, key
}

// streamChat streams a chat completion through the gateway and returns
// its request ID when the stream was read to its end, "" otherwise.
func streamChat(ctx context.Context, url, key string, r *mrand.Rand) string {
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Say %d things."}],"stream":true,"max_tokens":%d}`,
		inferenceCrashModel, r.IntN(100), 1+r.IntN(4))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return ""
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("data: [DONE]")) {
		return ""
	}
	return resp.Header.Get("X-Request-Id")
}

// seenRequests are the requests the renters saw to their end.
type seenRequests struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (s *seenRequests) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[id] = true
}

func (s *seenRequests) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

// journalLines counts the lines in the meter journal's files.
func journalLines(t *testing.T, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "meter-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += bytes.Count(b, []byte("\n"))
	}
	return n
}

// checkInferenceCharged opens the store the server used, now that it has
// stopped, and checks that every request seen has its usage row, that the
// renter's spend and balance are its rows' charges, and that the ledger
// sums to zero.
func checkInferenceCharged(t *testing.T, dsn, renterID string, seen *seenRequests) {
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	us, err := db.ListInferenceUsage(ctx, idlegrid.UsageFilter{AccountID: renterID, Limit: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	var charged idlegrid.Micros
	for _, u := range us {
		stored[u.ID] = true
		charged += u.ChargeMicros
	}
	if len(seen.ids) < 20 {
		t.Fatalf("only %d requests went through; the test proves nothing", len(seen.ids))
	}
	lost := 0
	for id := range seen.ids {
		if !stored[id] {
			lost++
			t.Errorf("request %s was answered but never charged", id)
		}
	}
	t.Logf("%d requests seen to their end, %d usage rows (%d lost), charged %s", len(seen.ids), len(us), lost, charged)
	bal, err := db.Balance(ctx, renterID)
	if err != nil {
		t.Fatal(err)
	}
	if bal.Spent != charged || bal.Available != crashFunds-charged {
		t.Errorf("the renter spent %s with %s available; its usage rows charge %s of %s", bal.Spent, bal.Available, charged, crashFunds)
	}
	if sum, err := db.LedgerSum(ctx); err != nil || sum != 0 {
		t.Errorf("the ledger sums to %s (%v), want $0", sum, err)
	}
}
