package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// This file is bonds and disputes: a provider stakes a bond; a proven
// offence takes the trust policy's penalty from it, to the harmed renter
// or the market, in the same transaction that records the dispute and its
// evidence. Offences the market proves by itself (a forged receipt, a
// broken notice, a failed hardware challenge, a mismatched re-run) are
// upheld at once; an operator may open, uphold or dismiss others.

// PostBond stakes amount as a provider's bond. A provider stakes its own
// payable earnings; an admin records a deposit from outside the market
// for any provider. A retry with the same idempotency key moves nothing.
func (s *Server) PostBond(ctx context.Context, providerID string, amount idlegrid.Micros, idempotencyKey string) (*idlegrid.Balance, error) {
	b, _, err := s.PostBondOnce(ctx, providerID, amount, idempotencyKey)
	return b, err
}

// PostBondOnce is PostBond, saying too whether the key had staked it
// before (replayed): this one moved nothing.
func (s *Server) PostBondOnce(ctx context.Context, providerID string, amount idlegrid.Micros, idempotencyKey string) (b *idlegrid.Balance, replayed bool, err error) {
	c, err := requireManage(ctx, idlegrid.RoleProvider, idlegrid.RoleAdmin)
	if err != nil {
		return nil, false, err
	}
	from := ledger.BondFromPayable
	if c.IsAdmin() {
		from = ledger.BondFromWorld
		if err := s.mustProvider(ctx, "bond.provider_id", providerID); err != nil {
			return nil, false, err
		}
	} else if providerID != "" && providerID != c.AccountID {
		return nil, false, notFound("account", providerID)
	} else {
		providerID = c.AccountID
	}
	t, err := ledger.Bond(providerID, amount, from, idempotencyKey, s.Now())
	if err != nil {
		return nil, false, err
	}
	out, err := s.store.PostTransfer(ctx, t)
	if err != nil {
		return nil, false, callersKey(err, idempotencyKey, "a bond of provider "+providerID+" of another amount or source")
	}
	s.log.Info("bond staked", "provider", providerID, "amount", amount.String(), "by", c.AccountID)
	b, err = s.store.Balance(ctx, providerID)
	return b, out.ID != t.ID, err
}

// ReleaseBond gives amount of the calling provider's bond back to its
// payable earnings. It is refused while a dispute against the provider is
// open, since the bond may yet be needed.
func (s *Server) ReleaseBond(ctx context.Context, amount idlegrid.Micros, idempotencyKey string) (*idlegrid.Balance, error) {
	b, _, err := s.ReleaseBondOnce(ctx, amount, idempotencyKey)
	return b, err
}

// ReleaseBondOnce is ReleaseBond, saying too whether the key had released
// it before (replayed): this one moved nothing.
func (s *Server) ReleaseBondOnce(ctx context.Context, amount idlegrid.Micros, idempotencyKey string) (b *idlegrid.Balance, replayed bool, err error) {
	c, err := requireManage(ctx, idlegrid.RoleProvider)
	if err != nil {
		return nil, false, err
	}
	t, err := ledger.ReleaseBond(c.AccountID, amount, idempotencyKey, s.Now())
	if err != nil {
		return nil, false, err
	}
	out, err := s.store.ReleaseBond(ctx, t, c.AccountID)
	if err != nil {
		return nil, false, callersKey(err, idempotencyKey, "a release of another amount")
	}
	b, err = s.store.Balance(ctx, c.AccountID)
	return b, out.ID != t.ID, err
}

// mustProvider refuses, naming field, an id that is not a provider's.
func (s *Server) mustProvider(ctx context.Context, field, id string) error {
	return s.mustRole(ctx, field, id, idlegrid.RoleProvider)
}

// mustRole refuses, naming field, an id that is not an account of role.
func (s *Server) mustRole(ctx context.Context, field, id string, role idlegrid.Role) error {
	if id == "" {
		return idlegrid.Invalid(field, "required: the %s account's ID", role)
	}
	a, err := s.store.FindAccount(ctx, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return idlegrid.Invalid(field, "no account %q", id)
	} else if err != nil {
		return err
	} else if a.Role != role {
		return idlegrid.Invalid(field, "%s is a %s account, not a %s", id, a.Role, role)
	}
	return nil
}

// checkParties refuses a dispute whose node or lease is not the
// provider's, or whose renter is not a renter (or not the lease's): a
// penalty paid to the wrong account could not be taken back. It returns
// the harmed renter: the one named, else the named lease's, so that a
// penalty owed to the renter is not paid to the market.
func (s *Server) checkParties(ctx context.Context, d idlegrid.Dispute) (renter string, err error) {
	var f idlegrid.Faults
	fault := func(err error) error { // a fault of the input is kept; a store's error ends the check
		if idlegrid.ErrorCode(err) == idlegrid.EINVALID {
			f.Also(err)
			return nil
		}
		return err
	}
	if err := fault(s.mustProvider(ctx, "dispute.provider_id", d.ProviderID)); err != nil {
		return "", err
	}
	if d.NodeID != "" {
		n, err := s.store.FindNode(ctx, d.NodeID)
		if err != nil && idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			return "", err
		}
		f.Check(err == nil, "dispute.node_id", "no node %q", d.NodeID)
		f.Check(err != nil || n.ProviderID == d.ProviderID, "dispute.node_id", "node %s is not provider %s's", d.NodeID, d.ProviderID)
	}
	renter = d.RenterID
	if d.LeaseID != "" {
		l, err := s.store.FindLease(ctx, d.LeaseID)
		if err != nil && idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			return "", err
		}
		f.Check(err == nil, "dispute.lease_id", "no lease %q", d.LeaseID)
		if err == nil {
			f.Check(l.ProviderID == d.ProviderID, "dispute.lease_id", "lease %s ran for provider %s, not %s", l.ID, l.ProviderID, d.ProviderID)
			f.Check(d.NodeID == "" || l.NodeID == d.NodeID, "dispute.lease_id", "lease %s ran on node %s, not %s", l.ID, l.NodeID, d.NodeID)
			f.Check(renter == "" || l.RenterID == renter, "dispute.renter_id", "lease %s was renter %s's, not %s", l.ID, l.RenterID, renter)
			renter = cmp.Or(renter, l.RenterID)
		}
	}
	if renter != "" {
		if err := fault(s.mustRole(ctx, "dispute.renter_id", renter, idlegrid.RoleRenter)); err != nil {
			return "", err
		}
	}
	return renter, f.Err()
}

// offence is what a detector found: the offence, who committed it, whom it
// harmed and by how much, and the evidence.
type offence struct {
	kind       trustpolicy.Offence
	providerID string
	nodeID     string
	leaseID    string
	renterID   string
	harm       idlegrid.Micros
	evidence   string
	detail     any // marshalled as the dispute's Detail
	// idempotencyKey and requestSHA256 are an operator's key of the
	// opening and the digest of its request; "" for the market's own.
	idempotencyKey string
	requestSHA256  string
}

// convictTries is how often convict prices a penalty against a bond that
// shrinks under it before it gives up.
const convictTries = 3

// convict records a proven offence as an upheld dispute and takes its
// penalty from the bond. A second conviction for the same offence on the
// same lease changes nothing. Errors are logged, not returned: a detector
// must not fail the request that revealed the offence.
func (s *Server) convict(ctx context.Context, o offence) *idlegrid.Dispute {
	d, err := s.tryConvict(ctx, o)
	if err != nil {
		s.log.Error("record offence", "offence", o.kind, "provider", o.providerID, "lease", o.leaseID, "err", err)
	}
	return d
}

// tryConvict is convict that returns its error, for a follow-up that is
// tried again until it succeeds (followup.go). It returns nil, and no
// error, when the offence was convicted already.
func (s *Server) tryConvict(ctx context.Context, o offence) (*idlegrid.Dispute, error) {
	var d *idlegrid.Dispute
	var err error
	for try := 1; ; try++ {
		d, err = s.openDispute(ctx, o, idlegrid.DisputeUpheld, "market", "proven by the market's own check")
		// EPAYMENT: the bond shrank (a release) between pricing the
		// penalty and taking it, and the dispute went with it: price it
		// again on the bond left.
		if idlegrid.ErrorCode(err) != idlegrid.EPAYMENT || try == convictTries {
			break
		}
	}
	if idlegrid.ErrorCode(err) == idlegrid.ECONFLICT {
		d, err = s.upholdOpen(ctx, o) // an operator's dispute is open for it, or it was convicted already
	}
	if err != nil || d == nil {
		return nil, err
	}
	s.log.Warn("offence upheld", "dispute", d.ID, "offence", d.Offence, "provider", d.ProviderID, "node", d.NodeID,
		"lease", d.LeaseID, "penalty", d.PenaltyMicros.String(), "to", d.PenaltyTo, "evidence", d.Evidence)
	s.noticeDecided(ctx, d)
	s.restandSoon(d)
	return d, nil
}

// upholdOpen upholds, with the market's proof, an operator's open
// dispute of offence o on o's lease, so that a charge still undecided
// does not keep the proven offence from its penalty. It returns nil when
// there is none: the offence was convicted already.
func (s *Server) upholdOpen(ctx context.Context, o offence) (*idlegrid.Dispute, error) {
	open, err := s.store.ListDisputes(ctx, idlegrid.DisputeFilter{ProviderID: o.providerID, LeaseID: o.leaseID,
		States: []idlegrid.DisputeState{idlegrid.DisputeOpen}})
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(open, func(d *idlegrid.Dispute) bool { return d.LeaseID == o.leaseID && d.Offence == string(o.kind) })
	if i < 0 {
		return nil, nil
	}
	d := open[i]
	r := idlegrid.DisputeResolution{DisputeID: d.ID, To: idlegrid.DisputeUpheld, By: "market", At: s.Now(),
		Resolution: "proven by the market's own check: " + o.evidence}
	if o.harm > d.HarmMicros { // the penalty is priced, and the dispute kept, on the harm the market measured
		d.HarmMicros, r.HarmMicros = o.harm, o.harm
	}
	if r.Penalty, err = s.penalty(ctx, d); err != nil {
		return nil, err
	}
	r.PenaltyTo = d.PenaltyTo
	r.FollowUp = s.holdFollowUp(d.ID, r.At)
	return s.store.ResolveDispute(ctx, r)
}

// OpenDispute lets an operator charge a provider with an offence the
// market cannot prove by itself, or a renter complain of one on a lease of
// its own (a complaint); it stays open until an admin upholds or
// dismisses it.
func (s *Server) OpenDispute(ctx context.Context, d idlegrid.Dispute) (*idlegrid.Dispute, error) {
	out, _, err := s.OpenDisputeOnce(ctx, d, "")
	return out, err
}

// OpenDisputeOnce is OpenDispute with the caller's idempotency key (""
// for none): the same request sent again with the key answers with the
// dispute the first opened, as it is now, and replayed says so; another
// request with it is refused (ECONFLICT naming idempotency_key). Admins
// share one space of keys; each renter has its own.
func (s *Server) OpenDisputeOnce(ctx context.Context, d idlegrid.Dispute, key string) (out *idlegrid.Dispute, replayed bool, err error) {
	c, err := account(ctx)
	if err != nil {
		return nil, false, err
	}
	asked := d // before a complaint's parties are filled in: what a request sent again must match
	if c.Role == idlegrid.RoleRenter {
		if d, err = s.complaint(ctx, d); err != nil {
			return nil, false, err
		}
	} else if _, err := requireManage(ctx, idlegrid.RoleAdmin); err != nil {
		return nil, false, err
	}
	if !knownOffence(d.Offence) {
		return nil, false, idlegrid.Invalid("dispute.offence", "must be %s, got %q", idlegrid.OrList(trustpolicy.Offences), d.Offence)
	} else if d.HarmMicros < 0 {
		return nil, false, idlegrid.Invalid("dispute.harm_micros", "must not be negative")
	} else if err := idlegrid.CheckEvidence(d.Evidence); err != nil {
		return nil, false, err
	}
	digest, err := disputeRequestSHA256(asked)
	if err != nil {
		return nil, false, err
	}
	if key != "" {
		if err := ledger.CheckIdempotencyKey("idempotency_key", key); err != nil {
			return nil, false, err
		}
		if c.Role == idlegrid.RoleRenter {
			key = "renter:" + c.AccountID + ":" + key // a renter's keys are its own
		}
		if first, err := s.disputeOpenedWith(ctx, key, digest); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			return first, err == nil, err
		}
	}
	renter, err := s.checkParties(ctx, d)
	if err != nil {
		return nil, false, err
	}
	o := offence{kind: trustpolicy.Offence(d.Offence), providerID: d.ProviderID, nodeID: d.NodeID,
		leaseID: d.LeaseID, renterID: renter, harm: d.HarmMicros, evidence: d.Evidence,
		idempotencyKey: key, requestSHA256: digest}
	out, err = s.openDispute(ctx, o, idlegrid.DisputeOpen, "", "")
	if key != "" && conflictOn(err, "idempotency_key") { // sent twice at once: the other was stored
		first, err := s.disputeOpenedWith(ctx, key, digest)
		return first, err == nil, err
	} else if err == nil && c.Role == idlegrid.RoleRenter {
		s.noticeDispute(ctx, out, out.ProviderID, "opened", fmt.Sprintf(
			"renter %s complained of %s on lease %s (dispute %s): %s. An admin decides it; your bond cannot be released meanwhile",
			out.RenterID, out.Offence, out.LeaseID, out.ID, idlegrid.ClipText(out.Evidence, 300)))
	}
	return out, false, err
}

// noticeDispute tells account accountID that dispute d was opened or
// decided (event), once. A notice that cannot be stored is logged: the
// dispute stands, and its parties find it in their disputes.
func (s *Server) noticeDispute(ctx context.Context, d *idlegrid.Dispute, accountID, event, message string) {
	n := &idlegrid.Notice{ID: idlegrid.NewID("ntc"), AccountID: accountID, Kind: idlegrid.NoticeDispute,
		Key: "dispute-" + event + ":" + d.ID + ":" + accountID, LeaseID: d.LeaseID, Message: message, CreatedAt: s.Now()}
	if _, err := s.store.AddNotice(ctx, n); err != nil {
		s.log.Error("a dispute's notice", "dispute", d.ID, "account", accountID, "err", err)
	}
}

// noticeDecided tells a decided dispute's provider and renter how it was
// decided and what moved, and an upheld one's provider how long its nodes
// hold level 0 (the offence hold), whether an admin decided it or the
// market proved it.
func (s *Server) noticeDecided(ctx context.Context, d *idlegrid.Dispute) {
	what := "dismissed: nothing moved"
	if d.State == idlegrid.DisputeUpheld {
		var moved []string
		if d.PenaltyMicros > 0 {
			moved = append(moved, fmt.Sprintf("%s from the provider's bond to the %s", d.PenaltyMicros, d.PenaltyTo))
		}
		if d.RefundMicros > 0 {
			moved = append(moved, fmt.Sprintf("%s refunded to the renter from the lease's pending earnings", d.RefundMicros))
		}
		if d.FeeRefundMicros > 0 {
			moved = append(moved, fmt.Sprintf("%s refunded to the renter from the market's fee on the lease", d.FeeRefundMicros))
		}
		what = "upheld: " + cmp.Or(strings.Join(moved, ", "), "nothing moved (no bond, and no earnings of the lease pending)")
	}
	msg := fmt.Sprintf("dispute %s (%s", d.ID, d.Offence)
	if d.LeaseID != "" {
		msg += " on lease " + d.LeaseID
	}
	msg += ") was " + what + ": " + idlegrid.ClipText(d.Resolution, 300)
	if d.RenterID != "" {
		s.noticeDispute(ctx, d, d.RenterID, "decided", msg)
	}
	s.noticeDispute(ctx, d, d.ProviderID, "decided", msg+s.holdNotice(d))
}

// holdNotice says, for an upheld dispute's provider, until when its nodes
// hold level 0; "" when the policy holds nothing or d was dismissed.
func (s *Server) holdNotice(d *idlegrid.Dispute) string {
	pol := s.trust.policy
	if d.State != idlegrid.DisputeUpheld || pol.Levels.OffenceHold <= 0 {
		return ""
	}
	msg := fmt.Sprintf(". Every node of yours holds level 0 (newcomer) until %s, whatever its record",
		upheldAt(d).Add(pol.Levels.OffenceHold).UTC().Format(time.RFC3339))
	if pol.Gold.MinLevel > 0 {
		msg += ", and takes no gold work meanwhile"
	}
	return msg + " (the trust policy's offence hold)"
}

// DefaultComplaintWindow is how long after a lease's end its renter may
// complain about it, unless Config says.
const DefaultComplaintWindow = 30 * 24 * time.Hour

// days says d in whole days, or in hours when it is shorter than two.
func days(d time.Duration) string {
	switch {
	case d == time.Hour:
		return "1 hour"
	case d < 48*time.Hour:
		return fmt.Sprintf("%g hours", d.Hours())
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

// complaint checks a renter's complaint about a lease of its own and fills
// in the parties from the lease: a renter names only the lease, the
// offence, its evidence and its harm, which is at most what the lease
// cost it (its charge, or its hold while it runs) and, when left at 0,
// that, within Config.ComplaintWindow of the lease's end. A lease not the
// renter's is not found, as for any other reader.
func (s *Server) complaint(ctx context.Context, d idlegrid.Dispute) (idlegrid.Dispute, error) {
	c, err := requireUse(ctx, idlegrid.RoleRenter)
	if err != nil {
		return d, err
	} else if d.LeaseID == "" {
		return d, idlegrid.Invalid("dispute.lease_id", "required: a renter complains about a lease of its own ('idlegrid job get JOB' lists a job's leases)")
	}
	l, err := s.store.FindLease(ctx, d.LeaseID)
	if err == nil && l.RenterID != c.AccountID {
		err = idlegrid.Errorf(idlegrid.ENOTFOUND, "lease %q not found", d.LeaseID)
	}
	if err != nil {
		return d, err
	}
	if window := s.cfg.ComplaintWindow; l.EndedAt != nil && s.Now().Sub(*l.EndedAt) > window {
		return d, idlegrid.Invalid("dispute.lease_id", "lease %s ended %s, more than %s ago: a renter complains within %s of a lease's end (an admin may still open a dispute)",
			l.ID, l.EndedAt.UTC().Format(time.RFC3339), days(window), days(window))
	}
	var f idlegrid.Faults
	f.Check(d.RenterID == "" || d.RenterID == c.AccountID, "dispute.renter_id", "a renter complains for itself: leave it out, or name %s", c.AccountID)
	f.Check(d.ProviderID == "" || d.ProviderID == l.ProviderID, "dispute.provider_id", "lease %s ran for provider %s, not %s: leave it out", l.ID, l.ProviderID, d.ProviderID)
	f.Check(d.NodeID == "" || d.NodeID == l.NodeID, "dispute.node_id", "lease %s ran on node %s, not %s: leave it out", l.ID, l.NodeID, d.NodeID)
	cost := l.ChargedMicros
	if !l.State.Terminal() {
		cost = l.HoldMicros
	}
	f.Check(d.HarmMicros <= cost, "dispute.harm_micros", "at most what lease %s cost you, %s; got %s", l.ID, cost, d.HarmMicros)
	if err := f.Err(); err != nil {
		return d, err
	}
	d.RenterID, d.ProviderID, d.NodeID = c.AccountID, l.ProviderID, l.NodeID
	if d.HarmMicros == 0 {
		d.HarmMicros = cost
	}
	return d, nil
}

// disputeRequestSHA256 is the digest of what an operator asks of
// OpenDispute, hex: what a request sent again under its key must match.
func disputeRequestSHA256(d idlegrid.Dispute) (string, error) {
	b, err := json.Marshal(struct {
		Offence    string          `json:"offence"`
		ProviderID string          `json:"provider_id"`
		NodeID     string          `json:"node_id"`
		LeaseID    string          `json:"lease_id"`
		RenterID   string          `json:"renter_id"`
		HarmMicros idlegrid.Micros `json:"harm_micros"`
		Evidence   string          `json:"evidence"`
	}{d.Offence, d.ProviderID, d.NodeID, d.LeaseID, d.RenterID, d.HarmMicros, d.Evidence})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// disputeOpenedWith returns the dispute opened with key, if it was asked as digest
// says; ENOTFOUND when the key opened none, ECONFLICT when it opened one
// for another request.
func (s *Server) disputeOpenedWith(ctx context.Context, key, digest string) (*idlegrid.Dispute, error) {
	d, err := s.store.FindDisputeByIdempotencyKey(ctx, key)
	if err != nil {
		return nil, err
	} else if d.RequestSHA256 != digest {
		return nil, &idlegrid.Error{Code: idlegrid.ECONFLICT, Field: "idempotency_key", Message: fmt.Sprintf(
			"idempotency key %q was used for dispute %s, which was asked otherwise; use a new key for a new dispute", key, d.ID)}
	}
	return d, nil
}

func knownOffence(o string) bool {
	for _, k := range trustpolicy.Offences {
		if string(k) == o {
			return true
		}
	}
	return false
}

// openDispute stores the dispute for o, upheld with its penalty or open.
func (s *Server) openDispute(ctx context.Context, o offence, state idlegrid.DisputeState, by, resolution string) (*idlegrid.Dispute, error) {
	now := s.Now()
	d := &idlegrid.Dispute{
		ID: idlegrid.NewID("dispute"), Offence: string(o.kind), State: state, ProviderID: o.providerID,
		NodeID: o.nodeID, LeaseID: o.leaseID, RenterID: o.renterID, Evidence: o.evidence,
		HarmMicros: max(o.harm, 0), PolicySHA256: s.cfg.TrustPolicy.SHA256, CreatedAt: now,
		IdempotencyKey: o.idempotencyKey, RequestSHA256: o.requestSHA256,
	}
	if o.detail != nil {
		b, err := json.Marshal(o.detail)
		if err != nil {
			return nil, err
		}
		d.Detail = b
	}
	var penalty *idlegrid.Transfer
	var held *idlegrid.FollowUp
	if state == idlegrid.DisputeUpheld {
		d.Resolution, d.ResolvedBy, d.ResolvedAt = resolution, by, &now
		var err error
		if penalty, err = s.penalty(ctx, d); err != nil {
			return nil, err
		}
		held = s.holdFollowUp(d.ID, now)
	}
	if err := s.store.OpenDispute(ctx, d, penalty, held); err != nil {
		return nil, err
	}
	return d, nil
}

// penalty prices d's offence under the trust policy against the
// provider's bond now, sets d's penalty fields, and returns the transfer
// that takes it, with the refund to the harmed renter of what the bond did
// not pay: from the lease's earnings still pending, then from the
// platform's fee on the lease (refundable); nil when it takes nothing.
func (s *Server) penalty(ctx context.Context, d *idlegrid.Dispute) (*idlegrid.Transfer, error) {
	b, err := s.store.Balance(ctx, d.ProviderID)
	if err != nil {
		return nil, err
	}
	amount, to := s.cfg.TrustPolicy.Penalty(trustpolicy.Offence(d.Offence), b.Bond, d.HarmMicros)
	var t *idlegrid.Transfer
	paid := idlegrid.Micros(0) // of the harm, to the renter
	if amount > 0 {
		if t, paid, err = s.slash(d, amount, to); err != nil {
			return nil, err
		}
	}
	earnings, fee, err := s.refundable(ctx, d, paid)
	if err != nil {
		return nil, err
	}
	if earnings > 0 {
		if t, err = ledger.Refund(t, d.ProviderID, d.RenterID, d.LeaseID, d.ID, d.Offence, earnings, s.Now()); err != nil {
			return nil, err
		}
	}
	if fee > 0 {
		if t, err = ledger.RefundFee(t, d.RenterID, d.LeaseID, d.ID, d.Offence, fee, s.Now()); err != nil {
			return nil, err
		}
	}
	if t != nil {
		t.ID = idlegrid.NewID("tx")
	}
	return t, nil
}

// slash sets d's penalty of amount from the bond, to whom the policy
// says, and returns its transfer and what of it the harmed renter gets.
func (s *Server) slash(d *idlegrid.Dispute, amount idlegrid.Micros, to trustpolicy.Recipient) (*idlegrid.Transfer, idlegrid.Micros, error) {
	renter := ""
	if to == trustpolicy.ToRenter {
		renter = d.RenterID
	}
	d.PenaltyMicros, d.PenaltyTo = amount, string(to)
	if to == trustpolicy.ToRenter && renter == "" {
		d.PenaltyTo = string(trustpolicy.ToPlatform) // no renter was harmed
	}
	t, err := ledger.Slash(d.ProviderID, renter, amount, d.ID, d.Offence, s.Now())
	if err != nil {
		return nil, 0, err
	}
	t.LeaseID = d.LeaseID // the lease it is about, if any: the lease's parties find it by it
	if renter == "" {
		return t, 0, nil
	}
	return t, amount, nil
}

// refundable is what of a renter's harm the bond did not pay (paid) comes
// back to it from the lease the dispute is about: first from the
// provider's earnings from it, while they are pending in the payout hold,
// then from the platform's fee on it, which the market does not keep for
// work a dispute proved bad. Both are 0 when the dispute names no harmed
// renter of the lease.
func (s *Server) refundable(ctx context.Context, d *idlegrid.Dispute, paid idlegrid.Micros) (earnings, fee idlegrid.Micros, err error) {
	if d.RenterID == "" || d.LeaseID == "" || d.HarmMicros <= paid {
		return 0, 0, nil
	}
	l, err := s.store.FindLease(ctx, d.LeaseID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return 0, 0, nil
	} else if err != nil {
		return 0, 0, err
	} else if l.ProviderID != d.ProviderID || l.RenterID != d.RenterID {
		return 0, 0, nil
	}
	e, err := s.store.LeaseEarnings(ctx, d.LeaseID)
	if err != nil {
		return 0, 0, err
	}
	left := min(d.HarmMicros-paid, ledger.MaxPayoutMicros)
	earnings = min(left, e.Refundable())
	return earnings, min(left-earnings, e.FeeRefundable()), nil
}

// FindDispute returns a dispute its provider, its renter or an admin may
// see.
func (s *Server) FindDispute(ctx context.Context, id string) (*idlegrid.Dispute, error) {
	c, err := account(ctx)
	if err != nil {
		return nil, err
	}
	d, err := s.store.FindDispute(ctx, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, notFound("dispute", id)
	} else if err != nil {
		return nil, err
	}
	if !c.IsAdmin() && c.AccountID != d.ProviderID && c.AccountID != d.RenterID {
		return nil, notFound("dispute", id)
	}
	return d, nil
}

// ListDisputes lists disputes: an admin's any, a provider's those against
// it, a renter's those it was harmed in.
func (s *Server) ListDisputes(ctx context.Context, f idlegrid.DisputeFilter) ([]*idlegrid.Dispute, error) {
	c, err := account(ctx)
	if err != nil {
		return nil, err
	}
	if f.ProviderID, err = ownProvider(c, f.ProviderID); err != nil {
		return nil, err
	}
	if c.Role == idlegrid.RoleRenter {
		f.RenterID = c.AccountID
	}
	if err := checkLimit(f.Limit); err != nil {
		return nil, err
	}
	for _, st := range f.States {
		if !st.Valid() {
			return nil, idlegrid.Invalid("state", "must be open, upheld or dismissed, got %q", st)
		}
	}
	if err := s.checkDisputeCursor(ctx, f); err != nil {
		return nil, err
	}
	return s.store.ListDisputes(ctx, f)
}

// checkDisputeCursor refuses a page's cursor that is not a dispute of
// the filter's provider and renter (any, where the filter names none).
func (s *Server) checkDisputeCursor(ctx context.Context, f idlegrid.DisputeFilter) error {
	if f.Before == "" {
		return nil
	}
	d, err := s.store.FindDispute(ctx, f.Before)
	outside := err == nil && (f.ProviderID != "" && d.ProviderID != f.ProviderID || f.RenterID != "" && d.RenterID != f.RenterID)
	if outside || idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return idlegrid.Invalid("before", "no dispute %s in this list to list from; give the last dispute ID of the page before", f.Before)
	}
	return err
}

// ResolveDispute lets an admin uphold an open dispute, taking the policy's
// penalty from the bond, or dismiss it.
func (s *Server) ResolveDispute(ctx context.Context, id string, to idlegrid.DisputeState, resolution string) (*idlegrid.Dispute, error) {
	c, err := requireManage(ctx, idlegrid.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if err := idlegrid.CheckResolution(resolution, to); err != nil {
		return nil, err
	}
	d, err := s.store.FindDispute(ctx, id)
	if err != nil {
		return nil, err
	}
	r := idlegrid.DisputeResolution{DisputeID: id, To: to, Resolution: resolution, By: c.AccountID, At: s.Now()}
	switch to {
	case idlegrid.DisputeUpheld:
		if r.Penalty, err = s.penalty(ctx, d); err != nil {
			return nil, err
		}
		r.PenaltyTo, r.FollowUp = d.PenaltyTo, s.holdFollowUp(id, r.At)
	case idlegrid.DisputeDismissed:
	default:
		return nil, idlegrid.Invalid("state", "a dispute is upheld or dismissed, not %q", to)
	}
	out, err := s.store.ResolveDispute(ctx, r)
	if err != nil {
		return nil, err
	}
	s.log.Info("dispute resolved", "dispute", id, "state", to, "penalty", out.PenaltyMicros.String(), "by", c.AccountID)
	s.noticeDecided(ctx, out)
	if to == idlegrid.DisputeUpheld {
		s.restandSoon(out)
	}
	return out, nil
}

// fakeHardware convicts the provider of a node whose hardware challenge
// failed: the challenge, its answer and the judge's findings are the
// evidence. No renter was harmed by the challenge itself, so the policy's
// penalty goes to the market.
func (s *Server) fakeHardware(ctx context.Context, c *idlegrid.Challenge, why string) error {
	n, err := s.store.FindNode(ctx, c.NodeID)
	if err != nil {
		s.log.Error("fake hardware: find node", "node", c.NodeID, "err", err)
		return err
	}
	_, err = s.tryConvict(ctx, offence{
		kind: trustpolicy.OffenceFakeHardware, providerID: n.ProviderID, nodeID: n.ID,
		evidence: fmt.Sprintf("hardware challenge %s failed: %s", c.ID, why),
		detail:   c,
	})
	if err != nil {
		s.log.Error("record offence", "offence", trustpolicy.OffenceFakeHardware, "provider", n.ProviderID, "node", n.ID, "err", err)
	}
	return err
}

// brokenNotice convicts the provider of a lease that was guaranteed notice
// and was stopped by its node without it, ending as to for reason: harm is
// what the renter paid for the work the stop threw away, approximated by
// the lease's charge. A second conviction of the lease changes nothing.
func (s *Server) brokenNotice(ctx context.Context, l *idlegrid.Lease, to idlegrid.LeaseState, reason string, charge idlegrid.Micros) error {
	_, err := s.tryConvict(ctx, offence{
		kind: trustpolicy.OffenceBrokenNotice, providerID: l.ProviderID, nodeID: l.NodeID, leaseID: l.ID,
		renterID: l.RenterID, harm: charge,
		evidence: fmt.Sprintf("lease %s was guaranteed %ds notice and was stopped by its node without it: %s",
			l.ID, l.NoticeSeconds, reason),
		detail: map[string]any{"lease_id": l.ID, "notice_seconds": l.NoticeSeconds, "notice_at": l.NoticeAt,
			"stop_requested": l.StopRequested, "ended": to, "reason": reason},
	})
	return err
}
