package sqlstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// testMoneyProperty runs random sequences of money operations through the
// posting rules and the store (top-ups, placements with holds, settlements
// with every kind of fault, maturing, payouts requested, settled and
// rejected, bonds and penalties) with random replays of each, and checks
// after every step that the ledger sums to zero, that no balance is below
// zero, that the store holds exactly the transfers it accepted (a model
// ledger, fed only the transfers the store reported applied, agrees with
// every balance), that a renter's escrow is the holds of its live leases,
// and that a replay changed nothing.
func testMoneyProperty(t *testing.T, db *sqlstore.DB) {
	newMoneyModel(t, db, 1).run(t, 300)
}

type moneyModel struct {
	db        *sqlstore.DB
	r         *rand.Rand
	rules     ledger.Rules
	now       time.Time
	renters   []string
	providers []string
	nodes     []*idlegrid.Node
	free      map[string]bool            // "node/gpu" free
	live      map[string]*idlegrid.Lease // by ID
	balance   map[idlegrid.LedgerAccount]idlegrid.Micros
	topUps    map[string]idlegrid.Micros // caller key → amount, per renter key
	payouts   map[string]*idlegrid.Payout
	replays   []func(t *testing.T) // replays of what was applied
}

func newMoneyModel(t *testing.T, db *sqlstore.DB, seed uint64) *moneyModel {
	m := &moneyModel{db: db, r: rand.New(rand.NewPCG(seed, 99)), rules: ledger.Rules{FeeBasisPoints: 1000}, now: t0,
		free: map[string]bool{}, live: map[string]*idlegrid.Lease{}, balance: map[idlegrid.LedgerAccount]idlegrid.Micros{},
		topUps: map[string]idlegrid.Micros{}, payouts: map[string]*idlegrid.Payout{}}
	for range 2 {
		m.renters = append(m.renters, mustAccount(t, db, idlegrid.RoleRenter).ID)
		p := mustAccount(t, db, idlegrid.RoleProvider)
		m.providers = append(m.providers, p.ID)
		n := mustNode(t, db, p.ID, 3)
		m.nodes = append(m.nodes, n)
		for _, g := range n.GPUs {
			m.free[n.ID+"/"+g.UUID] = true
		}
	}
	return m
}

func (m *moneyModel) pick(xs []string) string { return xs[m.r.IntN(len(xs))] }

func (m *moneyModel) run(t *testing.T, steps int) {
	ops := []func(t *testing.T){m.topUp, m.place, m.place, m.settle, m.settle, m.mature, m.requestPayout, m.resolvePayout, m.bond, m.replay}
	for i := range steps {
		m.now = m.now.Add(time.Duration(1+m.r.IntN(600)) * time.Second)
		ops[m.r.IntN(len(ops))](t)
		m.check(t, i)
	}
	ts, err := m.db.ListTransfers(context.Background(), idlegrid.TransferFilter{})
	mustOK(t, err)
	kinds := map[idlegrid.TransferKind]int{}
	for _, x := range ts {
		kinds[x.Kind]++
	}
	t.Logf("%d steps: transfers by kind %v, %d replays possible", steps, kinds, len(m.replays))
}

// apply records a transfer the store applied in the model ledger.
func (m *moneyModel) apply(x *idlegrid.Transfer) {
	for _, e := range x.Entries {
		m.balance[e.Account] += e.Amount
	}
}

// post posts x, expecting EPAYMENT exactly when the model says it would
// overdraw an account.
func (m *moneyModel) post(t *testing.T, x *idlegrid.Transfer) bool {
	t.Helper()
	_, err := m.db.PostTransfer(context.Background(), x)
	if short := m.overdraws(x); short != (idlegrid.ErrorCode(err) == idlegrid.EPAYMENT) || (!short && err != nil) {
		t.Fatalf("post %s: %v; the model says overdraw = %v", x.IdempotencyKey, err, short)
	}
	if err == nil {
		m.apply(x)
	}
	return err == nil
}

func (m *moneyModel) overdraws(x *idlegrid.Transfer) bool {
	net := map[idlegrid.LedgerAccount]idlegrid.Micros{}
	for _, e := range x.Entries {
		net[e.Account] += e.Amount
	}
	for a, v := range net {
		if !a.MayGoNegative() && m.balance[a]+v < 0 {
			return true
		}
	}
	return false
}

func (m *moneyModel) topUp(t *testing.T) {
	renter := m.pick(m.renters)
	key := fmt.Sprintf("pay-%d", m.r.IntN(8))
	amount := idlegrid.Micros(1 + m.r.Int64N(int64(20*idlegrid.MicrosPerUnit)))
	x, err := ledger.TopUp(renter, amount, key, m.now)
	mustOK(t, err)
	seen, ok := m.topUps[x.IdempotencyKey]
	stored, err := m.db.PostTransfer(context.Background(), x)
	switch {
	case ok && seen == amount && (err != nil || stored.Entries[1].Amount != seen):
		t.Fatalf("replayed top-up %s: %v", x.IdempotencyKey, err)
	case ok && seen != amount:
		wantCode(t, err, idlegrid.ECONFLICT)
	case !ok:
		mustOK(t, err)
		m.topUps[x.IdempotencyKey] = amount
		m.apply(x)
		m.replays = append(m.replays, func(t *testing.T) {
			_, err := m.db.PostTransfer(context.Background(), x)
			mustOK(t, err)
		})
	}
}

func (m *moneyModel) place(t *testing.T) {
	renter := m.pick(m.renters)
	n := m.nodes[m.r.IntN(len(m.nodes))]
	g := m.r.IntN(len(n.GPUs))
	if !m.free[n.ID+"/"+n.GPUs[g].UUID] {
		return
	}
	j := newJob(renter, 1, 1)
	j.CreatedAt = m.now
	mustOK(t, m.db.CreateJob(context.Background(), j))
	l := lease(j, n, g)
	l.RenterID = renter
	l.LimitSeconds = 60 + m.r.Int64N(7200)
	l.PriceMicrosPerGPUHour = idlegrid.Micros(1 + m.r.Int64N(int64(3*idlegrid.MicrosPerUnit)))
	l.HoldMicros = ledger.HoldFor(l.PriceMicrosPerGPUHour, 1, l.LimitSeconds)
	p := placement(j, 0, l)
	p.At = m.now
	p.Transfers = nil
	if h := ledger.Hold(l, m.now); h != nil {
		p.Transfers = append(p.Transfers, h)
	}
	err := m.db.PlaceJob(context.Background(), p)
	short := len(p.Transfers) > 0 && m.overdraws(p.Transfers[0])
	if short != (idlegrid.ErrorCode(err) == idlegrid.EPAYMENT) || (!short && err != nil) {
		t.Fatalf("place %s holding %s: %v; the model says short = %v", l.ID, l.HoldMicros, err, short)
	}
	if err != nil {
		return
	}
	for _, x := range p.Transfers {
		m.apply(x)
	}
	m.free[n.ID+"/"+n.GPUs[g].UUID] = false
	l, err = m.db.FindLease(context.Background(), l.ID)
	mustOK(t, err)
	m.live[l.ID] = l
	if m.r.IntN(2) == 0 {
		mustOK(t, m.db.TransitionLease(context.Background(), &idlegrid.LeaseTransition{LeaseID: l.ID,
			From: []idlegrid.LeaseState{idlegrid.LeaseAssigned}, To: idlegrid.LeaseRunning, Reason: "started", At: m.now}, nil))
		m.live[l.ID], err = m.db.FindLease(context.Background(), l.ID)
		mustOK(t, err)
	}
}

// sortedKeys returns m's keys in order, so that a seed gives one sequence.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (m *moneyModel) settle(t *testing.T) {
	if keys := sortedKeys(m.live); len(keys) > 0 {
		l := m.live[m.pick(keys)]
		ends := []struct {
			to    idlegrid.LeaseState
			fault idlegrid.Fault
		}{
			{idlegrid.LeaseSucceeded, ""}, {idlegrid.LeaseFailed, idlegrid.FaultWorkload}, {idlegrid.LeaseFailed, idlegrid.FaultProvider},
			{idlegrid.LeaseCancelled, ""}, {idlegrid.LeasePreempted, ""}, {idlegrid.LeaseLost, idlegrid.FaultProvider},
		}
		end := ends[m.r.IntN(len(ends))]
		charge, x := m.rules.Settle(l, l.GPUSeconds(m.now), end.fault, m.now)
		var xs []*idlegrid.Transfer
		if x != nil {
			xs = append(xs, x)
		}
		tr := &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{l.State}, To: end.to, Reason: "ended",
			Fault: end.fault, ChargedMicros: charge, At: m.now}
		mustOK(t, m.db.TransitionLease(context.Background(), tr, xs))
		for _, x := range xs {
			m.apply(x)
		}
		delete(m.live, l.ID)
		m.free[l.NodeID+"/"+l.GPUUUIDs[0]] = true
		m.replays = append(m.replays, func(t *testing.T) {
			wantCode(t, m.db.TransitionLease(context.Background(), tr, xs), idlegrid.ECONFLICT)
		})
	}
}

func (m *moneyModel) mature(t *testing.T) {
	ts, err := m.db.ListMaturing(context.Background(), m.now.Add(-time.Duration(m.r.IntN(3600))*time.Second), 0)
	mustOK(t, err)
	for _, s := range ts {
		x := ledger.Mature(s, 0, m.now)
		if x == nil {
			t.Fatalf("settlement %s listed as maturing credits no provider", s.IdempotencyKey)
		}
		if !m.post(t, x) {
			t.Fatalf("maturing %s was refused", s.IdempotencyKey)
		}
		m.replays = append(m.replays, func(t *testing.T) {
			again := ledger.Mature(s, 0, m.now) // a new ID, the same key
			_, err := m.db.PostTransfer(context.Background(), again)
			mustOK(t, err)
		})
	}
}

func (m *moneyModel) requestPayout(t *testing.T) {
	prov := m.pick(m.providers)
	payable := m.balance[idlegrid.ProviderPayable(prov)]
	amount := idlegrid.Micros(1 + m.r.Int64N(int64(payable)+int64(idlegrid.MicrosPerUnit)))
	p := &idlegrid.Payout{ID: idlegrid.NewID("payout"), ProviderID: prov, AmountMicros: amount,
		IdempotencyKey: fmt.Sprintf("req-%d", m.r.IntN(1000)), CreatedAt: m.now}
	x, err := ledger.RequestPayout(p, m.now)
	mustOK(t, err)
	short := m.overdraws(x)
	got, err := m.db.CreatePayout(context.Background(), p, x)
	if short != (idlegrid.ErrorCode(err) == idlegrid.EPAYMENT) || (!short && err != nil) {
		t.Fatalf("payout of %s with %s payable: %v", amount, payable, err)
	}
	if err != nil {
		return
	}
	m.apply(x)
	m.payouts[got.ID] = got
	m.replays = append(m.replays, func(t *testing.T) {
		again := *p
		again.ID = idlegrid.NewID("payout")
		ax, _ := ledger.RequestPayout(&again, m.now)
		stored, err := m.db.CreatePayout(context.Background(), &again, ax)
		mustOK(t, err)
		if stored.ID != got.ID {
			t.Fatalf("replayed payout request made %s, want %s", stored.ID, got.ID)
		}
	})
}

func (m *moneyModel) resolvePayout(t *testing.T) {
	for _, id := range sortedKeys(m.payouts) {
		p := m.payouts[id]
		if p.State != idlegrid.PayoutRequested || m.r.IntN(2) == 0 {
			continue
		}
		to := []idlegrid.PayoutState{idlegrid.PayoutSettled, idlegrid.PayoutRejected}[m.r.IntN(2)]
		x, err := ledger.ResolvePayout(p, to, m.now)
		mustOK(t, err)
		r := &idlegrid.PayoutResolution{PayoutID: id, To: to, IdempotencyKey: "op-" + id, By: "acct_ops", At: m.now}
		done, err := m.db.ResolvePayout(context.Background(), r, x)
		mustOK(t, err)
		m.apply(x)
		m.payouts[id] = done
		m.replays = append(m.replays, func(t *testing.T) {
			x2, _ := ledger.ResolvePayout(p, to, m.now)
			_, err := m.db.ResolvePayout(context.Background(), r, x2)
			mustOK(t, err)
		})
		return
	}
}

func (m *moneyModel) bond(t *testing.T) {
	prov := m.pick(m.providers)
	key := idlegrid.NewID("k")
	amount := idlegrid.Micros(1 + m.r.Int64N(int64(idlegrid.MicrosPerUnit)))
	var x *idlegrid.Transfer
	var err error
	switch m.r.IntN(3) {
	case 0:
		x, err = ledger.Bond(prov, amount, ledger.BondSource(m.r.IntN(2)), key, m.now)
	case 1:
		x, err = ledger.Penalty(prov, amount, "missed notice", key, m.now)
	default:
		x, err = ledger.ReleaseBond(prov, amount, key, m.now)
	}
	mustOK(t, err)
	if m.post(t, x) {
		m.replays = append(m.replays, func(t *testing.T) {
			_, err := m.db.PostTransfer(context.Background(), x)
			mustOK(t, err)
		})
	}
}

// replay repeats something already applied; check then finds nothing moved.
func (m *moneyModel) replay(t *testing.T) {
	if len(m.replays) > 0 {
		m.replays[m.r.IntN(len(m.replays))](t)
	}
}

func (m *moneyModel) check(t *testing.T, step int) {
	t.Helper()
	checkLedger(t, m.db)
	held := map[string]idlegrid.Micros{}
	for _, l := range m.live {
		held[l.RenterID] += l.HoldMicros
	}
	for _, r := range m.renters {
		b := mustBalance(t, m.db, r)
		if b.Available != m.balance[idlegrid.RenterAvailable(r)] || b.Held != m.balance[idlegrid.RenterHeld(r)] {
			t.Fatalf("step %d: renter %s available %s held %s; the model has %s and %s", step, r, b.Available, b.Held,
				m.balance[idlegrid.RenterAvailable(r)], m.balance[idlegrid.RenterHeld(r)])
		}
		if b.Held != held[r] {
			t.Fatalf("step %d: renter %s holds %s in escrow, its live leases %s", step, r, b.Held, held[r])
		}
	}
	for _, p := range m.providers {
		b := mustBalance(t, m.db, p)
		want := idlegrid.Balance{AccountID: p, Pending: m.balance[idlegrid.ProviderPending(p)], Payable: m.balance[idlegrid.ProviderPayable(p)],
			PayoutInFlight: m.balance[idlegrid.ProviderPayout(p)], Bond: m.balance[idlegrid.ProviderBond(p)], PaidOut: b.PaidOut}
		if *b != want {
			t.Fatalf("step %d: provider balance %+v, the model has %+v", step, *b, want)
		}
	}
	for a, v := range m.balance {
		if v < 0 && !a.MayGoNegative() {
			t.Fatalf("step %d: %s is %s", step, a, v)
		}
	}
}
