package gateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
)

// budgets holds every renter's and key's limits in the gateway's memory:
// the key's rate (a token bucket), its requests in flight, and the money
// reserved by requests that run or whose charge is not written yet. A
// request reserves its worst case before it starts, against the renter's
// available balance and the account's and the key's monthly spend limits,
// so that many concurrent or streaming requests cannot together spend
// more than there is. The reservation is released once the meter has
// written the actual charge.
//
// Balances and spend are read from the store at most every BudgetTTL. A
// charge the meter has written is counted from memory (written) until a
// read of the store that began after it was committed, so it is never
// missed; a read that overlaps the commit counts it twice until the next,
// which is on the safe side.
type budgets struct {
	cfg *Config

	mu       sync.Mutex
	accounts map[string]*accountBudget
	keys     map[string]*keyBudget
}

// accountBudget is one renter's money as the gateway sees it.
type accountBudget struct {
	load sync.Mutex // one read of the store at a time

	mu        sync.Mutex
	fetched   time.Time
	available idlegrid.Micros  // as last read
	spent     idlegrid.Micros  // this month, leases and inference, as last read
	limit     *idlegrid.Micros // the account's spend limit
	reserved  idlegrid.Micros
	written   charges // charged since, perhaps not in the last read
}

// charges are charges the meter wrote, each with when its write was done,
// in that order, and their total.
type charges struct {
	list  []writtenCharge
	total idlegrid.Micros
}

type writtenCharge struct {
	at     time.Time
	amount idlegrid.Micros
}

func (cs *charges) add(w writtenCharge) {
	cs.list = append(cs.list, w)
	cs.total += w.amount
}

func (cs *charges) sum() idlegrid.Micros { return cs.total }

// forgetBefore drops the charges written before t: a read of the store
// that began at t holds them.
func (cs *charges) forgetBefore(t time.Time) {
	i := 0
	for i < len(cs.list) && cs.list[i].at.Before(t) {
		cs.total -= cs.list[i].amount
		i++
	}
	cs.list = append(cs.list[:0], cs.list[i:]...)
}

// keyBudget is one API key's limits.
type keyBudget struct {
	mu       sync.Mutex
	tokens   float64 // the rate limit's bucket
	refilled time.Time
	inflight int

	fetched  time.Time
	spent    idlegrid.Micros
	limit    *idlegrid.Micros
	reserved idlegrid.Micros
	written  charges
}

func (b *budgets) init(cfg *Config) {
	b.cfg, b.accounts, b.keys = cfg, map[string]*accountBudget{}, map[string]*keyBudget{}
}

func (b *budgets) of(c *idlegrid.Caller) (*accountBudget, *keyBudget) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.accounts[c.AccountID]
	if !ok {
		a = &accountBudget{}
		b.accounts[c.AccountID] = a
	}
	k, ok := b.keys[c.KeyID]
	if !ok {
		k = &keyBudget{tokens: float64(b.cfg.KeyBurst)}
		b.keys[c.KeyID] = k
	}
	return a, k
}

// reservation is what one request holds; release gives it back.
type reservation struct {
	b       *budgets
	a       *accountBudget
	k       *keyBudget
	amount  idlegrid.Micros
	once    sync.Once
	slotted bool
}

// admit checks the key's rate and concurrency and reserves amount. The
// caller must release the reservation.
func (b *budgets) admit(ctx context.Context, c *idlegrid.Caller, amount idlegrid.Micros) (*reservation, error) {
	a, k := b.of(c)
	if err := b.take(k); err != nil {
		return nil, err
	}
	r := &reservation{b: b, a: a, k: k, slotted: true}
	if err := b.reserve(ctx, c, a, k, amount); err != nil {
		r.release(0)
		return nil, err
	}
	r.amount = amount
	return r, nil
}

// take spends one of the key's rate tokens and one of its slots.
func (b *budgets) take(k *keyBudget) error {
	now := b.cfg.Clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if rps := b.cfg.KeyRequestsPerSecond; rps > 0 {
		burst := float64(max(b.cfg.KeyBurst, 1))
		if k.refilled.IsZero() {
			k.tokens = burst
		} else if d := now.Sub(k.refilled); d > 0 {
			k.tokens = min(burst, k.tokens+d.Seconds()*rps)
		}
		k.refilled = now
		if k.tokens < 1 {
			refill := time.Duration((1 - k.tokens) / rps * float64(time.Second))
			return retryAfter(idlegrid.Errorf(idlegrid.ETOOMANY, "this API key is over its rate limit of %g requests a second; slow down and retry", rps), refill)
		}
		k.tokens--
	}
	if n := b.cfg.KeyConcurrency; n > 0 && k.inflight >= n {
		k.tokens++ // not spent: the request did not start
		return retryAfter(idlegrid.Errorf(idlegrid.ETOOMANY, "this API key has %d requests in flight, its limit; wait for one to finish", n), time.Second)
	}
	k.inflight++
	return nil
}

// reserve holds amount against the renter's balance and both spend limits.
func (b *budgets) reserve(ctx context.Context, c *idlegrid.Caller, a *accountBudget, k *keyBudget, amount idlegrid.Micros) error {
	if err := b.refresh(ctx, c, a, k); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	aw, kw := a.written.sum(), k.written.sum()
	if free := a.available - aw - a.reserved; free < amount {
		return idlegrid.Errorf(idlegrid.EPAYMENT, "insufficient balance: this request may cost up to %s and %s is available; top up, or lower max_tokens",
			amount, max(free, 0))
	}
	if used := a.spent + aw + a.reserved; a.limit != nil && used+amount > *a.limit {
		return overLimit("the account", "an admin raises it with 'idlegrid account limit "+c.AccountID+" AMOUNT'", used, amount, *a.limit)
	}
	if used := k.spent + kw + k.reserved; k.limit != nil && used+amount > *k.limit {
		return overLimit("this API key", "raise it with 'idlegrid key limit "+c.KeyID+" AMOUNT'", used, amount, *k.limit)
	}
	a.reserved += amount
	k.reserved += amount
	return nil
}

// overLimit is the refusal of a request that may cost up to amount under
// a spend limit of which used is used or reserved: reached, when none of
// it is left; otherwise what is left, since a smaller request may fit.
func overLimit(whose, raise string, used, amount, limit idlegrid.Micros) error {
	if used >= limit {
		return idlegrid.Errorf(idlegrid.EPAYMENT, "spend limit of %s reached: %s used or reserved of %s this month; it resets next month, or %s",
			whose, used, limit, raise)
	}
	return idlegrid.Errorf(idlegrid.EPAYMENT, "spend limit of %s: this request may cost up to %s and %s left of %s this month; lower max_tokens, or %s",
		whose, amount, limit-used, limit, raise)
}

// refresh reads the renter's balance, limits and month's spend when they
// are older than BudgetTTL. While one request reads them, the others go on
// with what was read before; only a key never read before waits.
func (b *budgets) refresh(ctx context.Context, c *idlegrid.Caller, a *accountBudget, k *keyBudget) error {
	fresh := func() (fresh, known bool) {
		now := b.cfg.Clock.Now()
		a.mu.Lock()
		k.mu.Lock()
		defer a.mu.Unlock()
		defer k.mu.Unlock()
		return now.Sub(a.fetched) < b.cfg.BudgetTTL && now.Sub(k.fetched) < b.cfg.BudgetTTL, !a.fetched.IsZero() && !k.fetched.IsZero()
	}
	if ok, known := fresh(); ok {
		return nil
	} else if known {
		if !a.load.TryLock() {
			return nil // another request is reading them
		}
	} else {
		a.load.Lock()
	}
	defer a.load.Unlock()
	if ok, _ := fresh(); ok {
		return nil // read while this one waited
	}
	now := b.cfg.Clock.Now()
	began := now
	st := b.cfg.Store
	bal, err := st.Balance(ctx, c.AccountID)
	if err != nil {
		return err
	}
	limits, err := st.ListSpendLimits(ctx, c.AccountID)
	if err != nil {
		return err
	}
	from, to := idlegrid.MonthOf(b.cfg.Clock.Now())
	spent := func(keyID string) (idlegrid.Micros, error) { // leases and inference alike
		s, err := st.MonthSpend(ctx, idlegrid.SpendFilter{AccountID: c.AccountID, KeyID: keyID, From: from, To: to})
		if err != nil {
			return 0, err
		}
		return s.Used(), nil
	}
	var acctLimit, keyLimit *idlegrid.Micros
	for _, l := range limits {
		lim := l.LimitMicros
		switch {
		case l.Scope == idlegrid.SpendAccount:
			acctLimit = &lim
		case l.Scope == idlegrid.SpendKey && l.KeyID == c.KeyID:
			keyLimit = &lim
		}
	}
	var acctSpent, keySpent idlegrid.Micros
	if acctLimit != nil {
		if acctSpent, err = spent(""); err != nil {
			return err
		}
	}
	if keyLimit != nil {
		if keySpent, err = spent(c.KeyID); err != nil {
			return err
		}
	}
	a.mu.Lock()
	a.available, a.spent, a.limit, a.fetched = bal.Available, acctSpent, acctLimit, now
	a.written.forgetBefore(began)
	a.mu.Unlock()
	k.mu.Lock()
	k.spent, k.limit, k.fetched = keySpent, keyLimit, now
	k.written.forgetBefore(began)
	k.mu.Unlock()
	return nil
}

// done frees the request's slot; its money stays reserved until release.
func (r *reservation) done() {
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	if r.slotted {
		r.k.inflight--
		r.slotted = false
	}
}

// hold makes the reservation the request's charge, once it is known and
// waits for the meter, which writes in batches: meanwhile the renter's
// next request sees what this one cost, not its worst case.
func (r *reservation) hold(charge idlegrid.Micros) {
	r.a.mu.Lock()
	r.a.reserved += charge - r.amount
	r.a.mu.Unlock()
	r.k.mu.Lock()
	r.k.reserved += charge - r.amount
	r.k.mu.Unlock()
	r.amount = charge
}

// release frees the slot, if done has not, and the reservation, once the
// charge (written, or refused) no longer needs it. charged is what was
// written: it counts as spent until a read of the store holds it.
func (r *reservation) release(charged idlegrid.Micros) {
	r.once.Do(func() {
		r.done()
		w := writtenCharge{at: r.b.cfg.Clock.Now(), amount: charged}
		r.a.mu.Lock()
		r.a.reserved -= r.amount
		if charged > 0 {
			r.a.written.add(w)
		}
		r.a.mu.Unlock()
		r.k.mu.Lock()
		r.k.reserved -= r.amount
		if charged > 0 {
			r.k.written.add(w)
		}
		r.k.mu.Unlock()
	})
}

// limitLeft is what the renter's monthly spend limits leave the
// reservation's request: of each limit set, the account's and the key's,
// what the month's spend, the charges written since and the other
// requests' reservations have not taken. which names the tighter limit,
// "account" or "key"; ok is false when neither is set.
func (r *reservation) limitLeft() (left idlegrid.Micros, which string, ok bool) {
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	for _, l := range []struct {
		name            string
		limit           *idlegrid.Micros
		spent, reserved idlegrid.Micros
		written         *charges
	}{
		{"account", r.a.limit, r.a.spent, r.a.reserved, &r.a.written},
		{"key", r.k.limit, r.k.spent, r.k.reserved, &r.k.written},
	} {
		if l.limit == nil {
			continue
		}
		others := l.reserved - r.amount // this request's own is its to use
		if room := *l.limit - l.spent - l.written.sum() - others; !ok || room < left {
			left, which, ok = room, l.name, true
		}
	}
	return max(left, 0), which, ok
}

// String describes the reservation, for logs.
func (r *reservation) String() string { return fmt.Sprintf("reserved %s", r.amount) }
