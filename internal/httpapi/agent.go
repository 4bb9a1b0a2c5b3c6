package httpapi

import (
	"net/http"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
)

// POST /v1/agent/join, signed by the key in the X-Idlegrid-Public-Key header.
func (a *api) join(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var req idlegrid.JoinRequest
	if err := a.readAgentJSON(w, r, &req); err != nil {
		return err
	}
	if req.PublicKey != r.Header.Get(nodekey.HeaderPublicKey) {
		return idlegrid.Invalid("public_key", "must be the key in the %s header that signed the request", nodekey.HeaderPublicKey)
	}
	resp, err := a.srv.Join(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, resp)
}

// PUT /v1/agent/offer
func (a *api) updateOffer(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var req idlegrid.OfferRequest
	if err := a.readAgentJSON(w, r, &req); err != nil {
		return err
	}
	if err := a.srv.UpdateOffer(r.Context(), req); err != nil {
		return err
	}
	return writeNoContent(w)
}

// POST /v1/agent/heartbeat
func (a *api) heartbeat(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var req idlegrid.HeartbeatRequest
	if err := a.readAgentJSON(w, r, &req); err != nil {
		return err
	}
	resp, err := a.srv.Heartbeat(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, resp)
}

// POST /v1/agent/goodbye: the agent is stopping; the node goes offline.
func (a *api) goodbye(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	if err := a.srv.Goodbye(r.Context()); err != nil {
		return err
	}
	return writeNoContent(w)
}

// GET /v1/agent/commands?wait=SECONDS is the agents' long poll. The wait is
// capped at Options.MaxWait; without one the answer is immediate.
func (a *api) commands(w http.ResponseWriter, r *http.Request) error {
	wait, err := a.longPollWait(r)
	if err != nil {
		return err
	}
	cmds, err := a.srv.Commands(r.Context(), wait)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, idlegrid.CommandsResponse{Commands: nonNil(cmds)})
}

// longPollWait reads a long poll's only parameter, wait (whole seconds),
// capped at Options.MaxWait.
func (a *api) longPollWait(r *http.Request) (time.Duration, error) {
	q, err := parseQuery(r, "wait")
	if err != nil {
		return 0, err
	}
	secs, err := q.int("wait", 0, 0, 24*3600)
	return min(time.Duration(secs)*time.Second, a.opts.MaxWait), err
}

// POST /v1/agent/leases/{id}/report
func (a *api) reportLease(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var rep idlegrid.LeaseReport
	if err := a.readAgentJSON(w, r, &rep); err != nil {
		return err
	}
	if err := a.srv.ReportLease(r.Context(), r.PathValue("id"), rep); err != nil {
		return err
	}
	return writeNoContent(w)
}

// POST /v1/agent/leases/{id}/logs
func (a *api) appendLogs(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var b idlegrid.LogBatch
	if err := a.readAgentJSON(w, r, &b); err != nil {
		return err
	}
	if err := a.srv.AppendLogs(r.Context(), r.PathValue("id"), b); err != nil {
		return err
	}
	return writeNoContent(w)
}
