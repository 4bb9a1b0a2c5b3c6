package httpapi

import (
	"math"
	"net/http"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/server"
)

// The audit log (docs/trust.md, docs/api.md "Audit log").

func (a *api) auditRoutes() {
	t := a.opts.RequestTimeout
	a.handle("GET /v1/audit/head", t, a.withKey(a.auditHead))
	a.handle("GET /v1/audit/consistency", t, a.withKey(a.auditConsistency))
	a.handle("GET /v1/audit/entries", t, a.withKey(a.auditEntries))
}

// GET /v1/audit/head
func (a *api) auditHead(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	h, err := a.srv.AuditHead(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.AuditHead{Head: *h, LogKey: audit.PublicKeyString(a.srv.AuditKey())})
}

// GET /v1/audit/consistency?from=&to=
func (a *api) auditConsistency(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "from", "to")
	if err != nil {
		return err
	}
	from, err := q.int("from", 0, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	to, err := q.int("to", -1, 0, math.MaxInt64)
	if err != nil {
		return err
	} else if to < 0 {
		return idlegrid.Invalid("to", "required: the size of the later tree head")
	}
	p, err := a.srv.AuditConsistency(r.Context(), uint64(from), uint64(to))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

// GET /v1/audit/entries?account_id=&tree_size=&from=&limit=
func (a *api) auditEntries(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "account_id", "tree_size", "from", "limit")
	if err != nil {
		return err
	}
	size, err := q.int("tree_size", 0, 1, math.MaxInt64)
	if err != nil {
		return err
	}
	from, err := q.int("from", 0, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	limit, err := q.int("limit", 0, 1, server.MaxAuditEntries)
	if err != nil {
		return err
	}
	page, err := a.srv.AuditEntries(r.Context(), server.AuditQuery{
		AccountID: q.string("account_id"), TreeSize: uint64(size), From: uint64(from), Limit: int(limit),
	})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.AuditEntries{Head: *page.Head, Entries: page.Entries, Next: page.Next})
}
