package httpapi

import (
	"net/http"

	"github.com/idlegrid/idlegrid"
)

// nodeScheduleRequest is the body of PUT /v1/nodes/{id}/schedule.
type nodeScheduleRequest struct {
	Schedule idlegrid.Schedule `json:"schedule"`
}

// GET /v1/nodes/{id}/schedule
func (a *api) nodeSchedule(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	ns, err := a.srv.NodeSchedule(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ns)
}

// PUT /v1/nodes/{id}/schedule
func (a *api) setNodeSchedule(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var req nodeScheduleRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	ns, err := a.srv.SetNodeSchedule(r.Context(), r.PathValue("id"), &req.Schedule)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ns)
}

// DELETE /v1/nodes/{id}/schedule hands the schedule back to the agent.
func (a *api) removeNodeSchedule(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	ns, err := a.srv.SetNodeSchedule(r.Context(), r.PathValue("id"), nil)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ns)
}
