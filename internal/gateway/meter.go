package gateway

import (
	"context"
	"log/slog"
	"sync"
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

// meterQueue is how many charges may wait to be written before requests
// wait for the meter: it bounds the memory, and the money at risk, when the
// store falls behind.
const meterQueue = 16384

// meter writes metered requests to the store off the requests' path, in
// batches, and then releases their reservations. Its goroutine is started
// by New and stopped by close, which writes what waits first.
type meter struct {
	store   idlegrid.InferenceStore
	log     *slog.Logger
	metrics *metrics
	in      chan meterItem
	done    chan struct{}

	mu     sync.RWMutex // held for reading while sending on in
	closed bool
}

// meterItem is a charge to write, or a barrier (sync) to close once all
// before it are written.
type meterItem struct {
	charge  idlegrid.InferenceCharge
	res     *reservation
	barrier chan struct{}
}

func startMeter(s idlegrid.InferenceStore, ms *metrics, log *slog.Logger) *meter {
	m := &meter{store: s, log: log, metrics: ms, in: make(chan meterItem, meterQueue), done: make(chan struct{})}
	go m.run()
	return m
}

// add queues a charge; the reservation is released once it is written.
// After close it writes the charge itself.
func (m *meter) add(c idlegrid.InferenceCharge, res *reservation) {
	m.mu.RLock()
	if !m.closed {
		m.in <- meterItem{charge: c, res: res}
		m.mu.RUnlock()
		return
	}
	m.mu.RUnlock()
	m.write([]meterItem{{charge: c, res: res}})
}

func (m *meter) run() {
	defer close(m.done)
	batch := make([]meterItem, 0, meterBatch)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for it := range m.in {
		m.write(m.gather(append(batch[:0], it), linger))
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
// closes the barriers among them.
func (m *meter) write(batch []meterItem) {
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
	for j, i := range idx {
		it := batch[i]
		charged := it.charge.Usage.ChargeMicros
		if err := errs[j]; err != nil {
			charged = 0
			m.metrics.chargesLost.Inc()
			m.log.Error("gateway: could not record an inference charge", "request", it.charge.Usage.ID,
				"renter", it.charge.Usage.RenterID, "charge", it.charge.Usage.ChargeMicros, "err", err)
		}
		if it.res != nil {
			it.res.release(charged)
		}
	}
	for _, it := range batch {
		if it.barrier != nil {
			close(it.barrier)
		}
	}
}

// sync waits until every charge queued before it is written.
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

// close writes what waits and stops the meter's goroutine.
func (m *meter) close() {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.in)
	}
	m.mu.Unlock()
	<-m.done
}
