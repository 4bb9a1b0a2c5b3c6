package server

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// Usage receipts: a node signs, per lease and per interval, how many
// GPU-seconds its workload ran; the server checks and keeps them, and
// charges the renter from them when the lease ends (see endLease and
// docs/billing.md, "Usage receipts").

// NoReceiptCapSeconds bounds what a lease without a single receipt is
// charged: at most this many seconds of its GPUs (one default receipt
// interval's worth), and never more than its wall-clock GPU-seconds. A node
// that sends no receipts is not paid for more than it can prove.
const NoReceiptCapSeconds = 60

// maxReceiptsPerBatch caps one request's receipts.
const maxReceiptsPerBatch = 1000

// ReceiveReceipts takes signed usage receipts for one of the calling node's
// leases, in order. Each must be signed by the node's key, follow the last
// accepted receipt in sequence and chain, lie between the lease's placement
// and now on the server's clock (give or take nodekey.MaxSkew) without
// overlapping the one before, and claim no more GPU-seconds than the
// lease's GPUs could run in it, nor than the lease's time limit allows.
// Receipts already accepted may be sent again unchanged; that is a no-op,
// so a node retries safely.
//
// A receipt that fails any check is refused with EINVALID naming the field
// and the receipt, and the refusal is logged as evidence against the node.
// The receipts of the batch before it are kept, as if they had been sent
// alone: each passed every check, and the node's pay for them must not
// hang on a later receipt; those after it are not, since they chain to it.
// The node goes on from the last receipt kept (LastReceipt). A lease that
// has ended or not started is ECONFLICT, and keeps nothing.
func (s *Server) ReceiveReceipts(ctx context.Context, leaseID string, rs []idlegrid.Receipt) error {
	c, err := node(ctx)
	if err != nil {
		return err
	}
	if len(rs) > maxReceiptsPerBatch {
		return idlegrid.Invalid("receipts", "at most %d receipts per request", maxReceiptsPerBatch)
	}
	pub, _, err := s.NodeIdentity(ctx, c.NodeID)
	if err != nil {
		return err
	}
	release := s.receiptLocks.lock(leaseID)
	defer release()
	l, err := s.nodeLease(ctx, c.NodeID, leaseID)
	if err != nil {
		return err
	}
	fresh, refused := s.checkReceipts(ctx, l, pub, rs)
	if len(fresh) > 0 {
		if err := s.store.AppendReceipts(ctx, leaseID, fresh); err != nil {
			return err
		}
		if refused != nil {
			return keptBefore(refused, fresh)
		}
	}
	return refused
}

// keptBefore says, in a refusal, which receipts of the batch before the
// refused one were kept.
func keptBefore(refused error, kept []idlegrid.Receipt) error {
	var e *idlegrid.Error
	if !errors.As(refused, &e) {
		return refused
	}
	c := *e
	first, last := kept[0].Seq, kept[len(kept)-1].Seq
	if first == last {
		c.Message += fmt.Sprintf("; receipt %d before it was accepted", last)
	} else {
		c.Message += fmt.Sprintf("; receipts %d to %d before it were accepted", first, last)
	}
	return &c
}

// LastReceipt returns the last receipt the server accepted for one of the
// calling node's leases, or nil when it has none. An agent whose chain has
// drifted from the server's (a batch was refused, or it restarted from a
// state file older than what it had sent) goes on from here, so that one
// refusal or one lost write does not cost the rest of the lease's pay, nor
// get a receipt sent twice with other contents.
func (s *Server) LastReceipt(ctx context.Context, leaseID string) (*idlegrid.Receipt, error) {
	c, err := node(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.nodeLease(ctx, c.NodeID, leaseID); err != nil {
		return nil, err
	}
	_, last, err := s.store.ReceiptUsage(ctx, leaseID)
	return last, err
}

// checkReceipts checks rs against the lease and the receipts it already
// has, and returns those not stored yet that pass, up to the first that
// does not, with the error that refuses it. Receipts the lease already has
// may lead the batch, sent again; the rest must each follow the one before.
func (s *Server) checkReceipts(ctx context.Context, l *idlegrid.Lease, pub ed25519.PublicKey, rs []idlegrid.Receipt) ([]idlegrid.Receipt, error) {
	switch {
	case len(rs) == 0:
		return nil, nil
	case l.State.Terminal():
		return nil, idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s has already ended (%s) and was settled; it takes no more receipts", l.ID, l.State)
	case l.State != idlegrid.LeaseRunning || l.StartedAt == nil:
		return nil, idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s has not started; report it running before sending receipts", l.ID)
	}
	sum, last, err := s.store.ReceiptUsage(ctx, l.ID)
	if err != nil {
		return nil, err
	}
	resent := 0
	for last != nil && resent < len(rs) && rs[resent].Seq >= 1 && rs[resent].Seq <= last.Seq {
		resent++
	}
	if err := s.checkResent(ctx, l, rs[:resent]); err != nil {
		return nil, err
	}
	fresh, now := rs[resent:], s.Now()
	for i := range fresh {
		r := &fresh[i]
		if err := r.Validate(); err != nil {
			return fresh[:i], s.refuseReceipt(ctx, l, r, err)
		}
		if err := nodekey.VerifyReceipt(pub, r); err != nil {
			return fresh[:i], s.refuseReceipt(ctx, l, r, idlegrid.Invalid("receipt.signature", "receipt %d: %v", r.Seq, err))
		}
		if err := checkReceipt(l, last, sum, r, now); err != nil {
			return fresh[:i], s.refuseReceipt(ctx, l, r, err)
		}
		sum, last = sum+r.GPUSeconds, r
	}
	return fresh, nil
}

// checkResent checks that each of rs is the very receipt the lease has
// under its Seq: the same contents and signature.
func (s *Server) checkResent(ctx context.Context, l *idlegrid.Lease, rs []idlegrid.Receipt) error {
	if len(rs) == 0 {
		return nil
	}
	stored, err := s.store.ListReceipts(ctx, l.ID)
	if err != nil {
		return err
	}
	for i := range rs {
		r := &rs[i]
		if r.Seq > int64(len(stored)) {
			return idlegrid.Errorf(idlegrid.ECONFLICT, "the receipts of lease %s changed meanwhile; send them again", l.ID)
		}
		if was := &stored[r.Seq-1]; was.Hash() != r.Hash() || was.Signature != r.Signature {
			return s.refuseReceipt(ctx, l, r, idlegrid.Invalid("receipt.seq",
				"receipt %d was already accepted with other contents; an accepted receipt cannot be changed", r.Seq))
		}
	}
	return nil
}

// checkReceipt checks r, the next receipt after last, against the lease
// and the server's clock; sum is the GPU-seconds of the receipts before it.
func checkReceipt(l *idlegrid.Lease, last *idlegrid.Receipt, sum int64, r *idlegrid.Receipt, now time.Time) error {
	if err := r.CheckAgainst(l, last); err != nil {
		return err
	}
	// The node starts the workload before the server hears that it did
	// (much before, when the server was unreachable), so a receipt may
	// start before l.StartedAt; not before the lease was placed. The
	// charge never exceeds the wall-clock time since l.StartedAt
	// (chargeableGPUSeconds).
	const rfc = time.RFC3339Nano
	if earliest := l.CreatedAt.Add(-nodekey.MaxSkew); r.Start.Before(earliest) {
		return idlegrid.Invalid("receipt.interval", "receipt %d starts at %s, before the lease was placed at %s",
			r.Seq, r.Start.Format(rfc), l.CreatedAt.Format(rfc))
	}
	if latest := now.Add(nodekey.MaxSkew); r.End.After(latest) {
		return idlegrid.Invalid("receipt.interval", "receipt %d ends at %s, which has not come yet (the server's clock says %s)",
			r.Seq, r.End.Format(rfc), now.Format(rfc))
	}
	if limit := int64(len(l.GPUUUIDs)) * l.LimitSeconds; sum+r.GPUSeconds > limit {
		return idlegrid.Invalid("receipt.gpu_seconds", "receipt %d would bring the lease to %d GPU-seconds, more than its limit of %d",
			r.Seq, sum+r.GPUSeconds, limit)
	}
	return nil
}

// refuseReceipt logs a refused receipt as evidence against its node, and
// returns err. An honest agent never sends a receipt that fails a check:
// a bad signature is a forgery, a broken chain or an inflated claim is a
// node misreporting, so the whole receipt is kept in the log.
func (s *Server) refuseReceipt(ctx context.Context, l *idlegrid.Lease, r *idlegrid.Receipt, err error) error {
	field := ""
	var e *idlegrid.Error
	if errors.As(err, &e) {
		field = e.Field
	}
	s.log.Warn("usage receipt refused", "evidence", "receipt", "node", l.NodeID, "provider", l.ProviderID,
		"lease", l.ID, "seq", r.Seq, "field", field, "reason", idlegrid.ErrorMessage(err),
		"start", r.Start, "end", r.End, "gpu_seconds", r.GPUSeconds, "avg_util_pct", r.AvgUtilPct,
		"energy_wh", r.EnergyWh, "prev_hash", r.PrevHash, "hash", r.Hash(), "signature", r.Signature)
	if forgery(field, err) {
		s.forgedReceipt(ctx, l, r, err)
	}
	return err
}

// forgery reports whether a refused receipt proves fraud rather than a
// malformed or out-of-order report: its signature is not the node's, it
// claims more than the lease could run, or it rewrites an accepted one.
func forgery(field string, err error) bool {
	switch field {
	case "receipt.signature", "receipt.gpu_seconds":
		return true
	case "receipt.seq":
		return strings.Contains(idlegrid.ErrorMessage(err), "already accepted")
	}
	return false
}

// forgedReceipt convicts the lease's provider of a forged receipt; the
// harm is what the receipt would have charged the renter.
func (s *Server) forgedReceipt(ctx context.Context, l *idlegrid.Lease, r *idlegrid.Receipt, err error) {
	s.convict(context.WithoutCancel(ctx), offence{
		kind: trustpolicy.OffenceForgedReceipt, providerID: l.ProviderID, nodeID: l.NodeID, leaseID: l.ID,
		renterID: l.RenterID, harm: idlegrid.CostOf(l.PriceMicrosPerGPUHour, r.GPUSeconds),
		evidence: fmt.Sprintf("node %s sent receipt %d of lease %s, refused: %s", l.NodeID, r.Seq, l.ID, idlegrid.ErrorMessage(err)),
		detail:   map[string]any{"receipt": shownReceipt(r), "hash": r.Hash()},
	})
}

// maxShownReceiptText is the most of a refused receipt's signature or
// previous hash a conviction records (a real one is 88 or 64 characters):
// a node's garbage must not make its conviction too big for the audit
// log, and so no conviction at all. The hash recorded is of the whole.
const maxShownReceiptText = 128

// shownReceipt is r as a conviction records it, its long texts cut.
func shownReceipt(r *idlegrid.Receipt) idlegrid.Receipt {
	shown := *r
	for _, s := range []*string{&shown.Signature, &shown.PrevHash, &shown.LeaseID} {
		if len(*s) > maxShownReceiptText {
			*s = fmt.Sprintf("%s… [%d bytes in all]", (*s)[:maxShownReceiptText/2], len(*s))
		}
	}
	return shown
}

// chargeableGPUSeconds is what a lease that ends at now is charged for:
// the GPU-seconds of its accepted receipts, never more than its wall-clock
// GPU-seconds on the server's clock (which stop at its time limit). A lease
// with no receipts is charged its wall-clock GPU-seconds up to
// NoReceiptCapSeconds per GPU. The caller holds the lease's receipt lock,
// so that no receipt is accepted between this sum and the settlement.
func (s *Server) chargeableGPUSeconds(ctx context.Context, l *idlegrid.Lease, now time.Time) (int64, error) {
	wall := l.GPUSeconds(now)
	sum, last, err := s.store.ReceiptUsage(ctx, l.ID)
	if err != nil {
		return 0, err
	}
	if last == nil {
		return min(wall, int64(len(l.GPUUUIDs))*NoReceiptCapSeconds), nil
	}
	return min(sum, wall, int64(len(l.GPUUUIDs))*l.LimitSeconds), nil
}

// LeaseReceipts exports a lease's receipts, in order, with the public key
// of the node that signed them: to the lease's renter, the provider whose
// node ran it, and admins.
func (s *Server) LeaseReceipts(ctx context.Context, leaseID string) (*idlegrid.LeaseReceipts, error) {
	l, err := s.visibleLease(ctx, leaseID)
	if err != nil {
		return nil, err
	}
	n, err := s.store.FindNode(ctx, l.NodeID)
	if err != nil {
		return nil, err
	}
	rs, err := s.store.ListReceipts(ctx, leaseID)
	if err != nil {
		return nil, err
	}
	out := &idlegrid.LeaseReceipts{
		LeaseID: l.ID, NodeID: n.ID, NodePublicKey: n.PublicKey, GPUs: len(l.GPUUUIDs),
		Receipts: rs,
	}
	if out.Receipts == nil {
		out.Receipts = []idlegrid.Receipt{}
	}
	for _, r := range rs {
		out.GPUSeconds += r.GPUSeconds
	}
	return out, nil
}

// leaseLocks serialises, per lease, the acceptance of its receipts with its
// settlement, so that a receipt is either counted in the charge or refused
// because the lease has ended; never stored and left uncharged. It is
// striped: leases share a fixed set of mutexes. Holders must not take a
// second stripe.
type leaseLocks [64]sync.Mutex

// lock locks leaseID's stripe and returns its unlock.
func (ls *leaseLocks) lock(leaseID string) (unlock func()) {
	h := fnv.New32a()
	h.Write([]byte(leaseID))
	m := &ls[h.Sum32()%uint32(len(ls))]
	m.Lock()
	return m.Unlock
}
