package httpapi

import "net/http"

// GET /v1/jobs/{id}/explain
func (a *api) explainJob(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	x, err := a.srv.Explain(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, x)
}

// GET /v1/market
func (a *api) marketView(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	stats, err := a.srv.Market(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, stats)
}
