package httpapi

import "github.com/idlegrid/idlegrid/internal/gateway"

// gatewayRoutes mounts the OpenAI-compatible inference gateway
// (internal/gateway) when the server has one. It authenticates, limits and
// times its own requests, and answers in OpenAI's error format rather than
// the API's, since OpenAI's SDKs are its clients; streams last as long as
// the answer does, so the API's request timeout does not apply.
func (a *api) gatewayRoutes() {
	if a.opts.Gateway == nil {
		return
	}
	for _, p := range gateway.Patterns {
		a.mux.Handle(p, a.opts.Gateway)
	}
}
