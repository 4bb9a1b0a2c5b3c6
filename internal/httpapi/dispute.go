package httpapi

import (
	"net/http"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// disputeRoutes registers bonds and disputes (see internal/server/dispute.go).
func (a *api) disputeRoutes(t time.Duration) {
	a.handle("POST /v1/bonds", t, a.withKey(a.postBond))
	a.handle("POST /v1/bonds/release", t, a.withKey(a.releaseBond))
	a.handle("GET /v1/disputes", t, a.withKey(a.listDisputes))
	a.handle("POST /v1/disputes", t, a.withKey(a.openDispute))
	a.handle("GET /v1/disputes/{id}", t, a.withKey(a.findDispute))
	a.handle("POST /v1/disputes/{id}/uphold", t, a.withKey(a.upholdDispute))
	a.handle("POST /v1/disputes/{id}/dismiss", t, a.withKey(a.dismissDispute))
	a.handle("GET /v1/verifications", t, a.withKey(a.listVerifications))
}

// GET /v1/verifications?provider_id=&before=&limit=
func (a *api) listVerifications(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "provider_id", "before", "limit")
	if err != nil {
		return err
	}
	f := idlegrid.VerificationFilter{ProviderID: q.string("provider_id"), Before: q.string("before")}
	if f.Limit, err = q.limit(); err != nil {
		return err
	}
	vs, err := a.srv.ListVerifications(r.Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.Verifications{Verifications: nonNil(vs)})
}

// POST /v1/bonds, with an Idempotency-Key header.
func (a *api) postBond(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	key, err := idempotencyKey(r, "bond")
	if err != nil {
		return err
	}
	var req wire.BondRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	b, replayed, err := a.srv.PostBondOnce(r.Context(), req.ProviderID, req.AmountMicros, key)
	if err != nil {
		return err
	}
	return writeApplied(w, replayed, b)
}

// releaseRequest is the body of POST /v1/bonds/release: a provider
// releases its own bond, so, unlike a deposit's (wire.BondRequest), it
// names no provider, and one that does is refused as an unknown field
// rather than left out unread.
type releaseRequest struct {
	AmountMicros idlegrid.Micros `json:"amount_micros"`
}

// POST /v1/bonds/release, with an Idempotency-Key header.
func (a *api) releaseBond(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	key, err := idempotencyKey(r, "bond release")
	if err != nil {
		return err
	}
	var req releaseRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	b, replayed, err := a.srv.ReleaseBondOnce(r.Context(), req.AmountMicros, key)
	if err != nil {
		return err
	}
	return writeApplied(w, replayed, b)
}

var disputeStates = []idlegrid.DisputeState{idlegrid.DisputeOpen, idlegrid.DisputeUpheld, idlegrid.DisputeDismissed}

// GET /v1/disputes?state=&provider_id=&before=&limit=
func (a *api) listDisputes(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "state", "provider_id", "before", "limit")
	if err != nil {
		return err
	}
	f := idlegrid.DisputeFilter{ProviderID: q.string("provider_id"), Before: q.string("before")}
	if f.States, err = list(q, "state", disputeStates); err != nil {
		return err
	}
	if f.Limit, err = q.limit(); err != nil {
		return err
	}
	ds, err := a.srv.ListDisputes(r.Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.Disputes{Disputes: nonNil(ds)})
}

// POST /v1/disputes: an operator charges a provider, or a renter
// complains about a lease of its own. With
// an Idempotency-Key header, the same request sent again answers 200 with
// the dispute the first opened, and Idempotent-Replayed: true.
func (a *api) openDispute(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	key, err := optionalIdempotencyKey(r)
	if err != nil {
		return err
	}
	var d idlegrid.Dispute
	if err := a.readJSON(w, r, &d); err != nil {
		return err
	}
	if err := checkMarketSet(&d); err != nil {
		return err
	}
	out, replayed, err := a.srv.OpenDisputeOnce(r.Context(), d, key)
	if err != nil {
		return err
	}
	return writeCreated(w, replayed, out)
}

// GET /v1/disputes/{id}
func (a *api) findDispute(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	d, err := a.srv.FindDispute(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, d)
}

// POST /v1/disputes/{id}/uphold
func (a *api) upholdDispute(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	return a.resolveDispute(w, r, idlegrid.DisputeUpheld)
}

// POST /v1/disputes/{id}/dismiss
func (a *api) dismissDispute(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	return a.resolveDispute(w, r, idlegrid.DisputeDismissed)
}

func (a *api) resolveDispute(w http.ResponseWriter, r *http.Request, to idlegrid.DisputeState) error {
	var req wire.ResolveDisputeRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	d, err := a.srv.ResolveDispute(r.Context(), r.PathValue("id"), to, req.Resolution)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, d)
}

// checkMarketSet refuses a dispute to open that sets what only the market
// sets (its ID, state, penalty, resolution, times), which OpenDispute
// would otherwise leave out unread: an operator who sends
// "state":"upheld" must learn that it opened an open dispute, not believe
// it upheld one. The zero values a client that sends a whole Dispute
// (client.OpenDispute) leaves in them are no fault.
func checkMarketSet(d *idlegrid.Dispute) error {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"id", d.ID != ""}, {"state", d.State != ""}, {"detail", len(d.Detail) > 0 && string(d.Detail) != "null"},
		{"penalty_micros", d.PenaltyMicros != 0}, {"penalty_to", d.PenaltyTo != ""}, {"refund_micros", d.RefundMicros != 0}, {"fee_refund_micros", d.FeeRefundMicros != 0},
		{"transfer_id", d.TransferID != ""},
		{"resolution", d.Resolution != ""}, {"resolved_by", d.ResolvedBy != ""}, {"policy_sha256", d.PolicySHA256 != ""},
		{"created_at", !d.CreatedAt.IsZero()}, {"resolved_at", d.ResolvedAt != nil},
	} {
		if f.set {
			return idlegrid.Invalid("dispute."+f.name, "set by the market, not by whoever opens a dispute; leave it out "+
				"(a dispute opens open, and POST /v1/disputes/{id}/uphold or /dismiss resolves it)")
		}
	}
	return nil
}
