package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/pgtest"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// crashKills is how many times the crash test kills the server.
const crashKills = 8

// crashFunds is what each renter of the crash test is given, once.
const crashFunds = 50 * idlegrid.MicrosPerUnit

func TestCrash_SQLite(t *testing.T) {
	t.Parallel()
	testCrash(t, filepath.Join(t.TempDir(), "idlegrid.db"))
}

func TestCrash_Postgres(t *testing.T) {
	t.Parallel()
	testCrash(t, pgtest.NewDSN(t))
}

// testCrash runs the real server and kills it with SIGKILL at random
// moments, crashKills times, while fake agents (signed client.AgentClient
// calls) start leases, send usage receipts, finish, fail and reclaim them,
// renters submit and cancel jobs, an operator lowers and lifts a spend
// limit (so that bronze leases get notice and are preempted) and settles
// payouts, and a provider asks for payouts, retrying with the same keys.
// Every kill is followed by a restart on the same database. At the end it
// opens the database and checks that no money was made, lost or moved
// twice.
func testCrash(t *testing.T, dsn string) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rig := newCrashRig(t, dsn)
	rig.start()
	rig.setup(seed)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	drive := func(name string, every time.Duration, step func(ctx context.Context, r *mrand.Rand)) {
		r := mrand.New(mrand.NewPCG(seed, uint64(len(name))*7919+uint64(name[len(name)-1])))
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				step(ctx, r)
			}
		}()
	}
	for i, a := range rig.agents {
		drive(fmt.Sprintf("agent%d", i), 100*time.Millisecond, a.step)
	}
	for i, r := range rig.renters {
		drive(fmt.Sprintf("renter%d", i), 150*time.Millisecond, r.step)
	}
	drive("provider", 300*time.Millisecond, rig.providerStep)
	drive("admin", 400*time.Millisecond, rig.adminStep)

	r := mrand.New(mrand.NewPCG(seed, 1))
	for i := range crashKills {
		time.Sleep(time.Duration(300+r.IntN(1200)) * time.Millisecond) // let the stream run a random while
		rig.kill()
		down := time.Duration(0)
		if i%4 == 3 {
			// Down long enough for the nodes to miss their heartbeats: the
			// restarted server finds them silent, loses them and their
			// leases, and refunds the renters.
			down = 3500 * time.Millisecond
		}
		t.Logf("kill %d: SIGKILL, down %s", i+1, down)
		time.Sleep(down)
		rig.start()
	}
	rig.lastStretch(1500*time.Millisecond, 30*time.Second)
	stop()
	wg.Wait()
	rig.kill()
	rig.check()
}

// lastStretch lets the stream run without kills for at least least, and
// on until a lease has succeeded or most has passed: on a loaded machine
// a random schedule of kills can leave no lease time to finish, and the
// check that the stream ran would fail for want of time, not of money.
func (c *crashRig) lastStretch(least, most time.Duration) {
	time.Sleep(least)
	deadline := time.Now().Add(most - least)
	for time.Now().Before(deadline) {
		ls, err := c.admin.ListLeases(context.Background(), idlegrid.LeaseFilter{States: []idlegrid.LeaseState{idlegrid.LeaseSucceeded}, Limit: 1})
		if err == nil && len(ls) > 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// crashRig is the server under test and the parties around it.
type crashRig struct {
	t       *testing.T
	dsn     string
	addr    string // the server's address, the same across restarts
	keyFile string
	journal string // the inference meter's journal, the same across restarts
	srv     *proc
	url     string

	admin     *client.Client
	provider  *client.Client
	renterIDs []string
	renters   []*crashRenter
	agents    []*crashAgent

	mu           sync.Mutex
	payoutKeys   []string // keys the provider used, to retry with
	limitLowered bool
}

func newCrashRig(t *testing.T, dsn string) *crashRig {
	dir := t.TempDir()
	return &crashRig{t: t, dsn: dsn, addr: freeAddr(t), keyFile: filepath.Join(dir, "admin.key"), journal: filepath.Join(dir, "meter-journal")}
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start runs the server and waits until it answers.
func (c *crashRig) start() {
	c.t.Helper()
	c.srv = startProc(c.t, "server", nil, "server", "--listen", c.addr, "--db", c.dsn, "--fee-bps", fmt.Sprint(feeBPS),
		"--bootstrap-admin-key-file", c.keyFile, "--heartbeat-interval", "1s", "--missed-heartbeats", "3",
		"--payout-hold", "0s", "--log-level", "warn", "--meter-journal", c.journal)
	c.url = c.srv.waitForLine(c.t, listening)
	eventually(c.t, "the server answers", func() error {
		resp, err := http.Get(c.url + "/v1/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
}

// kill ends the server with SIGKILL, as a power cut would.
func (c *crashRig) kill() {
	c.t.Helper()
	c.srv.cmd.Process.Signal(syscall.SIGKILL)
	<-c.srv.done
}

// setup makes a provider with three nodes and two renters with money.
func (c *crashRig) setup(seed uint64) {
	t, ctx := c.t, context.Background()
	c.connectAdmin()
	_, _, pkey, err := c.admin.CreateAccount(ctx, "crash-gpus", idlegrid.RoleProvider)
	if err != nil {
		t.Fatal(err)
	}
	c.provider = client.New(c.url, pkey)
	_, token, err := c.provider.CreateJoinToken(ctx, "crash", 3, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c.agents = append(c.agents, joinCrashAgent(t, c.url, token, fmt.Sprintf("rig%d", i)))
	}
	for i := range 2 {
		a, _, key, err := c.admin.CreateAccount(ctx, fmt.Sprintf("crash-renter-%d", i), idlegrid.RoleRenter)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.admin.TopUp(ctx, a.ID, crashFunds, "funds"); err != nil {
			t.Fatal(err)
		}
		c.renterIDs = append(c.renterIDs, a.ID)
		c.renters = append(c.renters, &crashRenter{cl: client.New(c.url, key)})
	}
}

// connectAdmin makes the client of the admin the server bootstrapped.
func (c *crashRig) connectAdmin() {
	b, err := os.ReadFile(c.keyFile)
	if err != nil {
		c.t.Fatal(err)
	}
	c.admin = client.New(c.url, strings.TrimSpace(string(b)))
}

// providerStep asks for a third of what is payable, or retries an earlier
// request with its key, which must not pay twice.
func (c *crashRig) providerStep(ctx context.Context, r *mrand.Rand) {
	c.mu.Lock()
	keys := c.payoutKeys
	c.mu.Unlock()
	if len(keys) > 0 && r.IntN(4) == 0 {
		k := keys[r.IntN(len(keys))]
		c.provider.RequestPayout(ctx, payoutAmount(k), k) // a retry: nothing moves
		return
	}
	b, err := c.provider.Balance(ctx, "")
	if err != nil || b.Payable < 3 {
		return
	}
	k := fmt.Sprintf("p%d-%d", len(keys), b.Payable/3)
	c.mu.Lock()
	c.payoutKeys = append(c.payoutKeys, k)
	c.mu.Unlock()
	c.provider.RequestPayout(ctx, b.Payable/3, k)
}

// payoutAmount reads back the amount a payout key was made for.
func payoutAmount(key string) idlegrid.Micros {
	var n int
	var m int64
	fmt.Sscanf(key, "p%d-%d", &n, &m)
	return idlegrid.Micros(m)
}

// adminStep settles or rejects requested payouts (with keys of their own,
// so a retry is a no-op), retries a top-up, and lowers or lifts the second
// renter's spend limit, which gives its bronze leases notice.
func (c *crashRig) adminStep(ctx context.Context, r *mrand.Rand) {
	ps, err := c.admin.ListPayouts(ctx, idlegrid.PayoutFilter{States: []idlegrid.PayoutState{idlegrid.PayoutRequested}})
	if err == nil {
		for _, p := range ps {
			if r.IntN(4) == 0 {
				c.admin.RejectPayout(ctx, p.ID, "checking bank details", "reject-"+p.ID)
			} else {
				c.admin.SettlePayout(ctx, p.ID, "wire", "settle-"+p.ID)
			}
		}
	}
	c.admin.TopUp(ctx, c.renterIDs[0], crashFunds, "funds") // a retry: nothing moves
	if r.IntN(5) == 0 {
		c.mu.Lock()
		lower := !c.limitLowered
		c.mu.Unlock()
		var limit *idlegrid.Micros
		if lower {
			tiny := idlegrid.Micros(1)
			limit = &tiny
		}
		if _, err := c.admin.SetAccountLimit(ctx, c.renterIDs[1], limit); err == nil {
			c.mu.Lock()
			c.limitLowered = lower
			c.mu.Unlock()
		}
	}
}

// crashRenter submits jobs of every tier and sometimes cancels one.
type crashRenter struct {
	cl   *client.Client
	jobs []string
}

func (c *crashRenter) step(ctx context.Context, r *mrand.Rand) {
	if len(c.jobs) > 0 && r.IntN(15) == 0 {
		c.cl.CancelJob(ctx, c.jobs[r.IntN(len(c.jobs))])
		return
	}
	queued, err := c.cl.ListJobs(ctx, idlegrid.JobFilter{States: []idlegrid.JobState{idlegrid.JobQueued}})
	if err != nil || len(queued) >= 3 {
		return
	}
	spec := idlegrid.JobSpec{Kind: idlegrid.KindTraining, Image: "ghcr.io/acme/crash:1", GPUs: 1 + r.IntN(2),
		Tier: idlegrid.Tiers[r.IntN(3)], MaxPriceMicrosPerGPUHour: idlegrid.MicrosPerUnit, DurationSeconds: int64(20 + r.IntN(100))}
	if j, err := c.cl.SubmitJob(ctx, spec); err == nil {
		c.jobs = append(c.jobs, j.ID)
	}
}

// crashAgent is a node driven by signed agent calls: it starts what it is
// told, sends receipts for what runs, and ends its leases in every way a
// lease can end, retrying each report until the server has it.
type crashAgent struct {
	a           *client.AgentClient
	key         ed25519.PrivateKey
	leases      map[string]*crashLease
	silentUntil time.Time
}

type crashLease struct {
	l        *idlegrid.Lease
	started  bool
	runFrom  time.Time // the start of the next receipt's interval
	endAt    time.Time
	end      idlegrid.LeaseReport
	receipts []idlegrid.Receipt
	acked    int // receipts the server has confirmed
}

func joinCrashAgent(t *testing.T, url, token, name string) *crashAgent {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	offer := idlegrid.Offer{Name: name, Region: "eu-west", Residency: "EU", CPUCores: 16, RAMMB: 65536,
		GPUs:     []idlegrid.GPU{{UUID: "GPU-" + name + "-0", Model: "RTX4090", VRAMMB: 24564}, {UUID: "GPU-" + name + "-1", Model: "RTX4090", VRAMMB: 24564}},
		Schedule: idlegrid.Schedule{Mode: idlegrid.ScheduleAlways},
		Ask: idlegrid.Ask{FloorMicrosPerGPUHour: map[idlegrid.Tier]idlegrid.Micros{
			idlegrid.TierGold: 500_000, idlegrid.TierSilver: 400_000, idlegrid.TierBronze: 300_000}},
	}
	a := client.NewAgent(url, key)
	ctx := context.Background()
	if _, err := a.Join(ctx, idlegrid.JoinRequest{Token: token, Offer: offer, AgentVersion: "crash"}); err != nil {
		t.Fatal(err)
	}
	if err := a.UpdateOffer(ctx, idlegrid.OfferRequest{Offer: offer, AgentVersion: "crash"}); err != nil {
		t.Fatal(err)
	}
	return &crashAgent{a: a, key: key, leases: map[string]*crashLease{}}
}

func (c *crashAgent) step(ctx context.Context, r *mrand.Rand) {
	if time.Now().Before(c.silentUntil) {
		return
	} else if r.IntN(200) == 0 {
		// The node drops off the network for longer than the server waits:
		// it is lost, and its leases end as the provider's fault.
		c.silentUntil = time.Now().Add(4 * time.Second)
		return
	}
	if _, err := c.a.Heartbeat(ctx, idlegrid.HeartbeatRequest{}); err != nil {
		return // the server is down; try again on the next tick
	}
	cmds, err := c.a.Commands(ctx, 0)
	if err != nil {
		return
	}
	for _, cmd := range cmds {
		x, ok := c.leases[cmd.Lease.ID]
		if !ok {
			x = &crashLease{l: cmd.Lease, end: randomEnd(r, cmd.Lease), endAt: time.Now().Add(time.Duration(300+r.IntN(2000)) * time.Millisecond)}
			c.leases[cmd.Lease.ID] = x
		}
		if cmd.Kind == idlegrid.CommandStop {
			x.end, x.endAt = idlegrid.LeaseReport{State: idlegrid.LeaseCancelled, CheckpointRef: "ckpt-" + x.l.ID}, time.Now()
		}
	}
	for id, x := range c.leases {
		if c.advance(ctx, x) {
			delete(c.leases, id)
		}
	}
}

// randomEnd picks how a lease will end: mostly success, sometimes its
// workload fails, a bronze node reclaims its GPU, or the node fails it.
func randomEnd(r *mrand.Rand, l *idlegrid.Lease) idlegrid.LeaseReport {
	exit0, exit1 := 0, 1
	switch n := r.IntN(20); {
	case n < 2:
		return idlegrid.LeaseReport{State: idlegrid.LeaseFailed, ExitCode: &exit1, Message: "loss went NaN"}
	case n < 4 && l.Tier == idlegrid.TierBronze: // as the agent reports it, after the notice
		return idlegrid.LeaseReport{State: idlegrid.LeaseFailed, Fault: idlegrid.FaultProvider,
			Message: "the node withdrew its GPU after 2m0s notice: the owner is gaming"}
	case n < 5:
		return idlegrid.LeaseReport{State: idlegrid.LeaseFailed, Fault: idlegrid.FaultProvider, Message: "GPU fell off the bus"}
	}
	return idlegrid.LeaseReport{State: idlegrid.LeaseSucceeded, ExitCode: &exit0}
}

// advance moves one lease on as far as the server lets it; it reports
// whether the agent is done with the lease.
func (c *crashAgent) advance(ctx context.Context, x *crashLease) bool {
	if !x.started {
		from := time.Now().UTC().Truncate(time.Microsecond)
		err := c.a.ReportLease(ctx, x.l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning})
		if gone(err) {
			return true
		} else if err != nil {
			return false
		}
		x.started, x.runFrom = true, from
	}
	c.cutReceipt(x)
	if x.acked < len(x.receipts) {
		err := c.a.SendReceipts(ctx, x.l.ID, x.receipts[x.acked:])
		if gone(err) {
			return true
		} else if err == nil {
			x.acked = len(x.receipts)
		}
	}
	if time.Now().Before(x.endAt) {
		return false
	}
	err := c.a.ReportLease(ctx, x.l.ID, x.end)
	return err == nil || gone(err)
}

// cutReceipt signs a receipt for the whole seconds run since the last one.
func (c *crashAgent) cutReceipt(x *crashLease) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	secs := int64(now.Sub(x.runFrom) / time.Second)
	if secs < 1 {
		return
	}
	rc := idlegrid.Receipt{LeaseID: x.l.ID, Seq: int64(len(x.receipts) + 1), Start: x.runFrom, End: now,
		GPUSeconds: secs * int64(len(x.l.GPUUUIDs)), AvgUtilPct: 90}
	if n := len(x.receipts); n > 0 {
		rc.PrevHash = x.receipts[n-1].Hash()
	}
	nodekey.SignReceipt(c.key, &rc)
	x.receipts, x.runFrom = append(x.receipts, rc), now
}

// gone reports whether the server says the lease is over for this agent.
func gone(err error) bool {
	code := idlegrid.ErrorCode(err)
	return code == idlegrid.ECONFLICT || code == idlegrid.ENOTFOUND
}

// check opens the database the killed server left and checks the money.
func (c *crashRig) check() {
	t, ctx := c.t, context.Background()
	db, err := sqlstore.Open(ctx, c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if sum, err := db.LedgerSum(ctx); err != nil || sum != 0 {
		t.Errorf("the ledger sums to %s (%v), want $0", sum, err)
	}
	var providerID string
	earned, fees := idlegrid.Micros(0), idlegrid.Micros(0)
	counts := map[string]int{}
	for _, renterID := range c.renterIDs {
		leases, err := db.ListLeases(ctx, idlegrid.LeaseFilter{RenterID: renterID})
		if err != nil {
			t.Fatal(err)
		}
		var live, charged idlegrid.Micros
		jobs := map[string]idlegrid.Micros{}
		for _, l := range leases {
			providerID = l.ProviderID
			counts[string(l.State)]++
			if !l.State.Terminal() {
				live += l.HoldMicros
			}
			charged += l.ChargedMicros
			jobs[l.JobID] += l.ChargedMicros
			e, f := c.checkLease(ctx, db, l)
			earned, fees = earned+e, fees+f
		}
		b, err := db.Balance(ctx, renterID)
		if err != nil {
			t.Fatal(err)
		}
		if b.Held != live {
			t.Errorf("renter %s holds %s in escrow; its live leases hold %s", renterID, b.Held, live)
		}
		if b.Available < 0 || b.Available+b.Held+charged != crashFunds {
			t.Errorf("renter %s: %s available + %s held + %s charged = %s, want its %s of funds",
				renterID, b.Available, b.Held, charged, b.Available+b.Held+charged, crashFunds)
		}
		for id, sum := range jobs {
			if j, err := db.FindJob(ctx, id); err != nil || j.ChargedMicros != sum {
				t.Errorf("job %s charged %v (%v), its leases %s", id, j, err, sum)
			}
		}
	}
	t.Logf("leases by state after %d kills: %v", crashKills, counts)
	if counts[string(idlegrid.LeaseSucceeded)] == 0 {
		t.Errorf("no lease succeeded: the stream did not run")
	}
	c.checkProvider(ctx, db, providerID, earned, fees)
}

// checkLease checks one lease's transfers and returns what its settlement
// credited the provider and the platform.
func (c *crashRig) checkLease(ctx context.Context, db *sqlstore.DB, l *idlegrid.Lease) (earned, fees idlegrid.Micros) {
	t := c.t
	ts, err := db.ListTransfers(ctx, idlegrid.TransferFilter{LeaseID: l.ID})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[idlegrid.TransferKind][]*idlegrid.Transfer{}
	keys := map[string]bool{}
	for _, x := range ts {
		kinds[x.Kind] = append(kinds[x.Kind], x)
		if keys[x.IdempotencyKey] {
			t.Errorf("lease %s: idempotency key %s used twice", l.ID, x.IdempotencyKey)
		}
		keys[x.IdempotencyKey] = true
		if err := x.Validate(); err != nil {
			t.Errorf("lease %s: transfer %s: %v", l.ID, x.IdempotencyKey, err)
		}
	}
	settles := kinds[idlegrid.TransferSettle]
	switch {
	case len(kinds[idlegrid.TransferHold]) != 1:
		t.Errorf("lease %s (%s) has %d holds, want 1", l.ID, l.State, len(kinds[idlegrid.TransferHold]))
	case l.State.Terminal() && len(settles) != 1:
		t.Errorf("lease %s ended %s with %d settlements, want 1: an ended lease is settled once", l.ID, l.State, len(settles))
	case !l.State.Terminal() && len(settles) != 0:
		t.Errorf("live lease %s (%s) has %d settlements", l.ID, l.State, len(settles))
	case len(kinds[idlegrid.TransferMature]) > len(settles):
		t.Errorf("lease %s matured %d times", l.ID, len(kinds[idlegrid.TransferMature]))
	}
	if len(settles) != 1 {
		return 0, 0
	}
	s := settles[0]
	var charge idlegrid.Micros
	for _, e := range s.Entries {
		switch {
		case e.Account == idlegrid.RenterHeld(l.RenterID) || e.Account == idlegrid.RenterAvailable(l.RenterID):
			charge -= e.Amount
		case e.Account == idlegrid.ProviderPending(l.ProviderID):
			earned += e.Amount
		case e.Account == idlegrid.PlatformFees:
			fees += e.Amount
		}
	}
	if charge != l.ChargedMicros || charge != earned+fees {
		t.Errorf("lease %s: charged %s, its settlement charged %s and credited %s + %s", l.ID, l.ChargedMicros, charge, earned, fees)
	}
	receipts, err := db.ListReceipts(ctx, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	var signed int64
	for _, r := range receipts {
		signed += r.GPUSeconds
	}
	if noReceiptCap := int64(len(l.GPUUUIDs)) * 60; s.GPUSeconds > max(signed, noReceiptCap) || (len(receipts) > 0 && s.GPUSeconds > signed) {
		t.Errorf("lease %s billed %d GPU-s with %d receipts for %d GPU-s", l.ID, s.GPUSeconds, len(receipts), signed)
	}
	return earned, fees
}

// checkProvider checks that the provider's earnings are all accounted for:
// pending, payable, in flight or paid out, and that payouts match.
func (c *crashRig) checkProvider(ctx context.Context, db *sqlstore.DB, providerID string, earned, fees idlegrid.Micros) {
	t := c.t
	b, err := db.Balance(ctx, providerID)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Pending + b.Payable + b.PayoutInFlight + b.PaidOut; got != earned {
		t.Errorf("provider: %s pending + %s payable + %s in flight + %s paid out = %s; its settlements credited %s",
			b.Pending, b.Payable, b.PayoutInFlight, b.PaidOut, got, earned)
	}
	if b.Pending < 0 || b.Payable < 0 || b.PayoutInFlight < 0 {
		t.Errorf("provider balance below zero: %+v", b)
	}
	ps, err := db.ListPayouts(ctx, idlegrid.PayoutFilter{ProviderID: providerID})
	if err != nil {
		t.Fatal(err)
	}
	var inFlight, paid idlegrid.Micros
	states := map[idlegrid.PayoutState]int{}
	for _, p := range ps {
		states[p.State]++
		switch p.State {
		case idlegrid.PayoutRequested:
			inFlight += p.AmountMicros
		case idlegrid.PayoutSettled:
			paid += p.AmountMicros
		}
	}
	if inFlight != b.PayoutInFlight || paid != b.PaidOut {
		t.Errorf("payouts: %s requested and %s settled, the ledger has %s in flight and %s paid out", inFlight, paid, b.PayoutInFlight, b.PaidOut)
	}
	c.mu.Lock()
	if keys := len(c.payoutKeys); len(ps) > keys {
		t.Errorf("%d payouts from %d request keys: a retried request paid twice", len(ps), keys)
	}
	c.mu.Unlock()
	sum, err := db.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.FeesMicros != fees {
		t.Errorf("platform fees %s, the settlements took %s", sum.FeesMicros, fees)
	}
	t.Logf("provider earned %s (%s paid out, payouts %v), platform fees %s", earned, b.PaidOut, states, fees)
	if errors.Is(ctx.Err(), context.Canceled) {
		t.Fatal("cancelled")
	}
}
