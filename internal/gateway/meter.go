package gateway

import (
	"context"
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
	m.write([]meterItem{it}, true)
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
			m.write(m.gather(append(batch[:0], it), linger), false)
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
// try) or none is left; final, every batch once.
func (m *meter) retryFailed(final bool) {
	failed := m.failed
	m.failed = nil
	for len(failed) > 0 {
		if len(m.failed) > 0 { // the store still fails
			m.failed = append(m.failed, failed...)
			m.retries.Store(int64(len(m.failed)))
			return
		}
		n := min(len(failed), meterBatch)
		m.write(failed[:n], final)
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

// write stores a batch of charges, then releases their reservations and
// closes the barriers among them. A charge the store could not take for a
// reason of its own waits in failed to be written again, unless final.
func (m *meter) write(batch []meterItem, final bool) {
	cs := make([]idlegrid.InferenceCharge, 0, len(batch))
	idx := make([]int, 0, len(batch))
	for i, it := range batch {
		if it.barrier == nil {
			cs = append(cs, it.charge)
			idx = append(idx, i)
		}
	}
	var errs []error
	if len(cs) > 0 {
		start := time.Now()
		errs = m.store.RecordInference(context.Background(), cs)
		m.metrics.meterWrites.Observe(time.Since(start).Seconds())
	}
	failing := len(m.failed) > 0 // logged already
	for j, i := range idx {
		it, err := batch[i], errs[j]
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
			it, err = m.chargeWhatIsLeft(it, err)
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
}

// chargeWhatIsLeft writes a charge the store refused (refused) as more
// than its renter has, for what the renter has now: a request's usage may
// come to more than its reservation (docs/gateway.md), and the provider
// served it all. It returns the charge as written, and why it could not
// be when it could not.
func (m *meter) chargeWhatIsLeft(it meterItem, refused error) (meterItem, error) {
	if m.capped == nil {
		return it, refused
	}
	c, ok := m.capped(it.charge)
	if !ok {
		return it, refused
	}
	if err := m.store.RecordInference(context.Background(), []idlegrid.InferenceCharge{c})[0]; err != nil {
		return it, err
	}
	m.log.Warn("gateway: an inference charge was more than its renter had; charged what was left", "request", c.Usage.ID,
		"renter", c.Usage.RenterID, "charge", it.charge.Usage.ChargeMicros, "charged", c.Usage.ChargeMicros)
	m.metrics.chargeCapped(capBalance)
	it.charge = c
	return it, nil
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
// its own (it could not be reached, or was too busy), which trying again
// may put right, rather than refused it.
func storeFault(err error) bool {
	code := idlegrid.ErrorCode(err)
	return err != nil && (code == idlegrid.EINTERNAL || code == idlegrid.EUNAVAILABLE)
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
