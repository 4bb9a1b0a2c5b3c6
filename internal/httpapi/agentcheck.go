package httpapi

import (
	"net/http"

	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// GET /v1/agent/node: the calling node's own record.
func (a *api) agentNode(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	n, err := a.srv.AgentNode(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, n)
}

// POST /v1/agent/join-tokens/check: whether a join token would let a node
// join now, without using it. The token's secret is the credential.
func (a *api) checkJoinToken(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var b wire.JoinTokenCheck
	if err := a.readJSON(w, r, &b); err != nil {
		return err
	}
	t, err := a.srv.CheckJoinToken(r.Context(), b.Token)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.JoinTokenChecked{JoinToken: t})
}
