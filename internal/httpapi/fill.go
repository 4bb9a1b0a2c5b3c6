package httpapi

import (
	"net/http"

	"github.com/idlegrid/idlegrid"
)

// GET /v1/providers/{id}/fill?days=N: the provider's fill rate and
// earnings per UTC day (server.ProviderFill).
func (a *api) providerFill(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "days")
	if err != nil {
		return err
	}
	days, err := q.int("days", idlegrid.DefaultFillDays, 1, idlegrid.MaxFillDays)
	if err != nil {
		return err
	}
	h, err := a.srv.ProviderFill(r.Context(), r.PathValue("id"), int(days))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, h)
}
