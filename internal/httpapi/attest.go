package httpapi

import (
	"net/http"
	"time"

	"github.com/idlegrid/idlegrid"
)

// attestRoutes registers hardware attestation, challenges and quarantine
// (docs/trust.md); t is the routes' time limit.
func (a *api) attestRoutes(t time.Duration) {
	a.handle("POST /v1/agent/attestation", t, a.withNode(a.attest))
	a.handle("GET /v1/agent/challenges", t, a.withNode(a.pendingChallenges))
	a.handle("POST /v1/agent/challenges/{id}/answer", t, a.withNode(a.answerChallenge))

	a.handle("GET /v1/nodes/{id}/attestation", t, a.withKey(a.nodeAttestation))
	a.handle("GET /v1/nodes/{id}/challenges", t, a.withKey(a.listChallenges))
	a.handle("POST /v1/nodes/{id}/challenge", t, a.withKey(a.noBody(a.challengeNode)))
	a.handle("POST /v1/nodes/{id}/quarantine", t, a.withKey(a.quarantineNode))
	a.handle("POST /v1/nodes/{id}/quarantine/lift", t, a.withKey(a.liftQuarantine))
	a.handle("GET /v1/quarantine", t, a.withKey(a.listQuarantines))
}

// POST /v1/agent/attestation
func (a *api) attest(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var req idlegrid.AttestRequest
	if err := a.readAgentJSON(w, r, &req); err != nil {
		return err
	}
	resp, err := a.srv.Attest(r.Context(), req)
	if err != nil {
		return err
	}
	resp.Changes, resp.Challenges = nonNil(resp.Changes), nonNil(resp.Challenges)
	return writeJSON(w, http.StatusOK, resp)
}

// GET /v1/agent/challenges
func (a *api) pendingChallenges(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	resp, err := a.srv.PendingChallenges(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, resp)
}

// POST /v1/agent/challenges/{id}/answer
func (a *api) answerChallenge(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var ans idlegrid.ChallengeAnswer
	if err := a.readAgentJSON(w, r, &ans); err != nil {
		return err
	}
	c, err := a.srv.AnswerChallenge(r.Context(), r.PathValue("id"), ans)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, c)
}

// GET /v1/nodes/{id}/attestation
func (a *api) nodeAttestation(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	v, err := a.srv.NodeAttestation(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	v.History, v.Changes, v.Challenges, v.Quarantines = nonNil(v.History), nonNil(v.Changes), nonNil(v.Challenges), nonNil(v.Quarantines)
	return writeJSON(w, http.StatusOK, v)
}

// POST /v1/nodes/{id}/challenge (admins)
func (a *api) challengeNode(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	cs, err := a.srv.ChallengeNode(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, idlegrid.ChallengesResponse{Challenges: nonNil(cs)})
}

// quarantineRequest is the body of POST /v1/nodes/{id}/quarantine.
type quarantineRequest struct {
	Reason string `json:"reason"`
}

// POST /v1/nodes/{id}/quarantine (admins)
func (a *api) quarantineNode(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var req quarantineRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	q, err := a.srv.QuarantineNode(r.Context(), r.PathValue("id"), req.Reason)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, q)
}

// POST /v1/nodes/{id}/quarantine/lift (admins)
func (a *api) liftQuarantine(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var req idlegrid.LiftQuarantineRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	q, err := a.srv.LiftQuarantine(r.Context(), r.PathValue("id"), req.Note)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, q)
}

// GET /v1/quarantine?state=active|all&before=&limit= (default active)
func (a *api) listQuarantines(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "state", "before", "limit")
	if err != nil {
		return err
	}
	f := idlegrid.QuarantineFilter{Before: q.string("before")}
	switch state := q.string("state"); state {
	case "", "active":
		f.ActiveOnly = true
	case "all":
	default:
		return idlegrid.Invalid("state", "must be active or all, got %q", state)
	}
	if f.Limit, err = q.limit(); err != nil {
		return err
	}
	qs, err := a.srv.ListQuarantines(r.Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, nonNil(qs))
}

// GET /v1/nodes/{id}/challenges?state=&before=&limit=
func (a *api) listChallenges(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "state", "before", "limit")
	if err != nil {
		return err
	}
	f := idlegrid.ChallengeFilter{Before: q.string("before")}
	if f.States, err = list(q, "state", idlegrid.ChallengeStates); err != nil {
		return err
	}
	if f.Limit, err = q.limit(); err != nil {
		return err
	}
	cs, err := a.srv.ListChallenges(r.Context(), r.PathValue("id"), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, idlegrid.ChallengesResponse{Challenges: nonNil(cs)})
}
