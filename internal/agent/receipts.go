package agent

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/atomicfile"
	"github.com/idlegrid/idlegrid/internal/backoff"
	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// Usage receipts. For every lease whose workload runs, the agent signs a
// receipt each receipt interval, and a last one when the workload exits:
// how many GPU-seconds the workload ran in the interval, how busy its GPUs
// were and, where the driver reports power draw, the energy they used. Each
// receipt names the hash of the one before, and the renter is charged from
// them. The lease's ship goroutine cuts and sends them (sendReceipts); they
// wait in memory, in order, until the server accepts them, and the lease's
// final report waits for them. The chain's state is also kept on disk
// (DATA_DIR/receipts/LEASE.json), so that an agent that restarts and takes
// its workloads back (adopt) goes on with their receipts where it stopped.
// A lease whose end the server has not had when the agent stops keeps its
// state there, with its final report (retire), and so does one whose
// workload vanished in a crash: the next agent sends their receipts and
// ends (recoverMeters).
//
// Two rules keep the chain one the server can take to the end of the lease:
//
//   - No receipt leaves the node before the state that holds it is on disk
//     (meter.unsaved). An agent that restarts goes on from that state; had
//     it sent a receipt the state does not hold, it would sign that
//     sequence number again with other contents, which the server reads as
//     forgery.
//   - A receipt the server refuses is dropped, and the receipts after it are
//     chained to the one before it (meter.drop) and checked against the
//     server's last (meter.rebase), so that one refusal costs its own
//     interval, not the rest of the lease's pay.

// DefaultReceiptInterval is how often a running lease gets a receipt when
// the config sets no receipt_interval.
const DefaultReceiptInterval = 60 * time.Second

// maxReceiptsPerSend bounds one request's receipts.
const maxReceiptsPerSend = 100

func (c *Config) receiptInterval() time.Duration {
	if c.ReceiptInterval > 0 {
		return c.ReceiptInterval
	}
	return DefaultReceiptInterval
}

// meter counts one lease's usage and keeps its receipts. Its zero value
// waits for begin. It is safe for concurrent use: the watch loop samples,
// the lease's goroutines begin and stop it, and ship cuts and sends.
type meter struct {
	mu       sync.Mutex
	path     string // where the chain's state is kept; "" keeps it in memory only
	leaseID  string
	gpus     []string
	limit    time.Duration // the lease's time limit; 0 when unknown
	began    time.Time     // when the workload started, on the agent's clock; zero until then
	ended    time.Time     // when it exited; zero while it runs
	cut      time.Time     // where the next receipt starts
	final    bool          // the last receipt has been cut
	seq      int64         // of the last receipt cut
	prevHash string        // of the last receipt cut
	// unsent are the receipts cut and not yet accepted, in order. The first
	// follows the last receipt the server is known to have (or, when the
	// server has none, is receipt 1); with none unsent, seq and prevHash
	// are that receipt's.
	unsent []idlegrid.Receipt
	// doubt is set when the chain may not follow the server's: a receipt
	// was refused, or the chain was resumed from disk. Nothing is sent
	// until rebase has checked it against the server's last receipt.
	doubt bool
	// unsaved is set while the state on disk is older than this meter's
	// (the last write failed): pending gives nothing to send until keep
	// has written it.
	unsaved bool
	held    bool // a failed write was logged (noteHeld)
	// report is the lease's final report when the agent that ran it could
	// not deliver it (it shut down first): kept with the receipts, so that
	// the next agent sends both (recoverMeters).
	report *idlegrid.LeaseReport

	// Telemetry since cut: the lease's GPUs' mean utilisation at each
	// sample, and their power draw held from one sample to the next.
	utilSum    int64
	samples    int64
	lastUtil   int
	powerW     int       // the lease's GPUs' draw at the last sample; 0 when unknown
	powerSince time.Time // since when powerW has been counted
	energyWus  int64     // watt-microseconds since cut
}

// begin starts the meter of a lease whose workload runs on gpus, started
// at now, with the GPUs' last telemetry, and keeps its state at path.
func (m *meter) begin(path, leaseID string, gpus []string, limitSeconds int64, now time.Time, last map[string]gpuSample) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.path, m.leaseID, m.gpus = path, leaseID, append([]string(nil), gpus...)
	m.limit = time.Duration(limitSeconds) * time.Second
	m.began, m.cut = now, now
	m.lastUtil, m.powerW = meanUtil(gpus, last), totalPower(gpus, last)
	m.powerSince = now
	return m.save()
}

// stopAt records that the workload exited at at, as its runtime says
// (runtime.Exit.At), learnt at now; at now when at is zero. The end is
// never before the meter began, nor after now (the runtime's clock is not
// the agent's). A workload that ended while no agent ran is reported when
// an agent takes it back: it is charged up to when it ended, not for the
// time until then. The end is kept on disk, so that an agent that
// restarts after it charges no more.
func (m *meter) stopAt(at, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ended.IsZero() { // kept from before a restart
		return
	}
	end := now
	if !at.IsZero() && at.Before(now) {
		end = at
	}
	if !m.began.IsZero() && end.Before(m.began) {
		end = m.began
	}
	m.ended = end
	_ = m.save() // a failed write is mended by keep, before anything is sent
}

// gpuSample is one GPU's telemetry.
type gpuSample struct {
	utilPct int
	powerW  int
}

// sample counts the GPUs' telemetry at now.
func (m *meter) sample(now time.Time, by map[string]gpuSample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.began.IsZero() || !m.ended.IsZero() {
		return
	}
	m.holdPower(now)
	m.lastUtil, m.powerW = meanUtil(m.gpus, by), totalPower(m.gpus, by)
	m.utilSum += int64(m.lastUtil)
	m.samples++
}

// holdPower counts the held power draw up to t. m.mu is held.
func (m *meter) holdPower(t time.Time) {
	if t.After(m.powerSince) {
		m.energyWus += int64(m.powerW) * t.Sub(m.powerSince).Microseconds()
		m.powerSince = t
	}
}

func meanUtil(gpus []string, by map[string]gpuSample) int {
	sum, n := 0, 0
	for _, u := range gpus {
		if s, ok := by[u]; ok {
			sum, n = sum+s.utilPct, n+1
		}
	}
	if n == 0 {
		return 0
	}
	return min(max(sum/n, 0), 100)
}

// totalPower is the GPUs' draw, or 0 when any of them does not report it.
func totalPower(gpus []string, by map[string]gpuSample) int {
	sum := 0
	for _, u := range gpus {
		s, ok := by[u]
		if !ok || s.powerW <= 0 {
			return 0
		}
		sum += s.powerW
	}
	return sum
}

// cutDue cuts every receipt whose interval has passed by now, and the last
// one once the workload has exited, signing each with key. Regular
// receipts start every interval from the workload's start; the last ends
// at the exit, rounded down to a whole second of run time.
func (m *meter) cutDue(now time.Time, interval time.Duration, key ed25519.PrivateKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.began.IsZero() || m.final {
		return nil
	}
	seq := m.seq
	until := now
	if !m.ended.IsZero() {
		until = m.ended
	}
	for !m.cut.Add(interval).After(until) {
		m.cutOne(m.cut.Add(interval), key)
	}
	if !m.ended.IsZero() {
		if end := m.began.Add(m.ended.Sub(m.began).Truncate(time.Second)); end.After(m.cut) {
			m.cutOne(end, key)
		}
		m.final = true
	}
	if m.seq == seq {
		return nil
	}
	return m.save()
}

// cutOne cuts the receipt from m.cut to end. m.mu is held.
func (m *meter) cutOne(end time.Time, key ed25519.PrivateKey) {
	m.holdPower(end)
	util := m.lastUtil
	if m.samples > 0 {
		util = int(m.utilSum / m.samples)
	}
	r := idlegrid.Receipt{
		LeaseID: m.leaseID, Seq: m.seq + 1, Start: m.cut, End: end,
		GPUSeconds: int64(len(m.gpus)) * m.ranSeconds(m.cut, end),
		AvgUtilPct: util, EnergyWh: m.energyWus / 3600e6, PrevHash: m.prevHash,
	}
	nodekey.SignReceipt(key, &r)
	m.unsent = append(m.unsent, r)
	m.seq, m.prevHash, m.cut = r.Seq, r.Hash(), end
	m.utilSum, m.samples = 0, 0
	m.energyWus %= 3600e6 // the part of a watt-hour not counted yet
}

// ranSeconds is how many whole seconds of [from, to] the workload ran
// within its time limit. m.mu is held.
func (m *meter) ranSeconds(from, to time.Time) int64 {
	if m.limit > 0 {
		if stop := m.began.Add(m.limit); to.After(stop) {
			to = stop
		}
	}
	if !m.ended.IsZero() && to.After(m.ended) {
		to = m.ended
	}
	if !to.After(from) {
		return 0
	}
	// Whole seconds of run time at both ends, so that the receipts of a
	// lease add up to its run time rounded down, never more.
	return int64(to.Sub(m.began)/time.Second) - int64(from.Sub(m.began)/time.Second)
}

// pending returns up to n receipts not yet accepted, oldest first; none
// while the state that holds them is not on disk (see keep).
func (m *meter) pending(n int) []idlegrid.Receipt {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unsaved {
		return nil
	}
	return append([]idlegrid.Receipt(nil), m.unsent[:min(n, len(m.unsent))]...)
}

// keep writes the meter's state again if the last write failed, and
// returns the error while the disk still does not hold it. A receipt is
// sent only once the state that holds it is on disk: the state an agent
// restarts from then holds every receipt the server may have, and no
// sequence number goes out twice with other contents.
func (m *meter) keep() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.unsaved {
		return nil
	}
	return m.save()
}

// noteHeld records whether the receipts are held back for a failed write,
// and reports whether that changed.
func (m *meter) noteHeld(held bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := m.held != held
	m.held = held
	return changed
}

// unsentCount is how many receipts are not accepted yet.
func (m *meter) unsentCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.unsent)
}

// finished reports whether the last receipt has been cut.
func (m *meter) finished() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.final
}

// done drops the first n receipts: the server has them.
func (m *meter) done(n int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unsent = m.unsent[min(n, len(m.unsent)):]
	return m.save()
}

// unsure reports whether the chain must be checked against the server's
// before anything is sent.
func (m *meter) unsure() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.doubt
}

// settle takes the chain as it is.
func (m *meter) settle() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.doubt = false
}

// check marks the chain to be checked against the server's before
// anything more is sent (rebaseReceipts).
func (m *meter) check() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.doubt = true
}

// drop drops the first n unsent receipts, which the server refused, and
// chains the rest to the receipt before them, the server's last as far as
// this meter knows, signing them again with key; without that they would
// chain to receipts the server does not have, and be refused in turn. The
// chain is then checked against the server's (check), which may know
// better.
func (m *meter) drop(n int, key ed25519.PrivateKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n <= 0 || len(m.unsent) == 0 {
		return nil
	}
	first := m.unsent[0] // it follows the server's last (see unsent)
	m.unsent = m.unsent[min(n, len(m.unsent)):]
	m.doubt = true
	// first starts no earlier than the receipt before it ended, so no
	// receipt after it is taken for one the server has.
	return m.rechain(first.Seq-1, first.PrevHash, first.Start, key)
}

// rebase goes on with the chain from last, the server's last accepted
// receipt (nil: it has none). Unsent receipts whose interval the server
// already has, or overlaps, are dropped: it has them, or others for that
// time, and an accepted receipt sent again with other contents reads as
// forgery. The rest are renumbered and chained to last, and signed again
// with key where that changed them; the next receipt follows them.
func (m *meter) rebase(last *idlegrid.Receipt, key ed25519.PrivateKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.doubt = false
	var seq int64
	var hash string
	var end time.Time
	if last != nil {
		seq, hash, end = last.Seq, last.Hash(), last.End
	}
	return m.rechain(seq, hash, end, key)
}

// rechain goes on with the chain from the receipt numbered seq, of the
// given hash, which ended at end (0, "": none): see rebase. m.mu is held.
func (m *meter) rechain(seq int64, hash string, end time.Time, key ed25519.PrivateKey) error {
	kept := make([]idlegrid.Receipt, 0, len(m.unsent))
	for _, r := range m.unsent {
		if r.Start.Before(end) {
			continue
		}
		if r.Seq != seq+1 || r.PrevHash != hash {
			r.Seq, r.PrevHash = seq+1, hash
			nodekey.SignReceipt(key, &r)
		}
		kept = append(kept, r)
		seq, hash = r.Seq, r.Hash()
	}
	m.unsent, m.seq, m.prevHash = kept, seq, hash
	if m.cut.Before(end) { // the server has receipts past what this agent kept
		m.cut = end
		m.utilSum, m.samples, m.energyWus = 0, 0, 0
		if m.powerSince.Before(end) {
			m.powerSince = end
		}
	}
	return m.save()
}

// sendReceipts cuts the lease's receipts that are due, and its last one
// once the workload has exited, and sends those the server does not have
// yet, in order, retrying until it takes them. Nothing is sent while the
// state that holds it cannot be written (keepReceipts). A receipt the
// server finds wrong (invalid) is dropped and logged, and the receipts
// after it go on from the receipt before it (meter.drop), checked against
// the server's last (rebaseReceipts), so that one refusal does not cost
// the rest of the lease's pay; to find it in a batch, the chain is checked
// against the server's (which keeps the receipts before it) and the rest
// sent a receipt at a time until one is refused. A batch refused as a
// conflict is checked against the server's chain and sent once more
// before it is dropped: another request may have stored it, or the lease
// has ended and takes no more. It returns false when ctx ended first.
func (a *Agent) sendReceipts(ctx context.Context, l *lease) bool {
	// A failed write is reported, and mended, by keepReceipts.
	_ = l.meter.cutDue(a.clock.Now(), a.cfg.receiptInterval(), a.key)
	perSend, conflicted := maxReceiptsPerSend, false
	var probeTo int64 // sending a receipt at a time: the last of the batch refused
	for {
		if l.meter.unsure() && !a.rebaseReceipts(ctx, l) {
			return false
		}
		if !a.keepReceipts(ctx, l) {
			return ctx.Err() == nil
		}
		batch := l.meter.pending(perSend)
		if len(batch) == 0 {
			return true
		}
		err := a.deliver(ctx, "send usage receipts", func(ctx context.Context) error {
			return a.srv.SendReceipts(ctx, l.id, batch)
		})
		code := idlegrid.ErrorCode(err)
		switch {
		case ctx.Err() != nil:
			return false
		case err == nil:
			_ = l.meter.done(len(batch))
			conflicted = false
			if batch[len(batch)-1].Seq >= probeTo { // past the refused batch, none of it refused alone
				perSend = maxReceiptsPerSend
			}
		case code == idlegrid.EINVALID && len(batch) > 1:
			// One of them was refused. A server that keeps the receipts
			// before it has them now, and the check drops them here; the
			// rest of the batch goes a receipt at a time until the one
			// refused is found, and what follows it in batches again.
			perSend, probeTo = 1, batch[len(batch)-1].Seq
			l.meter.check()
		case code == idlegrid.EINVALID:
			a.log.Warn("server refused a usage receipt; dropping it, the next go on from the receipt before it",
				"lease", l.id, "seq", batch[0].Seq, "err", err)
			_ = l.meter.drop(1, a.key)
			perSend, conflicted = maxReceiptsPerSend, false
		case code == idlegrid.ECONFLICT && !conflicted:
			conflicted = true
			l.meter.check()
		default:
			if l.endedByServer() {
				// It ended while the node could not hear (the node was
				// lost in an outage, say): what ran since is no one's to pay.
				a.log.Info("the server had ended the lease before these usage receipts reached it; they are not paid",
					"lease", l.id, "from_seq", batch[0].Seq, "receipts", len(batch), "err", err)
			} else {
				a.log.Warn("server refused usage receipts; dropping them, the next go on from the receipt before them",
					"lease", l.id, "from_seq", batch[0].Seq, "receipts", len(batch), "err", err)
			}
			_ = l.meter.drop(len(batch), a.key)
			conflicted = false
		}
	}
}

// finalWriteAttempts is how many more times the receipt state of a lease
// whose workload has exited is written, backing off, before its unsent
// receipts are given up so that the final report can go.
const finalWriteAttempts = 5

// keepReceipts reports whether the lease's receipt state is on disk, so
// that its receipts may be sent (meter.keep), writing it again if the last
// write failed. While the workload runs, receipts that cannot be kept wait
// for a later pass, and the lease's output still flows. Once it has exited
// the final report waits on them: the write is tried finalWriteAttempts
// more times, and then the receipts not sent are given up, logged: the
// lease ends charged for what was accepted, rather than run on with no
// receipts until the server fails it.
func (a *Agent) keepReceipts(ctx context.Context, l *lease) bool {
	err := l.meter.keep()
	if err != nil && l.meter.finished() {
		var b backoff.Backoff
		for range finalWriteAttempts {
			if !backoff.Sleep(ctx, b.Next()) {
				return false
			}
			if err = l.meter.keep(); err == nil {
				break
			}
		}
		if err != nil {
			a.log.Error("could not keep the lease's last usage receipts on disk; they are not sent, and the lease is reported without them",
				"lease", l.id, "receipts", l.meter.unsentCount(), "err", err)
			return false
		}
	}
	switch {
	case err == nil:
		if l.meter.noteHeld(false) {
			a.log.Info("the lease's usage receipts are kept on disk again; sending them", "lease", l.id)
		}
		return true
	case l.meter.noteHeld(true):
		a.log.Error("could not keep the lease's usage receipts on disk; they are held back until they can be, "+
			"since a restart could otherwise sign the same receipt number again with other contents", "lease", l.id, "err", err)
	}
	return false
}

// rebaseReceipts asks the server for the lease's last accepted receipt and
// goes on with the chain from it (meter.rebase). A server that will not
// say (one older than this agent answers 404) leaves the chain as it is,
// as agents before it did. It returns false when ctx ended first.
func (a *Agent) rebaseReceipts(ctx context.Context, l *lease) bool {
	var last *idlegrid.Receipt
	err := a.deliver(ctx, "ask for the last usage receipt", func(ctx context.Context) (err error) {
		last, err = a.srv.LastReceipt(ctx, l.id)
		return err
	})
	switch {
	case ctx.Err() != nil:
		return false
	case err != nil:
		a.log.Warn("the server did not say which usage receipt of the lease it has last; going on with the chain as this node keeps it", "lease", l.id, "err", err)
		l.meter.settle()
		return true
	case last != nil && (last.LeaseID != l.id || nodekey.VerifyReceipt(a.key.Public().(ed25519.PublicKey), last) != nil):
		a.log.Warn("the server's last usage receipt is not one this node signed for the lease; going on with the chain as it is", "lease", l.id)
		l.meter.settle()
		return true
	}
	_ = l.meter.rebase(last, a.key) // a failed write holds the receipts back (keepReceipts)
	return true
}

// telemetry is the GPUs' last telemetry, which a lease's meter starts
// from.
type telemetry struct {
	mu   sync.Mutex
	last map[string]gpuSample
}

func (t *telemetry) get() map[string]gpuSample {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// sampleUsage passes one look at the GPUs to the running leases' meters.
func (a *Agent) sampleUsage(devs []gpu.Device) {
	by := make(map[string]gpuSample, len(devs))
	for _, d := range devs {
		by[d.UUID] = gpuSample{utilPct: d.UtilPct, powerW: d.PowerDrawW}
	}
	a.telemetry.mu.Lock()
	a.telemetry.last = by
	a.telemetry.mu.Unlock()
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, l := range a.leases {
		l.meter.sample(now, by)
	}
}

// beginMeter starts the meter of a lease whose workload has just started.
func (a *Agent) beginMeter(l *lease) {
	err := l.meter.begin(meterPath(a.cfg.DataDir, l.id), l.id, l.w.GPUs, l.w.LimitSeconds, a.clock.Now(), a.telemetry.get())
	if err != nil {
		a.log.Warn("could not keep the lease's receipt state on disk; its receipts are held back until it can be", "lease", l.id, "err", err)
	}
}

// resumeMeter goes on with the receipts of a workload a previous agent
// started, from the state it left on disk. Without that state the lease
// gets no more receipts: a chain started anew would not follow the one the
// server has, and the renter is not charged for what no receipt shows.
func (a *Agent) resumeMeter(l *lease) {
	path := meterPath(a.cfg.DataDir, l.id)
	err := l.meter.resume(path, a.telemetry.get())
	switch {
	case errors.Is(err, os.ErrNotExist):
		a.log.Warn("no receipt state for a workload taken back; the rest of its run gets no receipts", "lease", l.id)
	case err != nil:
		a.log.Warn("cannot go on with a taken-back workload's receipts; the rest of its run gets none", "lease", l.id, "err", err)
	}
}

// kept reports whether the meter's state is kept on disk: it began, and
// its lease ID names a file.
func (m *meter) kept() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.path != "" && !m.began.IsZero()
}

// keepReport keeps r, the lease's final report the server has not had,
// with the meter's state on disk.
func (m *meter) keepReport(r idlegrid.LeaseReport) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.report = &r
	return m.save()
}

// savedReport is the final report kept with the state (keepReport), or
// nil.
func (m *meter) savedReport() *idlegrid.LeaseReport {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.report == nil {
		return nil
	}
	r := *m.report
	return &r
}

// endAtCut records, for a workload that is gone without an Exit anyone
// saw, that it ran up to where its receipts were cut: the next receipts
// claim nothing more.
func (m *meter) endAtCut(now time.Time) {
	m.mu.Lock()
	cut := m.cut
	m.mu.Unlock()
	m.stopAt(cut, now)
}

// limitFrom returns when the workload began and its lease's time limit;
// ok is false when it has not begun, has ended, or its limit is unknown.
func (m *meter) limitFrom() (began time.Time, limit time.Duration, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.began, m.limit, !m.began.IsZero() && m.ended.IsZero() && m.limit > 0
}

// forgetMeter removes the receipt state of a lease that is done here.
func (a *Agent) forgetMeter(id string) {
	if path := meterPath(a.cfg.DataDir, id); path != "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("could not remove a finished lease's receipt state", "lease", id, "err", err)
		}
	}
}

// meterState is a meter's chain as kept on disk: what a restarted agent
// needs to go on with it.
type meterState struct {
	LeaseID      string             `json:"lease_id"`
	GPUs         []string           `json:"gpus"`
	LimitSeconds int64              `json:"limit_seconds"`
	Began        time.Time          `json:"began"`
	Cut          time.Time          `json:"cut"` // where the next receipt starts
	Seq          int64              `json:"seq"` // of the last receipt cut
	PrevHash     string             `json:"prev_hash"`
	Unsent       []idlegrid.Receipt `json:"unsent"` // cut, not yet accepted
	// Ended is when the workload exited (zero while it runs), and Final
	// says the last receipt has been cut: an agent that restarts after
	// them, and is told of the exit again, charges nothing more.
	Ended time.Time `json:"ended,omitzero"`
	Final bool      `json:"final,omitempty"`
	// Report is the lease's final report, kept when the agent that ran it
	// shut down before the server had it (and its receipts): the next
	// agent sends them (recoverMeters).
	Report *idlegrid.LeaseReport `json:"report,omitempty"`
}

// safeLeaseID is what a lease ID must look like to name a file.
var safeLeaseID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// meterPath is where the receipt state of a lease lives, or "" for a
// lease ID that cannot name a file.
func meterPath(dataDir, leaseID string) string {
	if !safeLeaseID.MatchString(leaseID) {
		return ""
	}
	return filepath.Join(dataDir, "receipts", leaseID+".json")
}

// save writes the meter's state to its path, atomically. m.mu is held.
func (m *meter) save() error {
	if m.path == "" {
		return nil
	}
	st := meterState{
		LeaseID: m.leaseID, GPUs: m.gpus, LimitSeconds: int64(m.limit / time.Second), Began: m.began, Cut: m.cut,
		Seq: m.seq, PrevHash: m.prevHash, Unsent: m.unsent, Ended: m.ended, Final: m.final, Report: m.report,
	}
	data, err := json.Marshal(st)
	if err == nil {
		err = writeFileAtomic(m.path, data)
	}
	m.unsaved = err != nil
	return err
}

// resume restores the meter from the state at path; the workload has kept
// running since, and its GPUs' telemetry is last.
func (m *meter) resume(path string, last map[string]gpuSample) error {
	if path == "" {
		return errors.New("the lease ID cannot name a file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var st meterState
	if err := json.Unmarshal(data, &st); err != nil || st.Began.IsZero() || st.Cut.Before(st.Began) {
		return fmt.Errorf("%s is corrupt", path)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.path, m.leaseID, m.gpus = path, st.LeaseID, st.GPUs
	m.limit = time.Duration(st.LimitSeconds) * time.Second
	m.began, m.cut, m.seq, m.prevHash, m.unsent = st.Began, st.Cut, st.Seq, st.PrevHash, st.Unsent
	m.ended, m.final, m.report = st.Ended, st.Final, st.Report
	m.doubt, m.unsaved = true, false
	m.lastUtil, m.powerW = meanUtil(m.gpus, last), totalPower(m.gpus, last)
	m.powerSince = m.cut
	return nil
}

// writeFileAtomic writes data to path so that a crash, or a power loss,
// leaves the old file or the new one, creating the directory. When it
// returns nil the new file is on disk, so that a receipt sent after it is
// held by the state a restart goes on from.
func writeFileAtomic(path string, data []byte) error { return atomicfile.Write(path, data) }
