package httpapi

import (
	"net/http"
	"time"

	"github.com/idlegrid/idlegrid/internal/gateway"
)

// gatewayRoutes mounts the OpenAI-compatible inference gateway
// (internal/gateway) when the server has one. It authenticates, limits and
// times its own requests, and answers in OpenAI's error format rather than
// the API's, since OpenAI's SDKs are its clients; streams last as long as
// the answer does, so the API's request timeout does not apply. Its
// requests are counted and timed by route with the API's.
func (a *api) gatewayRoutes() {
	if a.opts.Gateway == nil {
		return
	}
	for _, p := range gateway.Patterns {
		a.mux.Handle(p, a.counted(p, a.opts.Gateway))
	}
}

// counted is h, its answers counted and timed under pattern.
func (a *api) counted(pattern string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w := &statusWriter{ResponseWriter: rw}
		defer func() {
			a.guard.note(r, w.status, a.srv.Now())
			a.http.observe(pattern, w.status, time.Since(start))
		}()
		if err := a.guard.admit(r, a.srv.Now()); err != nil {
			refuseOpenAI(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}
