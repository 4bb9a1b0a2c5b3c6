package httpapi

import (
	"net/http"

	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// POST /v1/agent/leases/{id}/receipts
func (a *api) sendReceipts(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var b wire.ReceiptBatch
	if err := a.readAgentJSON(w, r, &b); err != nil {
		return err
	}
	if err := a.srv.ReceiveReceipts(r.Context(), r.PathValue("id"), b.Receipts); err != nil {
		return err
	}
	return writeNoContent(w)
}

// GET /v1/agent/leases/{id}/receipts/last
func (a *api) lastReceipt(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	last, err := a.srv.LastReceipt(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.LastReceipt{Receipt: last})
}

// GET /v1/leases/{id}/receipts
func (a *api) leaseReceipts(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	rs, err := a.srv.LeaseReceipts(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, rs)
}
