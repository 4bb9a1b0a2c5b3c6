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
	unsent   []idlegrid.Receipt
	// doubt is set when the chain may not follow the server's: a receipt
	// was refused, or the chain was resumed from disk, which may be older
	// than what was sent. Nothing is sent until rebase has checked it
	// against the server's last receipt.
	doubt bool

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

// stop records that the workload exited at now.
func (m *meter) stop(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ended.IsZero() {
		m.ended = now
	}
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

// pending returns up to n receipts not yet accepted, oldest first.
func (m *meter) pending(n int) []idlegrid.Receipt {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]idlegrid.Receipt(nil), m.unsent[:min(n, len(m.unsent))]...)
}

// done drops the first n receipts: the server has them, or refused them.
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

// refused drops the first unsent receipt, which the server refused; the
// rest chain to it, so the chain must be checked against the server's.
// It is kept on disk by the rebase that follows.
func (m *meter) refused() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unsent = m.unsent[min(1, len(m.unsent)):]
	m.doubt = true
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
// yet, in order, retrying until it takes them. A receipt the server finds
// wrong is dropped and logged, and the receipts after it go on from the
// server's last (rebaseReceipts), so that one refusal does not cost the
// rest of the lease's pay; to find it, the batch it came in is sent again
// one receipt at a time. When the lease has ended, the server takes no
// more and the rest are dropped. It returns false when ctx ended first.
func (a *Agent) sendReceipts(ctx context.Context, l *lease) bool {
	if err := l.meter.cutDue(a.clock.Now(), a.cfg.receiptInterval(), a.key); err != nil {
		a.log.Warn("could not keep the lease's receipts on disk; they are kept in memory", "lease", l.id, "err", err)
	}
	perSend := maxReceiptsPerSend
	for {
		if l.meter.unsure() && !a.rebaseReceipts(ctx, l) {
			return false
		}
		batch := l.meter.pending(perSend)
		if len(batch) == 0 {
			return true
		}
		err := a.deliver(ctx, "send usage receipts", func(ctx context.Context) error {
			return a.srv.SendReceipts(ctx, l.id, batch)
		})
		switch {
		case ctx.Err() != nil:
			return false
		case idlegrid.ErrorCode(err) == idlegrid.EINVALID && len(batch) > 1:
			perSend = 1 // nothing of it was kept: find the receipt refused
			continue
		case idlegrid.ErrorCode(err) == idlegrid.EINVALID:
			a.log.Warn("server refused a usage receipt; dropping it, the next go on from the server's last",
				"lease", l.id, "seq", batch[0].Seq, "err", err)
			l.meter.refused()
			continue
		case err != nil:
			a.log.Warn("server refused usage receipts; dropping them", "lease", l.id,
				"from_seq", batch[0].Seq, "receipts", len(batch), "err", err)
		}
		if err := l.meter.done(len(batch)); err != nil {
			a.log.Warn("could not keep the lease's receipts on disk; they are kept in memory", "lease", l.id, "err", err)
		}
	}
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
		a.log.Warn("the server did not say which usage receipt of the lease it has last; going on with the chain as it is", "lease", l.id, "err", err)
		l.meter.settle()
		return true
	case last != nil && (last.LeaseID != l.id || nodekey.VerifyReceipt(a.key.Public().(ed25519.PublicKey), last) != nil):
		a.log.Warn("the server's last usage receipt is not one this node signed for the lease; going on with the chain as it is", "lease", l.id)
		l.meter.settle()
		return true
	}
	if err := l.meter.rebase(last, a.key); err != nil {
		a.log.Warn("could not keep the lease's receipts on disk; they are kept in memory", "lease", l.id, "err", err)
	}
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
		a.log.Warn("could not keep the lease's receipts on disk; they are kept in memory", "lease", l.id, "err", err)
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
		Seq: m.seq, PrevHash: m.prevHash, Unsent: m.unsent,
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return writeFileAtomic(m.path, data)
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
	m.doubt = true
	m.lastUtil, m.powerW = meanUtil(m.gpus, last), totalPower(m.gpus, last)
	m.powerSince = m.cut
	return nil
}

// writeFileAtomic writes data to path through a temporary file, so that a
// crash leaves the old file or the new one, creating the directory.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
