package httpapi

import "net/http"

// reputationRoutes serves reputations and the trust policy (docs/trust.md).
// Anyone signed in sees a node's or provider's standing; its owner and
// admins also see the evidence behind it.
func (a *api) reputationRoutes() {
	t := a.opts.RequestTimeout
	a.handle("GET /v1/nodes/{id}/reputation", t, a.withKey(a.nodeReputation))
	a.handle("GET /v1/providers/{id}/reputation", t, a.withKey(a.providerReputation))
	a.handle("GET /v1/trust-policy", t, a.withKey(a.trustPolicy))
}

// GET /v1/nodes/{id}/reputation
func (a *api) nodeReputation(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	v, err := a.srv.NodeReputation(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

// GET /v1/providers/{id}/reputation
func (a *api) providerReputation(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	v, err := a.srv.ProviderReputation(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

// GET /v1/trust-policy
func (a *api) trustPolicy(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	v, err := a.srv.TrustPolicyView(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}
