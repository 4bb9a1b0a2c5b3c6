package gateway

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idlegrid/idlegrid"
)

// meterBatch is the most charges the meter writes in one transaction.
const meterBatch = 256

// meterLinger is how long the meter waits for more charges before it
// writes a batch that is not full. A transaction has a fixed cost (begin,
// savepoint, the audit log's head, commit and its WAL frames) that the
// charges of that while then share; under load that is most of what one
// charge alone would cost. The requests have been answered by then: only
// their reservations wait, which keeps budgets on the safe side. Sync and
// Close write at once.
const meterLinger = 10 * time.Millisecond

// meterRetry is how long the meter waits before it writes again the
// charges the store could not take for a reason of its own (it could not
// be reached, say). They keep their reservations meanwhile, so budgets
// stay on the safe side; at most meterQueue of them wait, and close tries
// them once more.
const meterRetry = time.Second

// meterWriteTimeout is how long one write of charges to the store may
// take before the meter gives up on it as a store fault (storeFault), to
// try again as it would a store it cannot reach: a store that hangs (a
// PostgreSQL connection gone quiet) must not hold the meter, and with it
// the requests waiting to queue their charges and the server's shutdown,
// for ever.
const meterWriteTimeout = 30 * time.Second

// meterQueue is how many charges may wait to be written before requests
// wait for the meter: it bounds the memory, and the money at risk, when the
// store falls behind.
const meterQueue = 16384

// meter writes metered requests to the store off the requests' path, in
// batches, and then releases their reservations. With a journal
// (journal.go) each charge is journaled before it is queued. Its goroutine
// is started by New and stopped by close, which writes what waits first.
type meter struct {
	store   idlegrid.InferenceStore
	journal *journal // nil: none
	log     *slog.Logger
	metrics *metrics
	in      chan meterItem
	done    chan struct{}
	failed  []meterItem  // charges to write again after meterRetry; the meter's goroutine's
	retries atomic.Int64 // len(failed), for the metrics
	// capped is a charge the store refused as more than its renter has,
	// charged only what the renter has now; false when nothing can be.
	capped func(idlegrid.InferenceCharge) (idlegrid.InferenceCharge, bool)

	mu     sync.RWMutex // held for reading while sending on in
	closed bool
}

// meterItem is a charge to write, with the journal file that holds it, or
// a barrier (sync) to close once all before it are written.
type meterItem struct {
	charge  idlegrid.InferenceCharge
	res     *reservation
	seg     *segment
	barrier chan struct{}
}

func startMeter(s idlegrid.InferenceStore, j *journal, ms *metrics, log *slog.Logger, capped func(idlegrid.InferenceCharge) (idlegrid.InferenceCharge, bool)) *meter {
	m := &meter{store: s, journal: j, log: log, metrics: ms, capped: capped, in: make(chan meterItem, meterQueue), done: make(chan struct{})}
	go m.run()
	return m
}

// add journals and queues a charge; the reservation is released once it
// is written. After close it writes the charge itself.
func (m *meter) add(c idlegrid.InferenceCharge, res *reservation) {
	it := meterItem{charge: c, res: res}
	m.mu.RLock()
	if !m.closed {
		if m.journal != nil {
			it.seg = m.journal.append(c)
		}
		m.in <- it
		m.mu.RUnlock()
		return
	}
	m.mu.RUnlock()
	m.write([]meterItem{it}, true, false)
}

func (m *meter) run() {
	defer close(m.done)
	batch := make([]meterItem, 0, meterBatch)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	armed := false
	for {
		var again <-chan time.Time
		if armed {
			again = retry.C
		}
		select {
		case it, ok := <-m.in:
			if !ok {
				m.retryFailed(true) // a last try; the journal keeps what fails again
				m.retries.Store(0)
				return
			}
			// While the store is failing, new charges wait with those
			// that failed rather than each wait for a store that may
			// hang (meterWriteTimeout).
			m.write(m.gather(append(batch[:0], it), linger), false, len(m.failed) > 0)
		case <-again:
			armed = false
			m.retryFailed(false)
		}
		if len(m.failed) > 0 && !armed {
			retry.Reset(meterRetry)
			armed = true
		}
	}
}

// retryFailed writes the charges that failed again, a batch at a time,
// until a batch fails again (the rest then waits with it for the next
// try) or none is left; final, until a batch fails again, and the rest
// are given up untried, kept in the journal for the next start: a close
// waits for one write to a failing store, not for one a batch.
func (m *meter) retryFailed(final bool) {
	failed := m.failed
	m.failed = nil
	down := false // final: the store failed a batch
	for len(failed) > 0 {
		if len(m.failed) > 0 { // the store still fails
			m.failed = append(m.failed, failed...)
			m.retries.Store(int64(len(m.failed)))
			return
		}
		n := min(len(failed), meterBatch)
		if m.write(failed[:n], final, down) && final {
			down = true
		}
		failed = failed[n:]
	}
}

// gather adds to batch the charges that arrive within meterLinger, until
// it is full, a barrier comes (someone waits) or the meter closes.
func (m *meter) gather(batch []meterItem, linger *time.Timer) []meterItem {
	if batch[0].barrier != nil {
		return batch
	}
	linger.Reset(meterLinger)
	defer linger.Stop()
	for len(batch) < meterBatch {
		select {
		case it, ok := <-m.in:
			if !ok {
				return batch
			}
			batch = append(batch, it)
			if it.barrier != nil {
				return batch
			}
		case <-linger.C:
			return batch
		}
	}
	return batch
}

// errStoreFailing is the answer a charge gets without the store being
// asked, since it failed those before it: a store fault.
var errStoreFailing = idlegrid.Errorf(idlegrid.EUNAVAILABLE, "not tried: the store failed the charges before it")

// write stores a batch of charges, then releases their reservations and
// closes the barriers among them; held, it does not ask the store, whose
// answer to each is then errStoreFailing. A charge the store could not
// take for a reason of its own waits in failed to be written again, unless
// final. It reports whether there was such a charge.
func (m *meter) write(batch []meterItem, final, held bool) (faulted bool) {
	cs := make([]idlegrid.InferenceCharge, 0, len(batch))
	idx := make([]int, 0, len(batch))
	for i, it := range batch {
		if it.barrier == nil {
			cs = append(cs, it.charge)
			idx = append(idx, i)
		}
	}
	errs := make([]error, len(cs))
	switch {
	case len(cs) == 0:
	case held:
		for j := range errs {
			errs[j] = errStoreFailing
		}
	default:
		start := time.Now()
		errs = recordCharges(context.Background(), m.store, cs)
		m.metrics.meterWrites.Observe(time.Since(start).Seconds())
	}
	failing := len(m.failed) > 0 // logged already
	for j, i := range idx {
		it, err := batch[i], errs[j]
		faulted = faulted || storeFault(err)
		if storeFault(err) && !final && len(m.failed) < meterQueue {
			if !failing {
				failing = true
				m.log.Warn("gateway: the store could not take inference charges; the meter tries them again",
					"in", meterRetry, "err", err)
			}
			m.failed = append(m.failed, it)
			continue
		}
		if idlegrid.ErrorCode(err) == idlegrid.EPAYMENT {
			it.charge, err = chargeWhatIsLeft(context.Background(), m.store, m.capped, it.charge, err, m.metrics, m.log)
		}
		m.settle(it, err)
	}
	if !final {
		m.retries.Store(int64(len(m.failed))) // before the barriers: who syncs sees it
	}
	for _, it := range batch {
		if it.barrier != nil {
			close(it.barrier)
		}
	}
	return faulted
}

// recordCharges writes charges to the store, giving up after
// meterWriteTimeout.
func recordCharges(ctx context.Context, s idlegrid.InferenceStore, cs []idlegrid.InferenceCharge) []error {
	ctx, cancel := context.WithTimeout(ctx, meterWriteTimeout)
	defer cancel()
	return s.RecordInference(ctx, cs)
}

// chargeWhatIsLeft writes c, a charge the store refused (refused) as more
// than its renter has, for what the renter has now (capped, nil: never):
// a request's usage may come to more than its reservation
// (docs/gateway.md), and the provider served it all. The meter and the
// journal's replay both charge so. It returns the charge as written, or
// c and why it could not be.
func chargeWhatIsLeft(ctx context.Context, s idlegrid.InferenceStore, capped func(idlegrid.InferenceCharge) (idlegrid.InferenceCharge, bool),
	c idlegrid.InferenceCharge, refused error, ms *metrics, log *slog.Logger) (idlegrid.InferenceCharge, error) {
	if capped == nil {
		return c, refused
	}
	left, ok := capped(c)
	if !ok {
		return c, refused
	}
	if err := recordCharges(ctx, s, []idlegrid.InferenceCharge{left})[0]; err != nil {
		return c, err
	}
	log.Warn("gateway: an inference charge was more than its renter had; charged what was left", "request", left.Usage.ID,
		"renter", left.Usage.RenterID, "charge", c.Usage.ChargeMicros, "charged", left.Usage.ChargeMicros)
	ms.chargeCapped(capBalance)
	return left, nil
}

// capToBalance is c for no more than its renter has available now, with
// the fee and the provider's earnings of that; false when the renter has
// nothing, or enough.
func (g *Gateway) capToBalance(c idlegrid.InferenceCharge) (idlegrid.InferenceCharge, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bal, err := g.cfg.Store.Balance(ctx, c.Usage.RenterID)
	if err != nil || bal.Available <= 0 || bal.Available >= c.Usage.ChargeMicros {
		return c, false
	}
	u := *c.Usage
	u.ChargeMicros = bal.Available
	var t *idlegrid.Transfer
	u.FeeMicros, t = g.rules.Inference(&u, u.CreatedAt)
	return idlegrid.InferenceCharge{Usage: &u, Transfer: t}, true
}

// settle releases a charge's reservation, once the store took it (err
// nil) or gave up on it, and tells the journal. A charge the store could
// not take for a reason of its own stays in the journal for the next
// start.
func (m *meter) settle(it meterItem, err error) {
	charged := it.charge.Usage.ChargeMicros
	kept := it.seg != nil && storeFault(err)
	if err != nil {
		charged = 0
		m.metrics.chargesLost.Inc()
		m.log.Error("gateway: could not record an inference charge", "request", it.charge.Usage.ID,
			"renter", it.charge.Usage.RenterID, "charge", it.charge.Usage.ChargeMicros, "kept_in_journal", kept, "err", err)
	}
	m.journal.done(it.seg, kept)
	if it.res != nil {
		it.res.release(charged)
	}
}

// storeFault reports whether the store failed a charge for a reason of
// its own (it could not be reached, was too busy, or did not answer within
// meterWriteTimeout), which trying again may put right, rather than
// refused it.
func storeFault(err error) bool {
	code := idlegrid.ErrorCode(err)
	return err != nil && (code == idlegrid.EINTERNAL || code == idlegrid.EUNAVAILABLE || errors.Is(err, context.DeadlineExceeded))
}

// sync waits until every charge queued before it is written, or waits to
// be written again (meterRetry).
func (m *meter) sync(ctx context.Context) error {
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		return nil
	}
	b := make(chan struct{})
	m.in <- meterItem{barrier: b}
	m.mu.RUnlock()
	select {
	case <-b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close writes what waits, stops the meter's goroutine and closes the
// journal.
func (m *meter) close() {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.in)
	}
	m.mu.Unlock()
	<-m.done
	m.journal.close()
}
