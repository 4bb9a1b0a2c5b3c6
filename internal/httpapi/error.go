package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// codes is the one table that maps idlegrid error codes to HTTP statuses.
var codes = map[string]int{
	idlegrid.EINVALID:      http.StatusBadRequest,
	idlegrid.EUNAUTHORIZED: http.StatusUnauthorized,
	idlegrid.EFORBIDDEN:    http.StatusForbidden,
	idlegrid.ENOTFOUND:     http.StatusNotFound,
	idlegrid.ECONFLICT:     http.StatusConflict,
	idlegrid.EPAYMENT:      http.StatusPaymentRequired,
	idlegrid.ETOOLARGE:     http.StatusRequestEntityTooLarge,
	idlegrid.EUNAVAILABLE:  http.StatusServiceUnavailable,
	idlegrid.ETOOMANY:      http.StatusTooManyRequests,
	idlegrid.EINTERNAL:     http.StatusInternalServerError,
}

// StatusCode returns the HTTP status for an idlegrid error code; unknown
// codes are internal errors.
func StatusCode(code string) int {
	if s, ok := codes[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// writeError writes err in the API's error format. Internal errors are
// logged with their details; the client learns only "internal error".
// Other errors that keep a cause (idlegrid.Wrap) are logged with it, and
// the client learns only their message.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	err = translateContextError(r, err)
	code := idlegrid.ErrorCode(err)
	detail := wire.ErrorDetail{Code: code, Message: idlegrid.ErrorMessage(err)}
	var e *idlegrid.Error
	if errors.As(err, &e) {
		detail.Field = e.Field
		if len(e.More) > 0 {
			for _, p := range e.All() {
				detail.Problems = append(detail.Problems, wire.ErrorProblem{Field: p.Field, Message: p.Error()})
			}
		}
	}
	if ra := idlegrid.RetryAfterSeconds(err); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	switch {
	case code == idlegrid.EINTERNAL:
		a.log.Error("http: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		detail = wire.ErrorDetail{Code: idlegrid.EINTERNAL, Message: "internal error"}
	case e != nil && e.Unwrap() != nil:
		// A caller-safe answer (a 503 for the database being down) whose
		// cause the operator needs: the client never sees it.
		a.log.Warn("http: "+code, "method", r.Method, "path", r.URL.Path, "err", err, "cause", e.Unwrap())
	}
	_ = writeJSON(w, StatusCode(code), wire.ErrorBody{Error: detail}) // an ErrorBody always encodes
}

// translateContextError turns the end of the request's own context into a
// caller-safe error: a timeout means "try again", not a bug.
func translateContextError(r *http.Request, err error) error {
	if idlegrid.ErrorCode(err) != idlegrid.EINTERNAL || r.Context().Err() == nil {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "the server took too long to answer; try again")
	}
	if errors.Is(err, context.Canceled) {
		return idlegrid.Errorf(idlegrid.EUNAVAILABLE, "request cancelled")
	}
	return err
}

func joinComma(s []string) string { return strings.Join(s, ", ") }
