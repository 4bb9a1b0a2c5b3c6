package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// errorTypes gives each idlegrid error code its OpenAI error type. The
// status comes from the API's one table (Config.StatusCode).
var errorTypes = map[string]string{
	idlegrid.EINVALID:      openai.TypeInvalidRequest,
	idlegrid.ETOOLARGE:     openai.TypeInvalidRequest,
	idlegrid.EUNAUTHORIZED: openai.TypeAuthentication,
	idlegrid.EFORBIDDEN:    openai.TypePermission,
	idlegrid.ENOTFOUND:     openai.TypeNotFound,
	idlegrid.ECONFLICT:     openai.TypeInvalidRequest,
	idlegrid.EPAYMENT:      openai.TypeQuota,
	idlegrid.ETOOMANY:      openai.TypeRateLimit,
	idlegrid.EUNAVAILABLE:  openai.TypeUnavailable,
	idlegrid.EINTERNAL:     openai.TypeServer,
}

// retryAfter marks err as worth sending again after d (at least a
// second): the answer says when in Retry-After, which OpenAI's SDKs
// honour.
func retryAfter(err error, d time.Duration) error { return idlegrid.WithRetryAfter(err, d) }

// ErrorBody is err in OpenAI's format. Internal errors say no more than
// "internal error".
func ErrorBody(err error) openai.ErrorBody {
	code := openAICode(err)
	d := openai.ErrorDetail{Message: idlegrid.ErrorMessage(err), Type: errorTypes[idlegrid.ErrorCode(err)], Code: &code}
	var e *idlegrid.Error
	if errors.As(err, &e) && e.Field != "" {
		d.Param = &e.Field
	}
	if d.Type == "" {
		d.Type = openai.TypeServer
	}
	return openai.ErrorBody{Error: d}
}

// wrongMethod answers a request to a path that takes only method: 405, in
// OpenAI's error format, with Allow.
func (g *Gateway) wrongMethod(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		code := "method_not_allowed"
		w.Header().Set("Allow", method)
		writeJSON(w, http.StatusMethodNotAllowed, openai.ErrorBody{Error: openai.ErrorDetail{
			Message: fmt.Sprintf("method %s is not allowed on %s; use %s", r.Method, r.URL.Path, method),
			Type:    openai.TypeInvalidRequest, Code: &code}})
	}
}

// NoRoute answers a request under /v1 that no route of the gateway's, nor
// of the API's, serves, in OpenAI's error format, since an OpenAI SDK
// pointed at the gateway is what sends one (/v1/audio/speech,
// /v1/batches): 404 with type invalid_request_error, as OpenAI
// answers a URL it does not know, naming the request and the endpoints
// the gateway serves. Where allowed names the methods the path does take,
// it is 405 with Allow instead. It asks for no key, as OpenAI does not and
// the API's own 404 does not: the endpoints are no secret.
func NoRoute(w http.ResponseWriter, r *http.Request, allowed []string) {
	if len(allowed) > 0 {
		code := "method_not_allowed"
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeJSON(w, http.StatusMethodNotAllowed, openai.ErrorBody{Error: openai.ErrorDetail{
			Message: fmt.Sprintf("method %s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allowed, ", ")),
			Type:    openai.TypeInvalidRequest, Code: &code}})
		return
	}
	code := idlegrid.ENOTFOUND
	writeJSON(w, http.StatusNotFound, openai.ErrorBody{Error: openai.ErrorDetail{
		Message: fmt.Sprintf("no such endpoint: %s %s; the inference gateway serves %s (see docs/gateway.md)",
			r.Method, r.URL.Path, endpointList),
		Type: openai.TypeInvalidRequest, Code: &code}})
}

// endpointList names the gateway's OpenAI endpoints, for NoRoute: each of
// openAIPaths with its method, but for the one model's, which GET
// /v1/models stands for.
var endpointList = func() string {
	var names []string
	for _, path := range slices.Sorted(maps.Keys(openAIPaths)) {
		if !strings.Contains(path, "{") {
			names = append(names, openAIPaths[path]+" "+path)
		}
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}()

// writeError answers err in OpenAI's error format, logging internal errors.
func (g *Gateway) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if idlegrid.ErrorCode(err) == idlegrid.EINTERNAL && r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		err = idlegrid.Errorf(idlegrid.EUNAVAILABLE, "request cancelled")
	}
	if idlegrid.ErrorCode(err) == idlegrid.EINTERNAL {
		g.log.Error("gateway: internal error", "path", r.URL.Path, "request", requestID(w), "err", err)
		// Internals stay in the log, as the API keeps them: a renter gets
		// the request's ID to quote.
		err = idlegrid.Errorf(idlegrid.EINTERNAL, "internal error; the operator can find it in the server's log by request %s", requestID(w))
	}
	if idlegrid.ErrorCode(err) == idlegrid.EUNAUTHORIZED {
		w.Header().Set("WWW-Authenticate", `Bearer realm="idlegrid"`)
	}
	if ra := idlegrid.RetryAfterSeconds(err); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	g.countRefusal(err)
	writeJSON(w, g.cfg.StatusCode(idlegrid.ErrorCode(err)), ErrorBody(err))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":"internal"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
