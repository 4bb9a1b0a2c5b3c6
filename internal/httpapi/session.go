package httpapi

import (
	"net/http"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/session"
)

// sessionRoute answers GET /v1/agent/session: a node's agent, signed as on
// every agent call, opening its session (see internal/session). Unlike the
// other routes it has no time limit, since it lasts as long as the session,
// and once upgraded it answers nothing itself: the requests on the session
// are answered by the API, through onSession.
func (a *api) sessionRoute() http.Handler {
	open := a.withNode(a.openSession)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				a.log.Error("http: panic", "method", r.Method, "path", r.URL.Path, "panic", p)
			}
		}()
		var err error
		if a.opts.Sessions == nil {
			err = idlegrid.Errorf(idlegrid.ENOTFOUND, "this server offers no agent sessions; use the agent API over plain HTTP")
		} else {
			err = open(w, r)
		}
		if err != nil {
			a.writeError(w, r, err)
		}
	})
}

// openSession upgrades a request that withNode has authenticated to the
// node's session and serves it until it ends.
func (a *api) openSession(w http.ResponseWriter, r *http.Request) error {
	nodeID := idlegrid.CallerFromContext(r.Context()).NodeID
	return a.opts.Sessions.Serve(w, r, nodeID, a.onSession(nodeID))
}

// onSession serves the requests that arrive on nodeID's session: that
// node's agent API, which withNode then authenticates exactly as on a plain
// connection. The session proves nothing by itself: a request for another
// node, or for anything but the agent API, is refused.
func (a *api) onSession(nodeID string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		switch p := r.URL.Path; {
		case !strings.HasPrefix(p, "/v1/agent/") || p == "/v1/agent/join" || p == session.Path:
			err = idlegrid.Errorf(idlegrid.EFORBIDDEN, "only node %s's agent API travels on its session; send %s %s over plain HTTP", nodeID, r.Method, p)
		case r.Header.Get(nodekey.HeaderNode) != nodeID:
			err = idlegrid.Errorf(idlegrid.EFORBIDDEN, "this session belongs to node %s; requests on it must be signed by that node", nodeID)
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		a.mux.ServeHTTP(w, r)
	})
}
