package httpapi

import "net/http"

// PUT /v1/nodes/{id}/drain starts draining a node for maintenance.
func (a *api) drainNode(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	return a.setDraining(w, r, true)
}

// DELETE /v1/nodes/{id}/drain ends the drain: the node takes work again.
func (a *api) undrainNode(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	return a.setDraining(w, r, false)
}

func (a *api) setDraining(w http.ResponseWriter, r *http.Request, on bool) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	n, err := a.srv.DrainNode(r.Context(), r.PathValue("id"), on)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, n)
}

// POST /v1/nodes/{id}/retire takes the node out of the market for good.
func (a *api) retireNode(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	n, err := a.srv.RetireNode(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, n)
}
